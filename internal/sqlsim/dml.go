package sqlsim

import (
	"strings"
	"time"

	"github.com/backupcycle/backupcycle/internal/sqlsim/tds"
)

// DDL and DML on user tables: CREATE SCHEMA/TABLE, ALTER TABLE, INSERT and
// UPDATE, with their constraints.

func (x *execCtx) createSchema(n *createSchemaStmt) error {
	d := x.currentDB()
	if d.system {
		return errNotSupported("CREATE SCHEMA in a system database")
	}
	if err := x.mayWrite(d, "CREATE SCHEMA"); err != nil {
		return err
	}
	return x.in.updateMetadata(d, func(md *metadata) error {
		if containsFold(md.Schemas, n.name) || strings.EqualFold(n.name, "sys") {
			return sqlErr(2714, 16, "There is already an object named '%s' in the database.", n.name)
		}
		md.Schemas = append(md.Schemas, n.name)
		return nil
	})
}

func (x *execCtx) tableTarget(o objName) (*database, string, string, error) {
	dbName, schema, name, err := x.resolveName(o)
	if err != nil {
		return nil, "", "", err
	}
	if schema == "" {
		schema = "dbo"
	}
	d, err := x.userDB(dbName)
	if err != nil {
		return nil, "", "", err
	}
	if d.system {
		return nil, "", "", errNotSupported("tables in system database " + d.Name)
	}
	return d, schema, name, nil
}

func (x *execCtx) createTable(n *createTableStmt) error {
	d, schema, name, err := x.tableTarget(n.name)
	if err != nil {
		return err
	}
	if err := x.mayWrite(d, "CREATE TABLE"); err != nil {
		return err
	}
	for _, c := range n.cols {
		switch c.Type {
		case "int", "bigint", "smallint", "tinyint", "nvarchar", "varchar", "nchar", "char", "datetime", "datetime2", "date", "bit", "sysname":
		default:
			return errNotSupported("column type " + c.Type)
		}
	}
	return x.in.updateMetadata(d, func(md *metadata) error {
		if !containsFold(md.Schemas, schema) {
			return sqlErr(2760, 16, "The specified schema name \"%s\" either does not exist or you do not have permission to use it.", schema)
		}
		if findTable(md, schema, name) != nil {
			return sqlErr(2714, 16, "There is already an object named '%s' in the database.", name)
		}
		t := &tableDef{Schema: schema, Name: name, ObjectID: uint32(901578250 + 32000011*len(md.Tables)), Columns: n.cols, PrimaryKey: n.pk, Checks: n.checks}
		if n.pk != nil {
			for _, c := range n.pk.Columns {
				_, cd := t.column(c)
				if cd == nil {
					return sqlErr(1911, 16, "Column name '%s' does not exist in the target table or view.", c)
				}
				cd.NotNull = true
			}
		}
		md.Tables = append(md.Tables, t)
		return nil
	})
}

func (x *execCtx) alterTable(n *alterTableStmt) error {
	d, schema, name, err := x.tableTarget(n.name)
	if err != nil {
		return err
	}
	if err := x.mayWrite(d, "ALTER"); err != nil {
		return err
	}
	return x.in.updateMetadata(d, func(md *metadata) error {
		t := findTable(md, schema, name)
		if t == nil {
			return sqlErr(4902, 16, "Cannot find the object \"%s\" because it does not exist or you do not have permissions.", n.name.String())
		}
		if n.check == nil {
			return nil
		}
		for _, c := range t.Checks {
			if strings.EqualFold(c.Name, n.check.Name) {
				return sqlErr(2714, 16, "There is already an object named '%s' in the database.", c.Name)
			}
		}
		if err := x.checkRows(t, t.Rows, "ALTER TABLE", d.Name); err != nil {
			return err
		}
		t.Checks = append(t.Checks, *n.check)
		return nil
	})
}

// checkRows enforces the CHECK constraints and the primary key.
func (x *execCtx) checkRows(t *tableDef, rows [][]any, verb, dbName string) error {
	rel := &relation{}
	for _, c := range t.Columns {
		rel.cols = append(rel.cols, relCol{name: c.Name, col: sqlColumn(c)})
	}
	for _, ck := range t.Checks {
		toks, err := lex(ck.Expr)
		if err != nil {
			return err
		}
		e, err := (&parser{toks: toks, sql: ck.Expr}).expr()
		if err != nil {
			return err
		}
		for _, r := range rows {
			v, err := (&env{x: x, rel: rel, row: r}).eval(e)
			if err != nil {
				return err
			}
			if v != nil && !truthy(v) {
				return sqlErr(547, 16, "The %s statement conflicted with the CHECK constraint \"%s\". The conflict occurred in database \"%s\", table \"%s.%s\".", verb, ck.Name, dbName, t.Schema, t.Name)
			}
		}
	}
	for i, c := range t.Columns {
		if c.NotNull {
			for _, r := range rows {
				if r[i] == nil {
					return sqlErr(515, 16, "Cannot insert the value NULL into column '%s', table '%s.%s.%s'; column does not allow nulls. %s fails.", c.Name, dbName, t.Schema, t.Name, verb)
				}
			}
		}
	}
	if t.PrimaryKey != nil {
		seen := map[string]bool{}
		for _, r := range rows {
			var key []string
			for _, kc := range t.PrimaryKey.Columns {
				i, _ := t.column(kc)
				key = append(key, strings.ToLower(toString(normValue(r[i]))))
			}
			k := strings.Join(key, ", ")
			if seen[k] {
				return sqlErr(2627, 14, "Violation of PRIMARY KEY constraint '%s'. Cannot insert duplicate key in object '%s.%s'. The duplicate key value is (%s).", t.PrimaryKey.Name, t.Schema, t.Name, k)
			}
			seen[k] = true
		}
	}
	return nil
}

// insert runs INSERT ... VALUES or INSERT ... SELECT. The SELECT reads the
// table as it was before the statement, as SQL Server's does (its rows are
// read before any is inserted).
func (x *execCtx) insert(n *insertStmt) error {
	d, schema, name, err := x.tableTarget(n.name)
	if err != nil {
		return err
	}
	if x.in.readOnly(d) {
		return errReadOnly(d.Name)
	}
	var selected *relation
	if n.query != nil {
		if selected, err = x.runSelect(n.query); err != nil {
			return err
		}
	}
	var count int64
	err = x.in.updateMetadata(d, func(md *metadata) error {
		t := findTable(md, schema, name)
		if t == nil {
			return errInvalidObject(n.name.String())
		}
		if t.Generated {
			return errNotSupported("INSERT into the generated table " + t.Schema + "." + t.Name)
		}
		if err := x.mayTable(d, t.Schema, t.Name, "INSERT"); err != nil {
			return err
		}
		idx := make([]int, 0, len(t.Columns))
		if len(n.cols) == 0 {
			for i := range t.Columns {
				idx = append(idx, i)
			}
		} else {
			for _, c := range n.cols {
				i, _ := t.column(c)
				if i < 0 {
					return errInvalidColumn(c)
				}
				idx = append(idx, i)
			}
		}
		rows := append([][]any(nil), t.Rows...)
		if selected != nil {
			// "The select list for the INSERT statement contains fewer
			// (more) items than the insert list" (120, 121).
			switch {
			case len(selected.cols) < len(idx):
				return sqlErr(120, 15, "The select list for the INSERT statement contains fewer items than the insert list. The number of SELECT values must match the number of INSERT columns.")
			case len(selected.cols) > len(idx):
				return sqlErr(121, 15, "The select list for the INSERT statement contains more items than the insert list. The number of SELECT values must match the number of INSERT columns.")
			}
			for _, vals := range selected.rows {
				row := make([]any, len(t.Columns))
				for j, v := range vals {
					row[idx[j]] = storeValue(t.Columns[idx[j]], v)
				}
				rows = append(rows, row)
			}
		}
		for _, vals := range n.rows {
			if len(vals) > len(idx) {
				return sqlErr(110, 15, "There are fewer columns in the INSERT statement than values specified in the VALUES clause. The number of values in the VALUES clause must match the number of columns specified in the INSERT statement.")
			}
			if len(vals) < len(idx) {
				return sqlErr(109, 15, "There are more columns in the INSERT statement than values specified in the VALUES clause. The number of values in the VALUES clause must match the number of columns specified in the INSERT statement.")
			}
			row := make([]any, len(t.Columns))
			for j, e := range vals {
				v, err := (&env{x: x}).eval(e)
				if err != nil {
					return err
				}
				row[idx[j]] = storeValue(t.Columns[idx[j]], v)
			}
			rows = append(rows, row)
		}
		if err := x.checkRows(t, rows, "INSERT", d.Name); err != nil {
			return err
		}
		count = int64(len(rows) - len(t.Rows))
		t.Rows = rows
		return nil
	})
	if err != nil {
		return err
	}
	x.rows = count
	return x.w.StatementDone(tds.CmdInsert, count, true)
}

func storeValue(c columnDef, v any) any {
	v = normValue(v)
	if t, ok := v.(time.Time); ok {
		return t.UTC().Format(time.RFC3339Nano)
	}
	switch c.Type {
	case "int", "bigint", "smallint", "tinyint":
		if s, ok := v.(string); ok {
			n, err := castTo(s, "bigint")
			if err == nil {
				return n
			}
		}
	}
	return v
}

// update runs UPDATE t SET ... [OUTPUT inserted.c, ...] [WHERE ...]; the
// read-modify-write happens under the metadata lock, so concurrent
// increments never hand out the same number.
func (x *execCtx) update(n *updateStmt) error {
	d, schema, name, err := x.tableTarget(n.name)
	if err != nil {
		return err
	}
	if x.in.readOnly(d) {
		return errReadOnly(d.Name)
	}
	var out *relation
	var count int64
	err = x.in.updateMetadata(d, func(md *metadata) error {
		t := findTable(md, schema, name)
		if t == nil {
			return errInvalidObject(n.name.String())
		}
		if t.Generated {
			return errNotSupported("UPDATE of the generated table " + t.Schema + "." + t.Name)
		}
		if err := x.mayUpdate(d, t, n); err != nil {
			return err
		}
		rel := &relation{}
		for _, c := range t.Columns {
			rel.cols = append(rel.cols, relCol{qual: strings.ToLower(name), name: c.Name, col: sqlColumn(c)})
		}
		ins := &relation{}
		for _, c := range rel.cols {
			c.qual = "inserted"
			ins.cols = append(ins.cols, c)
		}
		for _, c := range rel.cols {
			c.qual = "deleted"
			ins.cols = append(ins.cols, c)
		}
		if len(n.output) > 0 {
			out = &relation{}
			for _, it := range n.output {
				out.cols = append(out.cols, relCol{name: columnName(it), col: (&env{x: x, rel: ins}).exprColumn(it.e, columnName(it))})
			}
		}
		rows := make([][]any, len(t.Rows))
		for i, r := range t.Rows {
			row := make([]any, len(t.Columns))
			for j := range t.Columns {
				if j < len(r) {
					row[j] = columnValue(&t.Columns[j], r[j])
				}
			}
			rows[i] = row
		}
		for i, old := range rows {
			if n.where != nil {
				v, err := (&env{x: x, rel: rel, row: old}).eval(n.where)
				if err != nil {
					return err
				}
				if !truthy(v) {
					continue
				}
			}
			row := append([]any(nil), old...)
			for _, s := range n.sets {
				v, err := (&env{x: x, rel: rel, row: old}).eval(s.e)
				if err != nil {
					return err
				}
				if s.column != "" {
					j, cd := t.column(s.column)
					if cd == nil {
						return errInvalidColumn(s.column)
					}
					row[j] = normValue(v)
				}
				if s.variable != "" {
					vr, ok := x.vars[strings.ToLower(s.variable)]
					if !ok {
						return errMustDeclare(s.variable)
					}
					vr.v = vr.col.assign(normValue(v))
				}
			}
			rows[i] = row
			count++
			if out != nil {
				both := append(append([]any(nil), row...), old...)
				orow := make([]any, len(n.output))
				for k, it := range n.output {
					v, err := (&env{x: x, rel: ins, row: both}).eval(it.e)
					if err != nil {
						return err
					}
					orow[k] = v
				}
				out.rows = append(out.rows, orow)
			}
		}
		if err := x.checkRows(t, rows, "UPDATE", d.Name); err != nil {
			return err
		}
		stored := make([][]any, len(rows))
		for i, r := range rows {
			stored[i] = make([]any, len(r))
			for j, v := range r {
				stored[i][j] = storeValue(t.Columns[j], v)
			}
		}
		t.Rows = stored
		return nil
	})
	if err != nil {
		return err
	}
	x.rows = count
	if out != nil {
		cols := make([]tds.Column, len(out.cols))
		for i, c := range out.cols {
			cols[i] = c.col
		}
		if err := x.w.Columns(cols); err != nil {
			return err
		}
		for _, r := range out.rows {
			vals := make([]any, len(r))
			for i, v := range r {
				vals[i] = outValue(v, cols[i])
			}
			if err := x.w.Row(vals...); err != nil {
				return err
			}
		}
	}
	return x.w.StatementDone(tds.CmdUpdate, count, true)
}
