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

// What the ownership guard reads and sends: the name is a parameter in
// every query, and quoted in every statement.
func TestOwnCopyQueries(t *testing.T) {
	hostile := "Sales]; DROP DATABASE x--_verify"
	q, args, err := CopyState(hostile)
	if err != nil || q != "SELECT name, database_id, state_desc, create_date, owner_sid, user_access_desc, SUSER_SID() AS login_sid, "+
		"GETDATE() AS server_now FROM sys.databases WHERE name = @p1" || len(args) != 1 || args[0] != hostile {
		t.Fatalf("CopyState: %s %v %v", q, args, err)
	}
	q, args, err = SessionsIn(hostile)
	if err != nil || q != "SELECT session_id, login_name, host_name, program_name FROM sys.dm_exec_sessions "+
		"WHERE database_id = DB_ID(@p1) AND session_id <> @@SPID ORDER BY session_id" || len(args) != 1 || args[0] != hostile {
		t.Fatalf("SessionsIn: %s %v %v", q, args, err)
	}
	if s, err := SetSingleUser(hostile); err != nil || s != "ALTER DATABASE [Sales]]; DROP DATABASE x--_verify] SET SINGLE_USER WITH ROLLBACK IMMEDIATE" {
		t.Fatalf("SetSingleUser: %s %v", s, err)
	}
	if s, err := SetMultiUser(hostile); err != nil || s != "ALTER DATABASE [Sales]]; DROP DATABASE x--_verify] SET MULTI_USER" {
		t.Fatalf("SetMultiUser: %s %v", s, err)
	}
	for _, bad := range []string{"", strings.Repeat("x", 129), "a\x00b"} {
		if _, _, err := CopyState(bad); err == nil {
			t.Errorf("CopyState(%q) accepted", bad)
		}
		if _, _, err := SessionsIn(bad); err == nil {
			t.Errorf("SessionsIn(%q) accepted", bad)
		}
		if _, err := SetSingleUser(bad); err == nil {
			t.Errorf("SetSingleUser(%q) accepted", bad)
		}
		if _, err := SetMultiUser(bad); err == nil {
			t.Errorf("SetMultiUser(%q) accepted", bad)
		}
	}
}
