package tsql

import (
	"errors"
	"strings"
	"testing"
)

// A differential is BACKUP DATABASE ... WITH DIFFERENTIAL; never with
// COPY_ONLY, which SQL Server ignores beside DIFFERENTIAL ("BACKUP
// (Transact-SQL)"): asking for both is a caller's mistake.
func TestBackupDatabaseDifferential(t *testing.T) {
	got, err := BackupDatabase(BackupOptions{Database: "Sales", Disks: []string{`\\bak01\backup\d.bak`}, Checksum: true, Init: true,
		Format: true, Differential: true, Name: "backupcycle 7"})
	if err != nil {
		t.Fatal(err)
	}
	want := `BACKUP DATABASE [Sales] TO DISK = N'\\bak01\backup\d.bak' WITH DIFFERENTIAL, CHECKSUM, INIT, FORMAT, NAME = N'backupcycle 7'`
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	_, err = BackupDatabase(BackupOptions{Database: "Sales", Disks: []string{"d.bak"}, Differential: true, CopyOnly: true})
	if !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), "COPY_ONLY") {
		t.Fatalf("DIFFERENTIAL with COPY_ONLY: %v", err)
	}
}

// The differential restored into a copy: its newest restore-history row of
// restore_type 'I', the name a parameter.
func TestDifferentialRestoreProof(t *testing.T) {
	hostile := "Sales]; DROP DATABASE x--_verify"
	q, args, err := DifferentialRestoreProof(hostile)
	if err != nil {
		t.Fatal(err)
	}
	want := "SELECT TOP (1) rh.restore_history_id, rh.restore_date, bs.backup_set_uuid, bs.name " +
		"FROM msdb.dbo.restorehistory AS rh JOIN msdb.dbo.backupset AS bs ON bs.backup_set_id = rh.backup_set_id " +
		"WHERE rh.destination_database_name = @p1 AND rh.restore_type = 'I' ORDER BY rh.restore_history_id DESC"
	if q != want || len(args) != 1 || args[0] != hostile {
		t.Fatalf("DifferentialRestoreProof:\n%s %v\nwant\n%s", q, args, want)
	}
	if _, _, err := DifferentialRestoreProof(""); err == nil {
		t.Fatal("an empty name accepted")
	}
}

// A full backup msdb knows by its GUID: what names a differential's base
// that is none of the product's sets.
func TestBackupSetByGUID(t *testing.T) {
	q, args, err := BackupSetByGUID("6F9A2B10-3C4D-4E5F-8091-A2B3C4D5E6F7")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(q, "msdb.dbo.backupset") || !strings.Contains(q, "physical_device_name") || len(args) != 1 {
		t.Fatalf("BackupSetByGUID: %s %v", q, args)
	}
	if _, _, err := BackupSetByGUID("x'; DROP TABLE t--"); err == nil {
		t.Fatal("a GUID that is none accepted")
	}
}
