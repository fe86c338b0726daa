package selection

import (
	"context"
	"testing"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
)

// List reads what the selection needs from the emulator's sys.databases,
// as it would from SQL Server: states, read-only, system databases.
func TestListFromEmulator(t *testing.T) {
	const pw = "L1st!pw"
	in, err := sqlsim.New(sqlsim.Config{Name: "sql01", ListenAddr: "127.0.0.1:0", DataDir: t.TempDir(), Logins: map[string]string{"sa": pw}})
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Stop() })
	for _, n := range []string{"Sales", "RO", "Off"} {
		if err := in.CreateDatabase(sqlsim.DatabaseSpec{Name: n, Size: 1 << 20}); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("SELECTION_LIST_PW", pw)
	tg, err := mssql.TargetFor(config.SQLInstance{Name: "sql01", Address: in.Addr(), User: "sa",
		Password: config.SecretRef{Env: "SELECTION_LIST_PW"}, Encrypt: "disable"}, "master")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	db, err := mssql.Open(ctx, tg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, s := range []string{"ALTER DATABASE [RO] SET READ_ONLY", "ALTER DATABASE [Off] SET OFFLINE"} {
		if _, err := db.ExecContext(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	dbs, err := List(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Database{}
	for _, d := range dbs {
		got[d.Name] = d
	}
	for name, want := range map[string]Database{
		"master": {Name: "master", ID: 1, State: "ONLINE", IsSystem: true},
		"tempdb": {Name: "tempdb", ID: 2, State: "ONLINE", IsSystem: true},
		"Sales":  {Name: "Sales", State: "ONLINE"},
		"RO":     {Name: "RO", State: "ONLINE", ReadOnly: true},
		"Off":    {Name: "Off", State: "OFFLINE"},
	} {
		d, ok := got[name]
		if want.ID == 0 {
			want.ID = d.ID
		}
		if !ok || d != want {
			t.Errorf("%s: got %+v, want %+v", name, d, want)
		}
	}
	selected, _ := Resolve([]string{"USER_DATABASES"}, dbs)
	if len(selected) != 2 || selected[0] != "RO" || selected[1] != "Sales" {
		t.Errorf("selected %q, want [RO Sales]", selected)
	}
}
