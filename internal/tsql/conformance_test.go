package tsql

import (
	"strings"
	"testing"
)

// The scratch database's statements quote its name wherever it appears,
// and CREATE VIEW runs through the database's sp_executesql (it may not
// name a database and must start its batch).
func TestConformanceStatements(t *testing.T) {
	db := "scr]atch"
	create, err := CreateDatabase(db)
	if err != nil || create != "CREATE DATABASE [scr]]atch]" {
		t.Errorf("CreateDatabase: %q, %v", create, err)
	}
	setup, err := FillSetup(db)
	if err != nil || len(setup) != 2 {
		t.Fatalf("FillSetup: %v, %v", setup, err)
	}
	if !strings.HasPrefix(setup[0], "CREATE TABLE [scr]]atch].[dbo].[conformance_fill] (id int NOT NULL, pad nvarchar(4000) NOT NULL") {
		t.Errorf("table: %q", setup[0])
	}
	if n := strings.Count(setup[1], "x"); n != fillRowChars || !strings.HasPrefix(setup[1], "INSERT INTO [scr]]atch].[dbo].[conformance_fill] (id, pad) VALUES (1, N'") {
		t.Errorf("first row: %d characters of pad in %.80q", n, setup[1])
	}
	double, err := FillDouble(db)
	if err != nil || double != "INSERT INTO [scr]]atch].[dbo].[conformance_fill] (id, pad) SELECT id + @p1, pad FROM [scr]]atch].[dbo].[conformance_fill]" {
		t.Errorf("FillDouble: %q, %v", double, err)
	}
	view, err := IndexedView(db)
	if err != nil || len(view) != 2 {
		t.Fatalf("IndexedView: %v, %v", view, err)
	}
	if view[0] != "EXEC [scr]]atch].sys.sp_executesql N'CREATE VIEW dbo.conformance_fill_ids WITH SCHEMABINDING AS SELECT id FROM dbo.conformance_fill'" {
		t.Errorf("view: %q", view[0])
	}
	if view[1] != "SET ARITHABORT ON; SET NUMERIC_ROUNDABORT OFF; CREATE UNIQUE CLUSTERED INDEX [ix_conformance_fill_ids] ON [scr]]atch].[dbo].[conformance_fill_ids] (id)" {
		t.Errorf("index: %q", view[1])
	}
	if _, err := CreateDatabase(""); err == nil {
		t.Error("an empty name is accepted")
	}
	q, args, err := SessionRequests(57)
	if err != nil || !strings.HasSuffix(q, "WHERE r.session_id = @p1") || len(args) != 1 || args[0] != int64(57) {
		t.Errorf("SessionRequests: %q %v %v", q, args, err)
	}
	if _, _, err := SessionRequests(0); err == nil {
		t.Error("session 0 is accepted")
	}
}
