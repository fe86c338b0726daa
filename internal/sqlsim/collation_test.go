package sqlsim

import (
	"bytes"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Database names resolve by the server collation: case-insensitively under
// the default, exactly under a case-sensitive or binary one, where two
// databases may differ only in case. Trailing spaces never count.
func TestCollationResolvesNames(t *testing.T) {
	for _, tc := range []struct {
		collation string
		ci        bool
	}{
		{"", true},
		{"Latin1_General_CS_AS", false},
		{"Latin1_General_BIN2", false},
	} {
		t.Run(tc.collation, func(t *testing.T) {
			e := newEnv(t, func(c *Config) { c.Collation = tc.collation })
			ctx := testCtx(t)
			e.create(t, DatabaseSpec{Name: "Sales"})
			err := e.in.CreateDatabase(DatabaseSpec{Name: "sales"})
			if tc.ci != (err != nil) {
				t.Fatalf("create sales beside Sales: %v (case-insensitive: %v)", err, tc.ci)
			}
			want := tc.collation
			if want == "" {
				want = DefaultCollation
			}
			var coll string
			if err := e.db.QueryRowContext(ctx, "SELECT SERVERPROPERTY('Collation')").Scan(&coll); err != nil || coll != want {
				t.Errorf("SERVERPROPERTY('Collation') = %q, %v; want %q", coll, err, want)
			}
			id := func(name string) sql.NullInt64 {
				var v sql.NullInt64
				if err := e.db.QueryRowContext(ctx, "SELECT DB_ID(@p1)", name).Scan(&v); err != nil {
					t.Fatalf("DB_ID(%q): %v", name, err)
				}
				return v
			}
			sales, upper, lower, padded := id("Sales"), id("SALES"), id("sales"), id("Sales  ")
			if !sales.Valid || padded != sales {
				t.Errorf("DB_ID('Sales') = %v, DB_ID('Sales  ') = %v: want the same database (trailing spaces do not count)", sales, padded)
			}
			if tc.ci && (upper != sales || lower != sales) {
				t.Errorf("case-insensitive: DB_ID SALES %v, sales %v, want Sales's %v", upper, lower, sales)
			}
			if !tc.ci && (upper.Valid || !lower.Valid || lower == sales) {
				t.Errorf("case-sensitive: DB_ID SALES %v (want NULL), sales %v (want its own database, not %v)", upper, lower, sales)
			}
			var name string
			if err := e.db.QueryRowContext(ctx, "SELECT name FROM sys.databases WHERE name = @p1", "SALES").Scan(&name); tc.ci != (err == nil) || tc.ci && name != "Sales" {
				t.Errorf("sys.databases WHERE name = 'SALES': %q %v (case-insensitive: %v)", name, err, tc.ci)
			}
			_, err = e.db.ExecContext(ctx, "USE [SALES]")
			if tc.ci != (err == nil) {
				t.Errorf("USE [SALES]: %v (case-insensitive: %v)", err, tc.ci)
			}
			if !tc.ci && !strings.Contains(errText(err), "does not exist") {
				t.Errorf("USE of a database spelled in another case on a case-sensitive server: %v, want 911 does not exist", err)
			}
		})
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// A backup share is a Windows file server: names match case-insensitively,
// so a BACKUP WITH FORMAT to sql01@sales_1.bak overwrites an existing
// sql01@Sales_1.bak (what a worker reading the directory locally, where the
// two names differ, cannot see).
func TestShareMatchesFileNamesCaseInsensitively(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Collation = "Latin1_General_BIN2" })
	ctx := testCtx(t)
	e.create(t, DatabaseSpec{Name: "Sales"})
	e.create(t, DatabaseSpec{Name: "sales"})
	other := filepath.Join(e.shareDir, "Other.bak")
	if err := os.WriteFile(other, []byte("another set's verified stripe"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.ExecContext(ctx, `BACKUP DATABASE [sales] TO DISK = N'\\bak01\backup\other.BAK' WITH FORMAT, INIT`); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(other)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(data, []byte("another set's verified stripe")) {
		t.Errorf("BACKUP to other.BAK left Other.bak as it was: the share matched names case-sensitively")
	}
	if _, err := os.Stat(filepath.Join(e.shareDir, "other.BAK")); err == nil {
		t.Errorf("BACKUP created other.BAK beside Other.bak: a Windows share has one file for both names")
	}
}
