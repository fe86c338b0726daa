package sqlsim

import (
	"math"
	"sort"
	"strings"
	"time"

	"github.com/backupcycle/backupcycle/internal/sqlsim/tds"
)

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
		case []byte:
			c.Type, c.Size = tds.TypeVarBinary, max(len(v), 1)
			c.Nullable = false
			return c
		}
		c.Type = tds.TypeInt
		return c
	case *varExpr:
		if v, ok := e.x.vars[strings.ToLower(n.name)]; ok && v.col != nil {
			c = v.col.col
			c.Name, c.Nullable = name, true
			return c
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
		if len(n.parts) > 1 {
			// A user-defined function: its declared type, without calling
			// it (a call may have effects).
			if c, ok := e.functionColumn(n, name); ok {
				return c
			}
			c.Type, c.Size = tds.TypeNVarChar, 4000
			return c
		}
		switch n.name {
		case "COUNT", "DB_ID", "OBJECT_ID", "SCHEMA_ID", "LEN", "HAS_PERMS_BY_NAME", "IS_SRVROLEMEMBER", "IS_MEMBER", "DATABASE_PRINCIPAL_ID":
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
		case "SUSER_SID":
			c.Type, c.Size = tds.TypeVarBinary, 85 // varbinary(85)
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
	case []byte:
		c.Type, c.Size = tds.TypeVarBinary, 8000
		if len(v.([]byte)) > 8000 {
			c.Size = 0 // varbinary(max)
		}
	case string:
		c.Type, c.Size = tds.TypeNVarChar, 4000
		if utf16Len(v.(string)) > 4000 {
			c.Size = 0 // nvarchar(max)
		}
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
					c, ok := x.in.coll.compareValues(keys[idx[a]][k], keys[idx[b]][k])
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
				} else if c, ok := x.in.coll.compareValues(v, acc); ok && ((f.name == "MAX" && c > 0) || (f.name == "MIN" && c < 0)) {
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
func databaseProperty(d database, prop, collation string) any {
	switch strings.ToLower(prop) {
	case "status":
		if d.State == "RESTORING" || d.State == "OFFLINE" {
			return d.State
		}
		return "ONLINE"
	case "useraccess":
		return d.UserAccess
	case "recovery":
		return recoveryModel(&d)
	case "lastgoodcheckdbtime":
		// "If DBCC CHECKDB has not been run on a database, 1900-01-01
		// 00:00:00.000 is returned" (SQL Server 2016 SP2 and later:
		// https://learn.microsoft.com/sql/t-sql/functions/databasepropertyex-transact-sql).
		// The value is a datetime on the wall clock of the server whose
		// CHECKDB set it: on a restored copy, its source's (see
		// database.LastGoodCheckDB), whatever this server's zone.
		if t, ok := parseWallClock(d.LastGoodCheckDB); ok {
			return t
		}
		return time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC)
	case "updateability":
		// READ_ONLY after ALTER DATABASE ... SET READ_ONLY
		// (https://learn.microsoft.com/en-us/sql/t-sql/functions/databasepropertyex-transact-sql).
		if d.ReadOnly {
			return "READ_ONLY"
		}
		return "READ_WRITE"
	case "collation":
		return collation // databases take the server collation (collation.go)
	}
	return nil
}
