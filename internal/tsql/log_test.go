package tsql

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestBackupLogGolden(t *testing.T) {
	got, err := BackupLog(BackupLogOptions{Database: "Sales]; DROP DATABASE x--", Chain: 3, Number: 42, Compression: ptr(true), Stats: 10,
		Disks: []string{`\\bak01-nic1\backup\sql01@Sales~1a2b3c4d~log000003_00000042_1of2.trn`, `\\bak01-nic2\backup\it's_2of2.trn`}})
	if err != nil {
		t.Fatal(err)
	}
	want := `BACKUP LOG [Sales]]; DROP DATABASE x--] TO DISK = N'\\bak01-nic1\backup\sql01@Sales~1a2b3c4d~log000003_00000042_1of2.trn', ` +
		`DISK = N'\\bak01-nic2\backup\it''s_2of2.trn' WITH CHECKSUM, FORMAT, INIT, COMPRESSION, NAME = N'backupcycle log 000003 00000042', STATS = 10`
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if strings.Contains(got, "COPY_ONLY") {
		t.Fatal("the product's own log backups are never COPY_ONLY")
	}
	tail, err := BackupLog(BackupLogOptions{Database: "Sales", Chain: 3, Number: 43, NoRecovery: true, Disks: []string{`\\bak01\backup\t.trn`}})
	if err != nil || tail != `BACKUP LOG [Sales] TO DISK = N'\\bak01\backup\t.trn' WITH CHECKSUM, FORMAT, INIT, NORECOVERY, NAME = N'backupcycle log 000003 00000043'` {
		t.Fatalf("tail-log backup: %s (%v)", tail, err)
	}
	m, err := LogBackupMarker("Sales]; DROP DATABASE x--", `\\bak01-nic1\backup\sql01@Sales~1a2b3c4d~log000003_00000042_1of2.trn`)
	if err != nil || !strings.HasPrefix(got, m) {
		t.Fatalf("marker %q (%v) does not start the statement", m, err)
	}
	for _, bad := range []BackupLogOptions{
		{Database: "d", Disks: []string{"a.trn"}, Chain: 0, Number: 1},
		{Database: "d", Disks: []string{"a.trn"}, Chain: 1, Number: 0},
		{Database: "d", Chain: 1, Number: 1},
		{Database: "d", Disks: []string{"a.trn"}, Chain: 1, Number: 1, MaxTransferSize: 1000},
	} {
		if _, err := BackupLog(bad); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

func TestRestoreLogGolden(t *testing.T) {
	stop := time.Date(2025, 3, 1, 2, 3, 4, 567e6, time.UTC)
	tests := []struct {
		o    RestoreLogOptions
		want string
	}{
		{RestoreLogOptions{Database: "Sales_standby", Disks: []string{"a.trn"}, Checksum: true},
			`RESTORE LOG [Sales_standby] FROM DISK = N'a.trn' WITH CHECKSUM, NORECOVERY`},
		{RestoreLogOptions{Database: "Sales_standby", Disks: []string{"a.trn"}, Recovery: LogStandby, StandbyFile: `D:\undo\it's.tuf`},
			`RESTORE LOG [Sales_standby] FROM DISK = N'a.trn' WITH STANDBY = N'D:\undo\it''s.tuf'`},
		{RestoreLogOptions{Database: "Sales_pit", Disks: []string{"a.trn", "b.trn"}, Recovery: LogRecover, StopAt: stop, Stats: 5},
			`RESTORE LOG [Sales_pit] FROM DISK = N'a.trn', DISK = N'b.trn' WITH RECOVERY, STOPAT = N'2025-03-01T02:03:04.567', STATS = 5`},
	}
	for _, tt := range tests {
		got, err := RestoreLog(tt.o)
		if err != nil || got != tt.want {
			t.Errorf("got\n%s (%v)\nwant\n%s", got, err, tt.want)
		}
	}
	for _, bad := range []RestoreLogOptions{
		{Database: "d", Disks: []string{"a"}, Recovery: LogStandby},
		{Database: "d", Disks: []string{"a"}, StandbyFile: "x"},
		{Database: "d", Disks: []string{"a"}, Recovery: LogRecover, StandbyFile: "x"},
		{Database: "d", Disks: []string{"a"}, Recovery: 9},
		{Database: "d", Disks: []string{"a"}, Recovery: LogStandby, StandbyFile: "a\x00b"},
	} {
		if _, err := RestoreLog(bad); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

func TestRestoreDatabaseSeed(t *testing.T) {
	base := RestoreOptions{Database: "Sales_standby", Disks: []string{"a.bak"}, Moves: []Move{{LogicalName: "Sales", PhysicalName: `D:\x, NORECOVERY.mdf`}}, Checksum: true, Replace: true}
	o := base
	o.StandbyFile = `D:\undo\Sales_standby.tuf`
	got, err := RestoreDatabase(o)
	want := `RESTORE DATABASE [Sales_standby] FROM DISK = N'a.bak' WITH MOVE N'Sales' TO N'D:\x, NORECOVERY.mdf', CHECKSUM, REPLACE, STANDBY = N'D:\undo\Sales_standby.tuf'`
	if err != nil || got != want {
		t.Fatalf("got\n%s (%v)\nwant\n%s", got, err, want)
	}
	o.NoRecovery = true
	if _, err := RestoreDatabase(o); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("STANDBY with NORECOVERY: %v", err)
	}
	if got, _ := RecoverDatabase("Sales_pit"); got != "RESTORE DATABASE [Sales_pit] WITH RECOVERY" {
		t.Fatal(got)
	}
	if got, _ := SimpleRecoveryFix("Sales'x"); got != "ALTER DATABASE [Sales'x] SET RECOVERY FULL" {
		t.Fatal(got)
	}
}

func TestLogQueries(t *testing.T) {
	q, args, err := LogBackupsAfter("Sales", "17126658000000314600037")
	if err != nil || len(args) != 2 || !strings.Contains(q, "bs.type = 'L'") || !strings.Contains(q, "CAST(@p2 AS numeric(25,0))") {
		t.Fatalf("%s %v %v", q, args, err)
	}
	if _, _, err := LogBackupsAfter("Sales", "1; DROP TABLE x"); err == nil {
		t.Fatal("a non-LSN is accepted")
	}
	q, args, err = BackupSetFork("6F9619FF-8B86-D011-B42D-00C04FC964FF")
	if err != nil || len(args) != 1 || !strings.Contains(q, "last_recovery_fork_guid") || strings.Contains(q, "6F9619FF") {
		t.Fatalf("%s %v %v: the GUID must be a parameter", q, args, err)
	}
	for _, bad := range []string{"", "6F9619FF-8B86-D011-B42D-00C04FC964F'", "6F9619FF8B86D011B42D00C04FC964FF", "x' OR 1=1 --"} {
		if _, _, err := BackupSetFork(bad); err == nil {
			t.Fatalf("%q is accepted as a backup set GUID", bad)
		}
	}
	for _, f := range []func(string) (string, []any, error){RecoveryModel, RestoringState} {
		q, args, err := f("Sales]")
		if err != nil || len(args) != 1 || args[0] != "Sales]" || strings.Contains(q, "Sales") {
			t.Fatalf("%s %v %v: the name must be a parameter", q, args, err)
		}
		if _, _, err := f(""); err == nil {
			t.Fatal("empty name accepted")
		}
	}
}

func TestLogNames(t *testing.T) {
	n := NamesOf("sql01", "Sales")
	f := n.LogStripe(3, 42, 1, 2)
	if f != "sql01@Sales~"+hash8("Sales")+"~log000003_00000042_1of2.trn" {
		t.Fatal(f)
	}
	p, ok := ParseLogFileName(f)
	if !ok || p.Owner != n.Owner() || p.Chain != 3 || p.Number != 42 || p.Index != 1 || p.Count != 2 {
		t.Fatalf("%+v %v", p, ok)
	}
	r := n.ChainRecord(3, 1)
	pr, ok := ParseChainRecordName(r)
	if !ok || pr.Owner != n.Owner() || pr.Chain != 3 || pr.Part != 1 || !strings.HasSuffix(r, ChainRecordSuffix) {
		t.Fatalf("%s: %+v %v", r, pr, ok)
	}
	// Never a set's file, never another database's prefix.
	for _, name := range []string{f, r} {
		if _, ok := ParseStripeFileName(name); ok {
			t.Errorf("%s parses as a stripe", name)
		}
		if _, ok := ParseManifestFileName(name); ok {
			t.Errorf("%s parses as a manifest", name)
		}
		for _, other := range []string{"Sales", "sales", "Sales~log", "sales~log000003", "Sales_2024"} {
			for _, on := range AllNamesOf("sql01", other) {
				if strings.HasPrefix(name, on.DBPrefix()) {
					t.Errorf("%s starts with %s's prefix %s", name, other, on.DBPrefix())
				}
			}
		}
	}
	// Lower-case names have no hash; the two databases never share a name.
	if a, b := NamesOf("sql01", "sales").LogStripe(1, 1, 1, 1), NamesOf("sql01", "Sales").LogStripe(1, 1, 1, 1); strings.EqualFold(a, b) {
		t.Fatalf("%s and %s differ only in case", a, b)
	}
	for _, bad := range []string{"sql01@sales~log000003_00000042_0of2.trn", "sql01@sales~log000003_00000042_3of2.trn", "sql01@sales~log00003_00000042_1of2.trn",
		"sales~log000003_00000042_1of2.trn", "sql01@sales~log000000_00000042_1of2.trn", "sql01@sales_00000042_1of2.trn"} {
		if _, ok := ParseLogFileName(bad); ok {
			t.Errorf("%s parses", bad)
		}
	}
	c, num, ok := ParseBackupLogName(BackupLogName(7, 99))
	if !ok || c != 7 || num != 99 {
		t.Fatal(c, num, ok)
	}
	if _, _, ok := ParseBackupLogName("backupcycle seq 00000001"); ok {
		t.Fatal("a full's name parses as a log's")
	}
}

// The widest log names fit wherever the widest set names fit.
func TestLogNamesWithinTheSetLimits(t *testing.T) {
	long := strings.Repeat("ü", 200)
	inst := strings.Repeat("I", 100)
	if e := CheckSetNames(inst, long, 64, nil); len(e) != 0 {
		t.Fatalf("set names: %v", e)
	}
	if e := CheckLogNames(inst, long, 64, nil); len(e) != 0 {
		t.Fatalf("log names of a database whose set names fit: %v", e)
	}
	if len(BackupLogName(MaxChainID, MaxLogNumber)) > MaxIdentLen {
		t.Fatal("NAME too long")
	}
}
