package config

import (
	"strings"
	"testing"
	"time"

	"github.com/microsoft/go-mssqldb/msdsn"
)

func TestCopyTargetAndVerifyName(t *testing.T) {
	src := base + "    verify_name: '{db}_v{seq}'\n"
	c, err := Parse([]byte(src), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	db := &c.Databases[0]
	// The rotation pairs: a set on bak01 is copied to bak02 and back.
	if got := db.CopyTarget("bak01"); got != "bak02" {
		t.Errorf("CopyTarget(bak01) = %q", got)
	}
	if got := db.CopyTarget("bak02"); got != "bak01" {
		t.Errorf("CopyTarget(bak02) = %q", got)
	}
	if got := db.CopyTarget("elsewhere"); got != "" {
		t.Errorf("CopyTarget(unknown) = %q", got)
	}
	db.CopyTo = "bak03"
	if got := db.CopyTarget("bak01"); got != "bak03" {
		t.Errorf("copy_to wins: %q", got)
	}
	if got := db.VerifyDatabaseName(7); got != "Sales_v00000007" {
		t.Errorf("VerifyDatabaseName = %q", got)
	}
	if db.ID() != "sql01/Sales" {
		t.Errorf("ID = %q", db.ID())
	}
}

func TestMemoryGuard(t *testing.T) {
	p := DefaultPolicy()
	// No buffer_count: SQL Server's default, 4 per file + 2 per volume, of
	// 1 MiB: 8 stripes take 34 MiB.
	if got := p.BackupMemory(8); got != 34<<20 {
		t.Errorf("default BUFFERCOUNT for 8 stripes x 1MiB = %d, want 34MiB", got)
	}
	if got := p.MaxStripesInBudget(); got != MaxStripes {
		t.Errorf("defaults fit every stripe count: %d", got)
	}
	p.BufferCount = 64
	p.MaxTransferSize = 4 << 20
	// BUFFERCOUNT is the total over all files: the stripe count does not
	// change it.
	if got := p.BackupMemory(8); got != 256<<20 || p.BackupMemory(64) != got {
		t.Errorf("64 x 4MiB = %d (8 stripes), %d (64 stripes); want 256MiB both", got, p.BackupMemory(64))
	}
	p.MemoryBudget = 255 << 20
	if got := p.MaxStripesInBudget(); got != 0 {
		t.Errorf("64 x 4MiB over a 255MiB budget: %d stripes fit, want 0", got)
	}
	p.BufferCount, p.MemoryBudget = 0, 64<<20
	// Default BUFFERCOUNT (4s+2) x 4MiB <= 64MiB: s <= 3.
	if got := p.MaxStripesInBudget(); got != 3 {
		t.Errorf("default BUFFERCOUNT x 4MiB within 64MiB: %d stripes, want 3", got)
	}
}

func TestDatabaseLookup(t *testing.T) {
	c, err := Parse([]byte(base), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if db, err := c.Database("", "Sales"); err != nil || db.Instance != "sql01" {
		t.Errorf("Database(Sales) = %v, %v", db, err)
	}
	if _, err := c.Database("sql01", "Nope"); err == nil || !strings.Contains(err.Error(), `database "Nope" is not configured in config.yaml (configured: sql01/Sales)`) {
		t.Errorf("unknown database: %v", err)
	}
	if s, ok := c.SQLInstance("verify"); !ok || s.Address != "verify:1433" {
		t.Errorf("SQLInstance(verify) = %v %v", s, ok)
	}
	if b, ok := c.BackupServer("bak02"); !ok || b.Loc.Share != "backup" {
		t.Errorf("BackupServer(bak02) = %v %v", b, ok)
	}
	if got := c.BackupServers[1].Loc.String(); got != "smb://bak02:445/backup/sql" {
		t.Errorf("smb Location.String() = %q", got)
	}
	if got := c.BackupServers[0].Loc.String(); got != "file:///srv/bak01" {
		t.Errorf("file Location.String() = %q", got)
	}
	if _, ok := c.BackupServer("bak9"); ok {
		t.Error("BackupServer(bak9) found")
	}
}

// ConnString must be what go-mssqldb itself parses into the settings we meant.
func TestConnStringParsesInDriver(t *testing.T) {
	src := edit(t, "    user: backup\n    password_env", "    user: backup\n    encrypt: \"true\"\n    trust_server_certificate: true\n    connect_timeout: 2500ms\n    password_env")
	c, err := Parse([]byte(src), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := c.SQLInstances[0]
	dsn := s.ConnString("p@ss;w'ord=&?", "Sales]; DROP DATABASE x--")
	got, err := msdsn.Parse(dsn)
	if err != nil {
		t.Fatalf("go-mssqldb rejects %s: %v", dsn, err)
	}
	if got.Host != "sql01" || got.Port != 1433 || got.User != "backup" || got.Password != "p@ss;w'ord=&?" ||
		got.Database != "Sales]; DROP DATABASE x--" || got.Encryption != msdsn.EncryptionRequired ||
		!got.TrustServerCertificate || got.DialTimeout != 3*time.Second || got.AppName != "backupcycle" {
		t.Errorf("driver read %+v", got)
	}
	// Defaults: the whole session encrypted, the certificate checked.
	def, err := msdsn.Parse(c.SQLInstances[1].ConnString("x", ""))
	if err != nil || def.Encryption != msdsn.EncryptionRequired || def.TrustServerCertificate || def.DialTimeout != 30*time.Second {
		t.Errorf("defaults: %+v %v", def, err)
	}
}
