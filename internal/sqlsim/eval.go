package sqlsim

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/backupcycle/backupcycle/internal/sqlsim/tds"
)

// Values inside the engine are nil, int64, float64, string, bool,
// time.Time or []byte. Comparisons of strings follow the instance collation
// (SQL_Latin1_General_CP1_CI_AS): case-insensitive, trailing spaces ignored.

type variable struct {
	typ string // declared type, lower case ("" for RPC parameters)
	v   any
}

// relCol is one column of a relation (a table source or a result).
type relCol struct {
	qual string // table alias or name, lower case
	name string
	col  tds.Column
}

type relation struct {
	cols []relCol
	rows [][]any
	gen  *tableDef // generated table: rows not materialised
}

// env is what an expression sees: the current row and the variables.
type env struct {
	x    *execCtx
	rel  *relation
	row  []any
	aggs map[*funcExpr]any // computed aggregates
}

func normValue(v any) any {
	switch x := v.(type) {
	case int:
		return int64(x)
	case int32:
		return int64(x)
	case int16:
		return int64(x)
	case uint8:
		return int64(x)
	case uint16:
		return int64(x)
	case uint32:
		return int64(x)
	case float32:
		return float64(x)
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int64(x) // JSON numbers of the metadata
		}
	}
	return v
}

func (e *env) lookupCol(parts []string) (int, error) {
	name := parts[len(parts)-1]
	qual := ""
	if len(parts) > 1 {
		qual = strings.ToLower(parts[len(parts)-2])
	}
	if e.rel == nil {
		return -1, errInvalidColumn(name)
	}
	found := -1
	for i, c := range e.rel.cols {
		if strings.EqualFold(c.name, name) && (qual == "" || c.qual == qual) {
			if found >= 0 && qual == "" {
				return -1, sqlErr(209, 16, "Ambiguous column name '%s'.", name)
			}
			found = i
			if qual != "" {
				break
			}
		}
	}
	if found < 0 {
		known := false // a known table or alias without that column: 207
		for _, c := range e.rel.cols {
			known = known || (qual != "" && c.qual == qual)
		}
		if qual != "" && !known {
			return -1, sqlErr(4104, 16, "The multi-part identifier \"%s\" could not be bound.", strings.Join(parts, "."))
		}
		return -1, errInvalidColumn(name)
	}
	return found, nil
}

func (e *env) eval(x expr) (any, error) {
	switch n := x.(type) {
	case *litExpr:
		return n.v, nil
	case *varExpr:
		v, ok := e.x.vars[strings.ToLower(n.name)]
		if !ok {
			return nil, errMustDeclare(n.name)
		}
		return normValue(v.v), nil
	case *sysVarExpr:
		return e.x.sysVar(n.name)
	case *colExpr:
		i, err := e.lookupCol(n.parts)
		if err != nil {
			return nil, err
		}
		if e.row == nil {
			return nil, errInvalidColumn(n.parts[len(n.parts)-1])
		}
		return normValue(e.row[i]), nil
	case *funcExpr:
		if v, ok := e.aggs[n]; ok {
			return v, nil
		}
		if isAggregate(n) {
			return nil, sqlErr(147, 15, "An aggregate may not appear in the WHERE clause unless it is in a subquery contained in a HAVING clause or a select list, and the column being aggregated is an outer reference.")
		}
		return e.call(n)
	case *binExpr:
		return e.binary(n)
	case *unaryExpr:
		v, err := e.eval(n.e)
		if err != nil {
			return nil, err
		}
		if n.op == "NOT" {
			if v == nil {
				return nil, nil
			}
			return !truthy(v), nil
		}
		switch t := v.(type) {
		case int64:
			return -t, nil
		case float64:
			return -t, nil
		case nil:
			return nil, nil
		}
		return nil, sqlErr(8117, 16, "Operand data type is invalid for minus operator.")
	case *isNullExpr:
		v, err := e.eval(n.e)
		if err != nil {
			return nil, err
		}
		return (v == nil) != n.not, nil
	case *inExpr:
		v, err := e.eval(n.e)
		if err != nil {
			return nil, err
		}
		if v == nil {
			return nil, nil
		}
		for _, it := range n.list {
			w, err := e.eval(it)
			if err != nil {
				return nil, err
			}
			if c, ok := compare(v, w); ok && c == 0 {
				return !n.not, nil
			}
		}
		return n.not, nil
	case *likeExpr:
		v, err := e.eval(n.e)
		if err != nil {
			return nil, err
		}
		pv, err := e.eval(n.pattern)
		if err != nil {
			return nil, err
		}
		if v == nil || pv == nil {
			return nil, nil
		}
		return likeMatch(toString(v), toString(pv)) != n.not, nil
	case *existsExpr:
		rel, err := e.x.runSelect(n.q)
		if err != nil {
			return nil, err
		}
		return (len(rel.rows) > 0) != n.not, nil
	case *subqueryExpr:
		rel, err := e.x.runSelect(n.q)
		if err != nil {
			return nil, err
		}
		if len(rel.rows) == 0 {
			return nil, nil
		}
		if len(rel.rows) > 1 {
			return nil, sqlErr(512, 16, "Subquery returned more than 1 value. This is not permitted when the subquery follows =, !=, <, <= , >, >= or when the subquery is used as an expression.")
		}
		return normValue(rel.rows[0][0]), nil
	case *castExpr:
		v, err := e.eval(n.e)
		if err != nil {
			return nil, err
		}
		return castTo(v, n.typ)
	}
	return nil, errNotSupported(fmt.Sprintf("expression %T", x))
}

func castTo(v any, typ string) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch typ {
	case "int", "bigint", "smallint", "tinyint":
		switch t := v.(type) {
		case int64:
			return t, nil
		case float64:
			return int64(t), nil
		case bool:
			if t {
				return int64(1), nil
			}
			return int64(0), nil
		case string:
			n, err := strconv.ParseInt(strings.TrimSpace(t), 10, 64)
			if err != nil {
				return nil, sqlErr(245, 16, "Conversion failed when converting the nvarchar value '%s' to data type %s.", t, typ)
			}
			return n, nil
		}
	case "nvarchar", "varchar", "nchar", "char", "sysname":
		return toString(v), nil
	case "float", "real", "decimal", "numeric":
		switch t := v.(type) {
		case int64:
			return float64(t), nil
		case float64:
			return t, nil
		case string:
			f, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
			if err != nil {
				return nil, sqlErr(8114, 16, "Error converting data type nvarchar to %s.", typ)
			}
			return f, nil
		}
	case "datetime", "datetime2", "date":
		if t, ok := v.(time.Time); ok {
			return t, nil
		}
	}
	return nil, errNotSupported("CAST to " + typ)
}

func toString(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case int64:
		return strconv.FormatInt(t, 10)
	case float64:
		return strconv.FormatFloat(t, 'f', -1, 64)
	case bool:
		if t {
			return "1"
		}
		return "0"
	case time.Time:
		return t.Format("2006-01-02 15:04:05.0000000")
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}

func truthy(v any) bool {
	switch t := v.(type) {
	case bool:
		return t
	case int64:
		return t != 0
	}
	return false
}

// compare orders two values; ok is false when either is NULL or they are
// not comparable.
func compare(a, b any) (int, bool) {
	a, b = normValue(a), normValue(b)
	if a == nil || b == nil {
		return 0, false
	}
	switch x := a.(type) {
	case int64:
		switch y := b.(type) {
		case int64:
			return cmpOrd(x, y), true
		case float64:
			return cmpOrd(float64(x), y), true
		case string:
			if n, err := strconv.ParseInt(strings.TrimSpace(y), 10, 64); err == nil {
				return cmpOrd(x, n), true
			}
		case bool:
			return cmpOrd(x, b2i(y)), true
		}
	case float64:
		switch y := b.(type) {
		case int64:
			return cmpOrd(x, float64(y)), true
		case float64:
			return cmpOrd(x, y), true
		}
	case string:
		switch y := b.(type) {
		case string:
			return strings.Compare(strings.ToLower(strings.TrimRight(x, " ")), strings.ToLower(strings.TrimRight(y, " "))), true
		case int64:
			if n, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64); err == nil {
				return cmpOrd(n, y), true
			}
		}
	case bool:
		switch y := b.(type) {
		case bool:
			return cmpOrd(b2i(x), b2i(y)), true
		case int64:
			return cmpOrd(b2i(x), y), true
		}
	case time.Time:
		if y, ok := b.(time.Time); ok {
			return x.Compare(y), true
		}
	}
	return 0, false
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func cmpOrd[T int64 | float64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func likeMatch(s, pattern string) bool {
	var b strings.Builder
	b.WriteString("(?is)^")
	for _, r := range pattern {
		switch r {
		case '%':
			b.WriteString(".*")
		case '_':
			b.WriteString(".")
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	return err == nil && re.MatchString(s)
}

func (e *env) binary(n *binExpr) (any, error) {
	l, err := e.eval(n.l)
	if err != nil {
		return nil, err
	}
	if n.op == "AND" && l != nil && !truthy(l) {
		return false, nil
	}
	if n.op == "OR" && truthy(l) {
		return true, nil
	}
	r, err := e.eval(n.r)
	if err != nil {
		return nil, err
	}
	switch n.op {
	case "AND":
		if l == nil || r == nil {
			if (r != nil && !truthy(r)) || (l != nil && !truthy(l)) {
				return false, nil
			}
			return nil, nil
		}
		return truthy(r), nil
	case "OR":
		if truthy(r) {
			return true, nil
		}
		if l == nil || r == nil {
			return nil, nil
		}
		return false, nil
	case "=", "<>", "<", ">", "<=", ">=":
		c, ok := compare(l, r)
		if !ok {
			if l != nil && r != nil {
				return nil, sqlErr(245, 16, "Conversion failed when comparing %v to %v.", l, r)
			}
			return nil, nil // UNKNOWN
		}
		switch n.op {
		case "=":
			return c == 0, nil
		case "<>":
			return c != 0, nil
		case "<":
			return c < 0, nil
		case ">":
			return c > 0, nil
		case "<=":
			return c <= 0, nil
		}
		return c >= 0, nil
	}
	if l == nil || r == nil {
		return nil, nil
	}
	if n.op == "+" {
		ls, lok := l.(string)
		rs, rok := r.(string)
		if lok && rok {
			return ls + rs, nil
		}
		if lok || rok { // T-SQL converts the string to the number's type
			if lok {
				l, err = castTo(ls, "bigint")
			} else {
				r, err = castTo(rs, "bigint")
			}
			if err != nil {
				return nil, err
			}
		}
	}
	li, lint := l.(int64)
	ri, rint := r.(int64)
	if lint && rint {
		switch n.op {
		case "+":
			return li + ri, nil
		case "-":
			return li - ri, nil
		case "*":
			return li * ri, nil
		case "/", "%":
			if ri == 0 {
				return nil, sqlErr(8134, 16, "Divide by zero error encountered.")
			}
			if n.op == "/" {
				return li / ri, nil
			}
			return li % ri, nil
		}
	}
	lf, lok := toFloat(l)
	rf, rok := toFloat(r)
	if !lok || !rok {
		return nil, sqlErr(402, 16, "The data types are incompatible in the %s operator.", n.op)
	}
	switch n.op {
	case "+":
		return lf + rf, nil
	case "-":
		return lf - rf, nil
	case "*":
		return lf * rf, nil
	case "/":
		if rf == 0 {
			return nil, sqlErr(8134, 16, "Divide by zero error encountered.")
		}
		return lf / rf, nil
	}
	return nil, errNotSupported("operator " + n.op)
}

func toFloat(v any) (float64, bool) {
	switch t := v.(type) {
	case int64:
		return float64(t), true
	case float64:
		return t, true
	}
	return 0, false
}

func isAggregate(f *funcExpr) bool {
	switch f.name {
	case "COUNT", "COUNT_BIG", "MAX", "MIN", "SUM":
		return true
	}
	return false
}

func (e *env) arg(f *funcExpr, i int) (any, error) {
	if i >= len(f.args) {
		return nil, sqlErr(174, 15, "The %s function requires %d argument(s).", strings.ToLower(f.name), i+1)
	}
	return e.eval(f.args[i])
}

func (e *env) call(f *funcExpr) (any, error) {
	x := e.x
	switch f.name {
	case "DB_ID":
		if len(f.args) == 0 {
			return int64(x.currentDB().ID), nil
		}
		v, err := e.arg(f, 0)
		if err != nil || v == nil {
			return nil, err
		}
		if d := x.in.lookupDB(toString(v)); d != nil {
			return int64(d.ID), nil
		}
		return nil, nil
	case "DB_NAME":
		if len(f.args) == 0 {
			return x.currentDB().Name, nil
		}
		v, err := e.arg(f, 0)
		if err != nil || v == nil {
			return nil, err
		}
		id, _ := normValue(v).(int64)
		if d := x.in.dbByID(int(id)); d != nil {
			return d.Name, nil
		}
		return nil, nil
	case "OBJECT_ID":
		v, err := e.arg(f, 0)
		if err != nil || v == nil {
			return nil, err
		}
		return x.objectID(toString(v))
	case "SCHEMA_ID":
		v, err := e.arg(f, 0)
		if err != nil || v == nil {
			return nil, err
		}
		md, err := x.in.readMetadata(x.currentDB())
		if err != nil {
			return nil, err
		}
		for i, s := range md.Schemas {
			if strings.EqualFold(s, toString(v)) {
				return int64(i + 1), nil
			}
		}
		return nil, nil
	case "DATABASEPROPERTYEX":
		v, err := e.arg(f, 0)
		if err != nil {
			return nil, err
		}
		pv, err := e.arg(f, 1)
		if err != nil || v == nil || pv == nil {
			return nil, err
		}
		for _, d := range x.in.allDatabases() {
			if strings.EqualFold(d.Name, toString(v)) {
				r := databaseProperty(d, toString(pv))
				if t, ok := r.(time.Time); ok && !d.LastGoodCheckDB.IsZero() {
					r = x.in.serverTime(t) // datetime: the server's wall clock
				}
				return r, nil
			}
		}
		return nil, nil
	case "SERVERPROPERTY":
		v, err := e.arg(f, 0)
		if err != nil {
			return nil, err
		}
		return x.in.serverProperty(toString(v)), nil
	case "GETDATE", "SYSDATETIME", "CURRENT_TIMESTAMP":
		return x.in.serverTime(time.Now()), nil // the server's wall clock
	case "GETUTCDATE", "SYSUTCDATETIME":
		return time.Now().UTC(), nil
	case "SUSER_SNAME", "SUSER_NAME", "ORIGINAL_LOGIN":
		// The login's name as defined on the server, whatever case the
		// client typed it in.
		if l := x.in.principal(x.s.login.User); l != nil {
			return l.Name, nil
		}
		return x.s.login.User, nil
	case "USER_NAME", "CURRENT_USER":
		if x.in.isDBOwner(x.sessionLogin(), x.currentDB()) {
			return "dbo", nil
		}
		return x.s.login.User, nil
	case "HAS_PERMS_BY_NAME":
		var args [3]any
		for i := range args {
			v, err := e.arg(f, i)
			if err != nil {
				return nil, err
			}
			args[i] = v
		}
		return x.hasPermsByName(args[0], args[1], args[2])
	case "IS_SRVROLEMEMBER", "IS_MEMBER":
		role, err := e.arg(f, 0)
		if err != nil {
			return nil, err
		}
		if f.name == "IS_MEMBER" {
			return x.isMember(role), nil
		}
		var login any
		if len(f.args) > 1 {
			if login, err = e.arg(f, 1); err != nil {
				return nil, err
			}
		}
		return x.isSrvRoleMember(role, login), nil
	case "HOST_NAME":
		return x.s.login.HostName, nil
	case "APP_NAME":
		return x.s.login.AppName, nil
	case "ISNULL", "COALESCE":
		for i := range f.args {
			v, err := e.eval(f.args[i])
			if err != nil {
				return nil, err
			}
			if v != nil {
				return v, nil
			}
		}
		return nil, nil
	case "LEN", "UPPER", "LOWER", "LTRIM", "RTRIM", "QUOTENAME":
		v, err := e.arg(f, 0)
		if err != nil || v == nil {
			return nil, err
		}
		s := toString(v)
		switch f.name {
		case "LEN":
			return int64(len([]rune(strings.TrimRight(s, " ")))), nil
		case "UPPER":
			return strings.ToUpper(s), nil
		case "LOWER":
			return strings.ToLower(s), nil
		case "LTRIM":
			return strings.TrimLeft(s, " "), nil
		case "RTRIM":
			return strings.TrimRight(s, " "), nil
		}
		return "[" + strings.ReplaceAll(s, "]", "]]") + "]", nil
	case "RIGHT", "LEFT":
		v, err := e.arg(f, 0)
		if err != nil {
			return nil, err
		}
		nv, err := e.arg(f, 1)
		if err != nil || v == nil || nv == nil {
			return nil, err
		}
		r := []rune(toString(v))
		n, _ := normValue(nv).(int64)
		n = min(max(n, 0), int64(len(r)))
		if f.name == "LEFT" {
			return string(r[:n]), nil
		}
		return string(r[int64(len(r))-n:]), nil
	}
	return nil, sqlErr(195, 15, "'%s' is not a recognized built-in function name.", strings.ToLower(f.name))
}

// exprColumn infers the result column of an expression.
func (e *env) exprColumn(x expr, name string) tds.Column {
	c := tds.Column{Name: name, Nullable: true}
	switch n := x.(type) {
	case *colExpr:
		if i, err := e.lookupCol(n.parts); err == nil {
			c = e.rel.cols[i].col
			c.Name = name
			return c
		}
	case *litExpr:
		switch v := n.v.(type) {
		case int64:
			if v >= math.MinInt32 && v <= math.MaxInt32 {
				c.Type = tds.TypeInt
			} else {
				c.Type = tds.TypeBigInt
			}
			c.Nullable = false
			return c
		case float64:
			c.Type = tds.TypeFloat
			return c
		case string:
			c.Type, c.Size = tds.TypeNVarChar, max(len([]rune(v)), 1)
			return c
		}
		c.Type = tds.TypeInt
		return c
	case *varExpr:
		if v, ok := e.x.vars[strings.ToLower(n.name)]; ok {
			switch v.typ {
			case "int":
				c.Type = tds.TypeInt
				return c
			case "bigint":
				c.Type = tds.TypeBigInt
				return c
			}
		}
	case *sysVarExpr:
		switch n.name {
		case "@@SPID", "@@LANGID":
			c.Type = tds.TypeSmallInt
		case "@@ROWCOUNT", "@@ERROR", "@@TRANCOUNT":
			c.Type = tds.TypeInt
		default:
			c.Type, c.Size = tds.TypeNVarChar, 300
		}
		return c
	case *funcExpr:
		switch n.name {
		case "COUNT", "DB_ID", "OBJECT_ID", "SCHEMA_ID", "LEN", "HAS_PERMS_BY_NAME", "IS_SRVROLEMEMBER", "IS_MEMBER":
			c.Type = tds.TypeInt
			return c
		case "COUNT_BIG":
			c.Type = tds.TypeBigInt
			return c
		case "MAX", "MIN", "ISNULL", "COALESCE":
			if len(n.args) > 0 {
				c = e.exprColumn(n.args[0], name)
				c.Nullable = true
				return c
			}
		case "SUM":
			c.Type = tds.TypeBigInt
			return c
		case "SERVERPROPERTY", "DATABASEPROPERTYEX":
			c.Type = tds.TypeVariant
			return c
		case "GETDATE", "GETUTCDATE", "CURRENT_TIMESTAMP":
			c.Type = tds.TypeDateTime
			return c
		case "SYSDATETIME", "SYSUTCDATETIME":
			c.Type = tds.TypeDateTime2
			return c
		}
		c.Type, c.Size = tds.TypeNVarChar, 4000
		return c
	case *castExpr:
		switch n.typ {
		case "int", "smallint", "tinyint":
			c.Type = tds.TypeInt
		case "bigint":
			c.Type = tds.TypeBigInt
		case "float", "real", "decimal", "numeric":
			c.Type = tds.TypeFloat
		case "datetime":
			c.Type = tds.TypeDateTime
		case "datetime2", "date":
			c.Type = tds.TypeDateTime2
		default:
			c.Type, c.Size = tds.TypeNVarChar, 4000
		}
		return c
	case *binExpr:
		switch n.op {
		case "+", "-", "*", "/", "%":
			l := e.exprColumn(n.l, name)
			r := e.exprColumn(n.r, name)
			if l.Type == tds.TypeNVarChar || r.Type == tds.TypeNVarChar {
				if l.Type == r.Type {
					l.Size = 4000
					return l
				}
			}
			if l.Type == tds.TypeBigInt || r.Type == tds.TypeBigInt {
				l.Type = tds.TypeBigInt
			}
			if l.Type == tds.TypeFloat || r.Type == tds.TypeFloat {
				l.Type = tds.TypeFloat
			}
			return l
		}
		c.Type = tds.TypeBit
		return c
	case *subqueryExpr:
		c.Type, c.Size = tds.TypeNVarChar, 4000
		return c
	case *isNullExpr, *inExpr, *likeExpr, *existsExpr:
		c.Type = tds.TypeBit
		return c
	}
	// Fall back on the runtime value.
	v, _ := e.eval(x)
	switch v.(type) {
	case int64:
		c.Type = tds.TypeBigInt
	case float64:
		c.Type = tds.TypeFloat
	case bool:
		c.Type = tds.TypeBit
	case time.Time:
		c.Type = tds.TypeDateTime2
	default:
		c.Type, c.Size = tds.TypeNVarChar, 4000
	}
	return c
}

// columnName is SQL Server's name for an unaliased select item: the column
// name for a column reference, "" otherwise.
func columnName(it selItem) string {
	if it.alias != "" {
		return it.alias
	}
	if c, ok := it.e.(*colExpr); ok {
		return c.parts[len(c.parts)-1]
	}
	return ""
}

// runSelect evaluates a SELECT into a relation (columns + rows).
func (x *execCtx) runSelect(q *selectStmt) (*relation, error) {
	src := &relation{rows: [][]any{nil}}
	if q.from != nil {
		var err error
		if src, err = x.source(q.from); err != nil {
			return nil, err
		}
	}
	top := int64(-1)
	if q.top != nil {
		v, err := (&env{x: x}).eval(q.top)
		if err != nil {
			return nil, err
		}
		n, ok := normValue(v).(int64)
		if !ok || n < 0 {
			return nil, sqlErr(1060, 15, "The number of rows provided for a TOP or FETCH clauses row count parameter must be an integer.")
		}
		top = n
	}
	// Output columns.
	var items []selItem
	for _, it := range q.items {
		if it.star {
			if src.gen != nil || q.from == nil {
				return nil, errNotSupported("SELECT * here")
			}
			n := len(items)
			for _, c := range src.cols {
				if it.starQual == "" || c.qual == strings.ToLower(it.starQual) {
					items = append(items, selItem{e: &colExpr{parts: []string{c.qual, c.name}}, alias: c.name})
				}
			}
			if len(items) == n {
				return nil, sqlErr(107, 15, "The column prefix '%s' does not match with a table name or alias name used in the query.", it.starQual)
			}
			continue
		}
		items = append(items, it)
	}
	var aggs []*funcExpr
	for _, it := range items {
		collectAggs(it.e, &aggs)
	}
	if src.gen != nil {
		return x.selectGenerated(q, src, items, aggs)
	}
	// Filter.
	var rows [][]any
	for _, r := range src.rows {
		if q.where != nil {
			v, err := (&env{x: x, rel: src, row: r}).eval(q.where)
			if err != nil {
				return nil, err
			}
			if !truthy(v) {
				continue
			}
		}
		rows = append(rows, r)
	}
	out := &relation{}
	envFor := func(r []any) *env { return &env{x: x, rel: src, row: r} }
	for _, it := range items {
		out.cols = append(out.cols, relCol{name: columnName(it), col: envFor(firstRow(rows)).exprColumn(it.e, columnName(it))})
	}
	if len(aggs) > 0 {
		vals, err := x.aggregate(src, rows, aggs)
		if err != nil {
			return nil, err
		}
		ev := &env{x: x, rel: src, row: firstRow(rows), aggs: vals}
		row := make([]any, len(items))
		for i, it := range items {
			if row[i], err = ev.eval(it.e); err != nil {
				return nil, err
			}
		}
		out.rows = [][]any{row}
	} else {
		type sorted struct {
			src []any
			out []any
		}
		var all []sorted
		for _, r := range rows {
			ev := envFor(r)
			row := make([]any, len(items))
			for i, it := range items {
				v, err := ev.eval(it.e)
				if err != nil {
					return nil, err
				}
				row[i] = v
			}
			all = append(all, sorted{r, row})
		}
		if len(q.order) > 0 {
			keys := make([][]any, len(all))
			for i, s := range all {
				for _, o := range q.order {
					v, err := x.orderKey(o.e, src, s.src, items, s.out)
					if err != nil {
						return nil, err
					}
					keys[i] = append(keys[i], v)
				}
			}
			idx := make([]int, len(all))
			for i := range idx {
				idx[i] = i
			}
			sort.SliceStable(idx, func(a, b int) bool {
				for k, o := range q.order {
					c, ok := compare(keys[idx[a]][k], keys[idx[b]][k])
					if !ok {
						// NULLs first, as SQL Server sorts them.
						an, bn := keys[idx[a]][k] == nil, keys[idx[b]][k] == nil
						if an == bn {
							continue
						}
						c = 1
						if an {
							c = -1
						}
					}
					if c != 0 {
						return (c < 0) != o.desc
					}
				}
				return false
			})
			re := make([]sorted, len(all))
			for i, j := range idx {
				re[i] = all[j]
			}
			all = re
		}
		for _, s := range all {
			out.rows = append(out.rows, s.out)
		}
	}
	if top >= 0 && int64(len(out.rows)) > top {
		out.rows = out.rows[:top]
	}
	return out, nil
}

// orderKey evaluates an ORDER BY item: an output alias, a column position
// or an expression over the source row.
func (x *execCtx) orderKey(e expr, src *relation, srow []any, items []selItem, orow []any) (any, error) {
	if l, ok := e.(*litExpr); ok {
		if n, ok := l.v.(int64); ok && n >= 1 && int(n) <= len(items) {
			return orow[n-1], nil
		}
	}
	if c, ok := e.(*colExpr); ok && len(c.parts) == 1 {
		for i, it := range items {
			if it.alias != "" && strings.EqualFold(it.alias, c.parts[0]) {
				return orow[i], nil
			}
		}
	}
	return (&env{x: x, rel: src, row: srow}).eval(e)
}

func firstRow(rows [][]any) []any {
	if len(rows) == 0 {
		return nil
	}
	return rows[0]
}

func collectAggs(e expr, out *[]*funcExpr) {
	switch n := e.(type) {
	case *funcExpr:
		if isAggregate(n) {
			*out = append(*out, n)
			return
		}
		for _, a := range n.args {
			collectAggs(a, out)
		}
	case *binExpr:
		collectAggs(n.l, out)
		collectAggs(n.r, out)
	case *unaryExpr:
		collectAggs(n.e, out)
	case *castExpr:
		collectAggs(n.e, out)
	}
}

func (x *execCtx) aggregate(src *relation, rows [][]any, aggs []*funcExpr) (map[*funcExpr]any, error) {
	out := map[*funcExpr]any{}
	for _, f := range aggs {
		var acc any
		var count int64
		for _, r := range rows {
			if f.star {
				count++
				continue
			}
			if len(f.args) != 1 {
				return nil, sqlErr(174, 15, "The %s function requires 1 argument(s).", strings.ToLower(f.name))
			}
			v, err := (&env{x: x, rel: src, row: r}).eval(f.args[0])
			if err != nil {
				return nil, err
			}
			if v == nil {
				continue
			}
			count++
			switch f.name {
			case "MAX", "MIN":
				if acc == nil {
					acc = v
				} else if c, ok := compare(v, acc); ok && ((f.name == "MAX" && c > 0) || (f.name == "MIN" && c < 0)) {
					acc = v
				}
			case "SUM":
				if acc == nil {
					acc = v
				} else {
					s, err := (&env{x: x}).binary(&binExpr{op: "+", l: &litExpr{v: acc}, r: &litExpr{v: v}})
					if err != nil {
						return nil, err
					}
					acc = s
				}
			}
		}
		switch f.name {
		case "COUNT", "COUNT_BIG":
			out[f] = count
		default:
			out[f] = acc
		}
	}
	return out, nil
}

// selectGenerated answers the aggregate queries a generated table supports
// from its metadata: COUNT(*), COUNT_BIG(*), MAX(col), MIN(col), without
// WHERE.
func (x *execCtx) selectGenerated(q *selectStmt, src *relation, items []selItem, aggs []*funcExpr) (*relation, error) {
	t := src.gen
	name := t.Schema + "." + t.Name
	if q.where != nil || len(aggs) == 0 {
		return nil, errNotSupported("reading rows of the generated table " + name + " (only COUNT(*), COUNT_BIG(*), MAX(col) and MIN(col) without WHERE)")
	}
	vals := map[*funcExpr]any{}
	for _, f := range aggs {
		switch {
		case (f.name == "COUNT" || f.name == "COUNT_BIG") && f.star:
			vals[f] = t.RowCount
		case f.name == "MAX" || f.name == "MIN":
			if len(f.args) != 1 {
				return nil, sqlErr(174, 15, "The %s function requires 1 argument(s).", strings.ToLower(f.name))
			}
			c, ok := f.args[0].(*colExpr)
			if !ok {
				return nil, errNotSupported(f.name + " of an expression on " + name)
			}
			col := c.parts[len(c.parts)-1]
			_, cd := t.column(col)
			if cd == nil {
				return nil, errInvalidColumn(col)
			}
			v := cd.Max
			if f.name == "MIN" {
				v = cd.Min
			}
			if t.RowCount == 0 {
				v = nil
			}
			vals[f] = columnValue(cd, v)
		default:
			return nil, errNotSupported(f.name + " on the generated table " + name)
		}
	}
	out := &relation{}
	ev := &env{x: x, rel: src, aggs: vals}
	row := make([]any, len(items))
	for i, it := range items {
		out.cols = append(out.cols, relCol{name: columnName(it), col: ev.exprColumn(it.e, columnName(it))})
		v, err := ev.eval(it.e)
		if err != nil {
			return nil, err
		}
		row[i] = v
	}
	out.rows = [][]any{row}
	return out, nil
}

// columnValue converts a stored (JSON) value to the engine type of cd.
func columnValue(cd *columnDef, v any) any {
	if v == nil {
		return nil
	}
	switch cd.Type {
	case "datetime2", "datetime", "date":
		if s, ok := v.(string); ok {
			if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
				return t
			}
		}
	case "int", "bigint", "smallint", "tinyint":
		return normValue(v)
	}
	return v
}

func sqlColumn(cd columnDef) tds.Column {
	c := tds.Column{Name: cd.Name, Nullable: !cd.NotNull}
	switch cd.Type {
	case "int", "smallint", "tinyint":
		c.Type = tds.TypeInt
	case "bigint":
		c.Type = tds.TypeBigInt
	case "datetime":
		c.Type = tds.TypeDateTime
	case "datetime2", "date":
		c.Type = tds.TypeDateTime2
	case "bit":
		c.Type = tds.TypeBit
	case "float", "real", "decimal", "numeric":
		c.Type = tds.TypeFloat
	default:
		c.Type, c.Size = tds.TypeNVarChar, 4000
	}
	return c
}

// databaseProperty answers DATABASEPROPERTYEX(db, property).
func databaseProperty(d database, prop string) any {
	switch strings.ToLower(prop) {
	case "status":
		if d.State == "RESTORING" || d.State == "OFFLINE" {
			return d.State
		}
		return "ONLINE"
	case "useraccess":
		return d.UserAccess
	case "recovery":
		if d.system {
			return "SIMPLE"
		}
		return "FULL"
	case "lastgoodcheckdbtime":
		// "If DBCC CHECKDB has not been run on a database, 1900-01-01
		// 00:00:00.000 is returned" (SQL Server 2016 SP2 and later:
		// https://learn.microsoft.com/sql/t-sql/functions/databasepropertyex-transact-sql).
		if d.LastGoodCheckDB.IsZero() {
			return time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC)
		}
		return d.LastGoodCheckDB
	case "updateability":
		// READ_ONLY after ALTER DATABASE ... SET READ_ONLY
		// (https://learn.microsoft.com/en-us/sql/t-sql/functions/databasepropertyex-transact-sql).
		if d.ReadOnly {
			return "READ_ONLY"
		}
		return "READ_WRITE"
	case "collation":
		return "SQL_Latin1_General_CP1_CI_AS"
	}
	return nil
}
