package sqlsim

import (
	"bytes"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/backupcycle/backupcycle/internal/sqlsim/tds"
)

// Values inside the engine are nil, int64, float64, string, bool,
// time.Time or []byte. Comparisons of strings follow the instance collation
// (Config.Collation, collation.go; trailing spaces ignored).

type variable struct {
	v   any
	col *varType // declared type; nil when not known
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
			if c, ok := e.x.in.coll.compareValues(v, w); ok && c == 0 {
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
		exact := typ == "decimal" || typ == "numeric"
		switch t := v.(type) {
		case int64:
			if exact {
				return t, nil
			}
			return float64(t), nil
		case float64:
			return t, nil
		case string:
			// decimal and numeric are exact ("decimal and numeric
			// (Transact-SQL)"): a whole number stays one, digit for digit
			// (an LSN is numeric(25,0), "Recover to a Log Sequence Number").
			if n, err := strconv.ParseInt(strings.TrimSpace(t), 10, 64); exact && err == nil {
				return n, nil
			}
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

// compareValues orders two values (strings by the collation); ok is false when either is NULL or they are
// not comparable.
func (c collation) compareValues(a, b any) (int, bool) {
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
			return c.compare(x, y), true
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
			// datetime and datetime2 are not "time zone offset aware"
			// (https://learn.microsoft.com/en-us/sql/t-sql/data-types/datetime-transact-sql):
			// SQL Server compares the wall clocks as stored, whatever zone
			// each was written in.
			return wallClock(x).Compare(wallClock(y)), true
		}
	case []byte:
		// varbinary against varbinary, byte by byte (a thumbprint matched
		// against sys.certificates.thumbprint).
		if y, ok := b.([]byte); ok {
			return bytes.Compare(x, y), true
		}
	case [16]byte:
		// uniqueidentifier against uniqueidentifier (the availability
		// group views joined on replica_id and group_id); equality is
		// what matters, the order here is byte order, not SQL Server's.
		if y, ok := b.([16]byte); ok {
			return bytes.Compare(x[:], y[:]), true
		}
		// Against a character string, the string is converted: a
		// uniqueidentifier outranks the character types ("Data type
		// precedence (Transact-SQL)"); msdb's backup_set_uuid looked up by
		// a parameter.
		if y, ok := b.(string); ok {
			if g, ok := guidFromText(y); ok {
				return bytes.Compare(x[:], g[:]), true
			}
		}
	}
	if x, ok := a.(string); ok {
		if y, ok := b.([16]byte); ok {
			if g, ok := guidFromText(x); ok {
				return bytes.Compare(g[:], y[:]), true
			}
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
		c, ok := e.x.in.coll.compareValues(l, r)
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
