package tsql

import (
	"errors"
	"strings"
	"testing"
)

// A restore to a new home reads the set with its BACKUP's tuning.
func TestRestoreDatabaseWithTheBackupsTuning(t *testing.T) {
	o := RestoreOptions{Database: "Sales", Disks: []string{`\\bak02\backup\s_1of1.bak`}, Checksum: true, NoRecovery: true,
		Moves: []Move{{LogicalName: "Sales", PhysicalName: `D:\data\Sales.mdf`}}, BufferCount: 16, MaxTransferSize: 4 << 20}
	stmt, err := RestoreDatabase(o)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(stmt, "CHECKSUM, NORECOVERY, BUFFERCOUNT = 16, MAXTRANSFERSIZE = 4194304") {
		t.Fatalf("statement %q", stmt)
	}
	o.MaxTransferSize = 100000
	if _, err := RestoreDatabase(o); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("MAXTRANSFERSIZE 100000: %v, want ErrInvalidOption", err)
	}
	o.MaxTransferSize, o.BufferCount = 0, 0
	if stmt, _ := RestoreDatabase(o); strings.Contains(stmt, "BUFFERCOUNT") || strings.Contains(stmt, "MAXTRANSFERSIZE") {
		t.Fatalf("untuned statement %q", stmt)
	}
	q, args, err := RestoredBackups("Sales]x", 7, RestoreTypeLog)
	if err != nil || !strings.Contains(q, "restore_type = @p3") || len(args) != 3 || args[0] != "Sales]x" || args[1] != int64(7) || args[2] != "L" {
		t.Fatalf("RestoredBackups: %q %v %v", q, args, err)
	}
	if _, _, err := RestoredBackups("Sales", 7, "D' OR 1=1 --"); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("RestoredBackups of an unknown type: %v, want ErrInvalidOption", err)
	}
	q, args, err = RestoredBackup("Sales", 7, RestoreTypeLog, "6F9619FF-8B86-D011-B42D-00C04FC964FF")
	if err != nil || !strings.Contains(q, "bs.backup_set_uuid = @p4") || len(args) != 4 || args[3] != "6F9619FF-8B86-D011-B42D-00C04FC964FF" {
		t.Fatalf("RestoredBackup: %q %v %v", q, args, err)
	}
	if _, _, err := RestoredBackup("Sales", 7, RestoreTypeLog, ""); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("RestoredBackup without a GUID: %v, want ErrInvalidOption", err)
	}
}
