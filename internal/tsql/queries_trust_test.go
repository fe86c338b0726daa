package tsql

import (
	"strings"
	"testing"
)

// The restore proof and the database state are queries with the name as a
// parameter; names SQL Server cannot hold are refused before any SQL runs.
func TestRestoreProofAndDatabaseState(t *testing.T) {
	hostile := "Sales]; DROP DATABASE x--_verify"
	q, args, err := RestoreProof(hostile)
	if err != nil {
		t.Fatal(err)
	}
	want := "SELECT TOP (1) rh.restore_history_id, rh.restore_date, bs.backup_set_uuid, bs.name " +
		"FROM msdb.dbo.restorehistory AS rh JOIN msdb.dbo.backupset AS bs ON bs.backup_set_id = rh.backup_set_id " +
		"WHERE rh.destination_database_name = @p1 AND rh.restore_type = 'D' ORDER BY rh.restore_history_id DESC"
	if q != want || len(args) != 1 || args[0] != hostile {
		t.Fatalf("RestoreProof:\n%s %v\nwant\n%s [%s]", q, args, want, hostile)
	}
	q, args, err = DatabaseState(hostile)
	if err != nil {
		t.Fatal(err)
	}
	if q != "SELECT name, state_desc, create_date FROM sys.databases WHERE name = @p1" || len(args) != 1 || args[0] != hostile {
		t.Fatalf("DatabaseState: %s %v", q, args)
	}
	for _, bad := range []string{"", strings.Repeat("x", 129), "a\x00b"} {
		if _, _, err := RestoreProof(bad); err == nil {
			t.Errorf("RestoreProof(%q) accepted", bad)
		}
		if _, _, err := DatabaseState(bad); err == nil {
			t.Errorf("DatabaseState(%q) accepted", bad)
		}
	}
}

func TestIsBackupSetName(t *testing.T) {
	for _, seq := range []int64{0, 1, 42, 99999999, 123456789} {
		if n := BackupSetName(seq); !IsBackupSetName(n) {
			t.Errorf("IsBackupSetName(%q) = false for the product's own name", n)
		}
	}
	for _, n := range []string{"", "backupcycle seq ", "backupcycle seq 0000001", "backupcycle seq 0000000x",
		"Backupcycle seq 00000001", "x backupcycle seq 00000001", "Sales-Full Database Backup", "backupcycle seq 00000001 "} {
		if IsBackupSetName(n) {
			t.Errorf("IsBackupSetName(%q) = true", n)
		}
	}
}
