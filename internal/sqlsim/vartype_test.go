package sqlsim

import (
	"bytes"
	"strings"
	"testing"
)

// TestVariableTypes: SELECT of a parameter or a declared variable returns
// a column of its declared type, as SQL Server does, and assignment cuts
// strings to the declared length.
func TestVariableTypes(t *testing.T) {
	e := newEnv(t)
	long := strings.Repeat("y", 5000)
	cases := []struct {
		name  string
		arg   any
		db    string // DatabaseTypeName go-mssqldb reports
		check func(any) bool
	}{
		{"int32 is int", int32(42), "INT", func(v any) bool { return v == int64(42) }},
		{"int16 is smallint", int16(-7), "SMALLINT", func(v any) bool { return v == int64(-7) }},
		{"uint8 is tinyint", uint8(7), "TINYINT", func(v any) bool { return v == int64(7) }},
		{"int64 is bigint", int64(1) << 40, "BIGINT", func(v any) bool { return v == int64(1)<<40 }},
		{"bool is bit", true, "BIT", func(v any) bool { return v == true }},
		{"bytes are varbinary", []byte{1, 2, 3}, "VARBINARY", func(v any) bool { b, ok := v.([]byte); return ok && bytes.Equal(b, []byte{1, 2, 3}) }},
		{"a long string is nvarchar(max)", long, "NVARCHAR", func(v any) bool { return v == long }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rows, err := e.db.QueryContext(testCtx(t), "SELECT @p1 AS v", c.arg)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			cts, err := rows.ColumnTypes()
			if err != nil {
				t.Fatal(err)
			}
			if got := cts[0].DatabaseTypeName(); got != c.db {
				t.Errorf("column type %s, want %s", got, c.db)
			}
			var v any
			if !rows.Next() {
				t.Fatalf("no row: %v", rows.Err())
			}
			if err := rows.Scan(&v); err != nil {
				t.Fatal(err)
			}
			if !c.check(v) {
				t.Errorf("value %T %.40v", v, v)
			}
		})
	}
	r := mustRun(t, e.db, "DECLARE @s nvarchar(3) = N'abcdef', @n int = 5; SELECT @s, @n")
	if r.rows[0][0] != "abc" || r.rows[0][1] != int64(5) {
		t.Errorf("DECLARE nvarchar(3) = 'abcdef', int = 5: %v", r.rows)
	}
	// Binary constants (0x...) are varbinary.
	r = mustRun(t, e.db, "SELECT 0x0A0b, 0x1, 0x")
	if b, ok := r.rows[0][0].([]byte); !ok || !bytes.Equal(b, []byte{0x0a, 0x0b}) || !bytes.Equal(r.rows[0][1].([]byte), []byte{1}) || len(r.rows[0][2].([]byte)) != 0 {
		t.Errorf("binary constants: %#v", r.rows)
	}
	if got := parseDeclarations("@p1 nvarchar(max), @p2 decimal(10,2) OUTPUT, @P3 sysname"); got["@p1"].col.Size != 0 ||
		got["@p2"].col.Precision != 10 || got["@p2"].col.Scale != 2 || got["@p3"].col.Size != 128 {
		t.Errorf("declarations: %+v %+v %+v", got["@p1"], got["@p2"], got["@p3"])
	}
}
