package sqlsim

import (
	"database/sql"
	"path/filepath"
	"testing"
)

// agPair is two instances replicating Sales in one availability group:
// sqlA the primary, sqlB a secondary (readable as asked).
type agPair struct {
	g        *AvailabilityGroup
	a, b     *testEnv
	dbA, dbB *sql.DB
}

func newAGPair(t *testing.T, preference string, readable bool) *agPair {
	t.Helper()
	a := newEnv(t, func(c *Config) { c.Name = "sqlA" })
	b := newEnv(t, func(c *Config) {
		c.Name = "sqlB"
		c.Shares = map[string]string{`\\bak01\backup`: a.shareDir}
	})
	for _, e := range []*testEnv{a, b} {
		e.create(t, DatabaseSpec{Name: "Sales", Size: 1 << 20})
		e.create(t, DatabaseSpec{Name: "Local", Size: 1 << 20})
	}
	g, err := NewAvailabilityGroup("agSales", preference)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.AddReplica(a.in, ReplicaOptions{Primary: true}); err != nil {
		t.Fatal(err)
	}
	if err := g.AddReplica(b.in, ReplicaOptions{Readable: readable}); err != nil {
		t.Fatal(err)
	}
	if err := g.AddDatabase("Sales"); err != nil {
		t.Fatal(err)
	}
	return &agPair{g: g, a: a, b: b, dbA: a.db, dbB: b.db}
}

func preferred(t *testing.T, db *sql.DB, name string) bool {
	t.Helper()
	var v bool
	if err := db.QueryRow("SELECT sys.fn_hadr_backup_is_preferred_replica(@p1)", name).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// The preferred backup replica follows AUTOMATED_BACKUP_PREFERENCE and
// BACKUP_PRIORITY, and moves with a fail-over; a database outside the
// group is preferred everywhere.
func TestAGPreferredReplica(t *testing.T) {
	p := newAGPair(t, PreferSecondary, true)
	check := func(what string, wantA, wantB bool) {
		t.Helper()
		if a, b := preferred(t, p.dbA, "Sales"), preferred(t, p.dbB, "Sales"); a != wantA || b != wantB {
			t.Errorf("%s: preferred on sqlA %v, sqlB %v; want %v, %v", what, a, b, wantA, wantB)
		}
	}
	check("SECONDARY", false, true)
	if !preferred(t, p.dbA, "Local") || !preferred(t, p.dbB, "Local") {
		t.Error("a database outside the group is not preferred everywhere")
	}
	if preferred(t, p.dbA, "NoSuchDB") {
		t.Error("a missing database is preferred on 2022 CU2 and later")
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(p.g.SetPreference(PreferPrimary))
	check("PRIMARY", true, false)
	must(p.g.SetPreference(PreferNone))
	must(p.g.SetBackupPriority(p.a.in, 90))
	check("NONE, primary's priority higher", true, false)
	must(p.g.SetBackupPriority(p.a.in, 0))
	must(p.g.SetPreference(PreferPrimary))
	check("PRIMARY with the primary excluded", false, false)
	must(p.g.SetBackupPriority(p.a.in, 50))
	must(p.g.SetPreference(PreferSecondary))
	must(p.g.Failover(p.b.in))
	check("SECONDARY after a fail-over", true, false)
	// The secondary down: SECONDARY falls back to the primary,
	// SECONDARY_ONLY names none.
	must(p.a.in.Stop())
	check2 := func(what string, want bool) {
		t.Helper()
		if got := preferred(t, p.dbB, "Sales"); got != want {
			t.Errorf("%s: preferred on the primary sqlB %v, want %v", what, got, want)
		}
	}
	check2("SECONDARY, the only secondary down", true)
	must(p.g.SetPreference(PreferSecondaryOnly))
	check2("SECONDARY_ONLY, the only secondary down", false)
}

// What a secondary refuses: a full backup without COPY_ONLY (3059), any
// backup while it does not synchronize; what the views show.
func TestAGSecondaryBackupAndViews(t *testing.T) {
	p := newAGPair(t, PreferSecondary, false)
	bak := func(name string) string { return `\\bak01\backup\` + name }
	r := mustFail(t, p.dbB, 3013, "BACKUP DATABASE [Sales] TO DISK = '"+bak("full.bak")+"' WITH INIT, FORMAT")
	if r.errNums()[0] != 3059 {
		t.Errorf("full backup on a secondary: errors %v, want 3059 then 3013", r.errNums())
	}
	mustRun(t, p.dbB, "BACKUP DATABASE [Sales] TO DISK = '"+bak("copy.bak")+"' WITH COPY_ONLY, INIT, FORMAT")
	mustRun(t, p.dbA, "BACKUP DATABASE [Sales] TO DISK = '"+bak("primary.bak")+"' WITH INIT, FORMAT")
	mustRun(t, p.dbB, "BACKUP DATABASE [Local] TO DISK = '"+bak("local.bak")+"' WITH INIT, FORMAT")
	// The two copies are one database: one family GUID in both histories.
	var famA, famB []byte
	if err := p.dbA.QueryRow("SELECT family_guid FROM msdb.dbo.backupset WHERE database_name = 'Sales'").Scan(&famA); err != nil {
		t.Fatal(err)
	}
	if err := p.dbB.QueryRow("SELECT family_guid FROM msdb.dbo.backupset WHERE database_name = 'Sales'").Scan(&famB); err != nil {
		t.Fatal(err)
	}
	if string(famA) != string(famB) {
		t.Errorf("family GUIDs of Sales differ between the replicas: %x and %x", famA, famB)
	}
	if err := p.g.SetSynchronizationState(p.b.in, "Sales", NotSynchronizing); err != nil {
		t.Fatal(err)
	}
	r = mustFail(t, p.dbB, 3013, "BACKUP DATABASE [Sales] TO DISK = '"+bak("copy2.bak")+"' WITH COPY_ONLY, INIT, FORMAT")
	if r.errNums()[0] != 976 {
		t.Errorf("backup of a NOT SYNCHRONIZING secondary: errors %v, want 976 then 3013", r.errNums())
	}
	// A non-readable secondary refuses queries into the database.
	mustFail(t, p.dbB, 976, "SELECT name FROM [Sales].sys.database_files")
	mustFail(t, p.dbB, 976, "USE [Sales]")
	mustRun(t, p.dbB, "SELECT name FROM [Local].sys.database_files")

	// sys.databases.replica_id, the DMV and the catalog views.
	var replica []byte
	var upd string
	if err := p.dbB.QueryRow("SELECT replica_id, DATABASEPROPERTYEX(name, 'Updateability') FROM sys.databases WHERE name = 'Sales'").Scan(&replica, &upd); err != nil {
		t.Fatal(err)
	}
	if len(replica) != 16 || upd != "READ_ONLY" {
		t.Errorf("Sales on the secondary: replica_id %x, updateability %s", replica, upd)
	}
	var none any
	if err := p.dbB.QueryRow("SELECT replica_id FROM sys.databases WHERE name = 'Local'").Scan(&none); err != nil || none != nil {
		t.Errorf("Local's replica_id %v (%v), want NULL", none, err)
	}
	var primary bool
	var state string
	q := "SELECT rs.is_primary_replica, rs.synchronization_state_desc FROM sys.dm_hadr_database_replica_states rs WHERE rs.is_local = 1 AND rs.database_id = DB_ID(@p1)"
	if err := p.dbB.QueryRow(q, "Sales").Scan(&primary, &state); err != nil || primary || state != NotSynchronizing {
		t.Errorf("secondary's own row: primary %v, state %q (%v)", primary, state, err)
	}
	if err := p.dbA.QueryRow(q, "Sales").Scan(&primary, &state); err != nil || !primary || state != Synchronized {
		t.Errorf("primary's own row: primary %v, state %q (%v)", primary, state, err)
	}
	var agName, server string
	if err := p.dbB.QueryRow(`SELECT ag.name, ar.replica_server_name FROM sys.databases d
		JOIN sys.availability_replicas ar ON ar.replica_id = d.replica_id
		JOIN sys.availability_groups ag ON ag.group_id = ar.group_id WHERE d.name = 'Sales'`).Scan(&agName, &server); err != nil ||
		agName != "agSales" || server != "sqlB" {
		t.Errorf("group of Sales on sqlB: %q on %q (%v)", agName, server, err)
	}
}

// A login without VIEW SERVER STATE gets 300 + 297 from the DMV and no rows
// from the catalog views (metadata visibility), but may ask the preferred
// replica.
func TestAGPermissions(t *testing.T) {
	root := t.TempDir()
	login := Login{Name: "backup", Password: testPass}
	start := func(name string) *testEnv {
		return newEnv(t, func(c *Config) {
			c.Name, c.DataDir = name, filepath.Join(root, name)
			c.Principals = []Login{login, {Name: "sa", Password: testPass, Sysadmin: true}}
		})
	}
	a, b := start("sqlA"), start("sqlB")
	for _, e := range []*testEnv{a, b} {
		e.create(t, DatabaseSpec{Name: "Sales", Size: 1 << 20})
	}
	g, _ := NewAvailabilityGroup("ag1", PreferPrimary)
	if err := g.AddReplica(a.in, ReplicaOptions{Primary: true}); err != nil {
		t.Fatal(err)
	}
	if err := g.AddReplica(b.in, ReplicaOptions{Readable: true}); err != nil {
		t.Fatal(err)
	}
	if err := g.AddDatabase("Sales"); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlserver", a.in.DSN("backup", testPass, "master"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	mustFail(t, db, 297, "SELECT is_primary_replica FROM sys.dm_hadr_database_replica_states")
	r := mustRun(t, db, "SELECT name FROM sys.availability_groups")
	if len(r.rows) != 0 {
		t.Errorf("sys.availability_groups without VIEW ANY DEFINITION: %v", r.rows)
	}
	var v bool
	if err := db.QueryRow("SELECT sys.fn_hadr_backup_is_preferred_replica('Sales')").Scan(&v); err != nil || !v {
		t.Errorf("preferred on the primary with PRIMARY: %v (%v)", v, err)
	}
}

// SetReadable turns a secondary's read access on and off, as ALTER
// AVAILABILITY GROUP ... MODIFY REPLICA ... SECONDARY_ROLE does.
func TestAGSetReadable(t *testing.T) {
	p := newAGPair(t, PreferSecondary, false)
	mustFail(t, p.dbB, 976, "SELECT name FROM [Sales].sys.database_files")
	if err := p.g.SetReadable(p.b.in, true); err != nil {
		t.Fatal(err)
	}
	mustRun(t, p.dbB, "SELECT name FROM [Sales].sys.database_files")
	if err := p.g.SetReadable(p.b.in, false); err != nil {
		t.Fatal(err)
	}
	mustFail(t, p.dbB, 976, "SELECT name FROM [Sales].sys.database_files")
	other := newEnv(t, func(c *Config) { c.Name = "sqlC" })
	if err := p.g.SetReadable(other.in, true); err == nil {
		t.Error("SetReadable of an instance outside the group: no error")
	}
}
