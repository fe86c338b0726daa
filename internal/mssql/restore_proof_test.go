package mssql

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/sqlsim"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// proofSite is a source instance and a verification instance (the SQL
// Server emulator over real TDS) sharing a backup share.
type proofSite struct {
	src, verify     *sqlsim.Instance
	srcDB, verifyDB *DB
}

func newProofSite(t *testing.T) *proofSite {
	t.Helper()
	root := t.TempDir()
	share, restore := filepath.Join(root, "share"), filepath.Join(root, "restore")
	for _, d := range []string{share, restore} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s := &proofSite{}
	open := func(name string) (*sqlsim.Instance, *DB) {
		in, err := sqlsim.New(sqlsim.Config{Name: name, DataDir: filepath.Join(root, name), Logins: map[string]string{"sa": "pw"},
			Shares: map[string]string{`\\bak01\backup`: share, `D:\restore`: restore}})
		if err != nil {
			t.Fatal(err)
		}
		if err := in.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = in.Stop() })
		db, err := Open(testCtx(t), Target{Instance: name, Address: in.Addr(), User: "sa", Password: "pw", Database: "master", Encrypt: "disable"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return in, db
	}
	s.src, s.srcDB = open("sql01")
	s.verify, s.verifyDB = open("verify01")
	return s
}

// backup takes a backup set of db named tsql.BackupSetName(seq) and returns
// its stripes and HEADERONLY row.
func (s *proofSite) backup(t *testing.T, db string, seq int64) ([]string, BackupHeader) {
	t.Helper()
	layout, err := tsql.Layout([]string{`\\bak01\backup`}, tsql.NamesOf("sql01", db), seq, 2)
	if err != nil {
		t.Fatal(err)
	}
	disks := tsql.Paths(layout)
	stmt, err := tsql.BackupDatabase(tsql.BackupOptions{Database: db, Disks: disks, Checksum: true, Init: true, Format: true,
		Name: tsql.BackupSetName(seq)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.srcDB.Run(testCtx(t), "BACKUP DATABASE", stmt, nil); err != nil {
		t.Fatal(err)
	}
	hq, err := tsql.RestoreHeaderOnly(disks)
	if err != nil {
		t.Fatal(err)
	}
	h, err := s.srcDB.HeaderOnly(testCtx(t), hq)
	if err != nil || len(h) != 1 {
		t.Fatalf("HEADERONLY: %v %v", h, err)
	}
	return disks, h[0]
}

// restoreStmt is the product's RESTORE of disks into verifyDB.
func (s *proofSite) restoreStmt(t *testing.T, disks []string, verifyDB string) string {
	t.Helper()
	fq, err := tsql.RestoreFileListOnly(disks)
	if err != nil {
		t.Fatal(err)
	}
	files, err := s.verifyDB.FileListOnly(testCtx(t), fq)
	if err != nil {
		t.Fatal(err)
	}
	rows := make([]tsql.FileListRow, len(files))
	for i, f := range files {
		rows[i] = tsql.FileListRow{LogicalName: f.LogicalName, PhysicalName: f.PhysicalName, Type: f.Type, FileID: f.FileID}
	}
	moves, err := tsql.Moves(verifyDB, rows, `D:\restore`, `D:\restore`)
	if err != nil {
		t.Fatal(err)
	}
	stmt, err := tsql.RestoreDatabase(tsql.RestoreOptions{Database: verifyDB, Disks: disks, Moves: moves, Checksum: true, Replace: true, Stats: 10})
	if err != nil {
		t.Fatal(err)
	}
	return stmt
}

func (s *proofSite) proof(t *testing.T, verifyDB string) *RestoreProof {
	t.Helper()
	q, args, err := tsql.RestoreProof(verifyDB)
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.verifyDB.LastRestoreProof(testCtx(t), q, args...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (s *proofSite) state(t *testing.T, db string) *DatabaseState {
	t.Helper()
	q, args, err := tsql.DatabaseState(db)
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.verifyDB.DatabaseState(testCtx(t), q, args...)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestRestoreProofReadsTheRestoredSet: the proof names the backup set the
// verification database was last restored from — GUID as HEADERONLY of the
// stripes reports it, the set's NAME = — and follows every new restore;
// a restore into another database does not count.
func TestRestoreProofReadsTheRestoredSet(t *testing.T) {
	s := newProofSite(t)
	db := "Sales]; DROP DATABASE x--"
	if err := s.src.CreateDatabase(sqlsim.DatabaseSpec{Name: db, Size: 2 << 20}); err != nil {
		t.Fatal(err)
	}
	verifyDB := tsql.VerifyDatabaseName(db)
	if p := s.proof(t, verifyDB); p != nil {
		t.Fatalf("proof before any restore: %+v", p)
	}
	if st := s.state(t, verifyDB); st != nil {
		t.Fatalf("state of a database that does not exist: %+v", st)
	}
	disks1, h1 := s.backup(t, db, 1)
	disks2, h2 := s.backup(t, db, 2)
	if h1.BackupSetGUID == h2.BackupSetGUID || h1.BackupSetGUID == "" {
		t.Fatalf("backup set GUIDs %q and %q", h1.BackupSetGUID, h2.BackupSetGUID)
	}
	for i, tc := range []struct {
		disks []string
		h     BackupHeader
		seq   int64
	}{{disks1, h1, 1}, {disks2, h2, 2}, {disks1, h1, 1}} {
		if _, err := s.verifyDB.Run(testCtx(t), "RESTORE DATABASE", s.restoreStmt(t, tc.disks, verifyDB), nil); err != nil {
			t.Fatal(err)
		}
		p := s.proof(t, verifyDB)
		if p == nil || p.HistoryID != int64(i+1) || p.BackupSetGUID != tc.h.BackupSetGUID || p.BackupSetName != tsql.BackupSetName(tc.seq) {
			t.Fatalf("restore %d (set %d): proof %+v, want id %d, GUID %s", i+1, tc.seq, p, i+1, tc.h.BackupSetGUID)
		}
		st := s.state(t, verifyDB)
		if st == nil || st.State != "ONLINE" || st.Name != verifyDB || st.Created.Sub(p.RestoreDate) > 2*time.Second ||
			p.RestoreDate.Sub(st.Created) > 10*time.Millisecond {
			t.Fatalf("restore %d: state %+v, restore date %v: want ONLINE, created by the restore", i+1, st, p.RestoreDate)
		}
	}
	// Another database restored from set 2 leaves this one's proof alone.
	if _, err := s.verifyDB.Run(testCtx(t), "RESTORE DATABASE", s.restoreStmt(t, disks2, "Other"), nil); err != nil {
		t.Fatal(err)
	}
	if p := s.proof(t, verifyDB); p.HistoryID != 3 || p.BackupSetGUID != h1.BackupSetGUID {
		t.Fatalf("proof after a restore into another database: %+v", p)
	}
	if p := s.proof(t, "Other"); p.HistoryID != 4 || p.BackupSetGUID != h2.BackupSetGUID {
		t.Fatalf("proof of the other database: %+v", p)
	}
}

// TestDatabaseStateWhileRestoring: RESTORING while the RESTORE runs and
// after the instance crashed in the middle of it; a database created
// without a restore has no proof.
func TestDatabaseStateWhileRestoring(t *testing.T) {
	s := newProofSite(t)
	if err := s.src.CreateDatabase(sqlsim.DatabaseSpec{Name: "Sales", Size: 8 << 20}); err != nil {
		t.Fatal(err)
	}
	disks, _ := s.backup(t, "Sales", 1)
	stmt := s.restoreStmt(t, disks, "Sales_verify")
	s.verify.SetThrottle(8 << 20)
	var seen []string
	_, err := s.verifyDB.Run(testCtx(t), "RESTORE DATABASE", stmt, func(m Message) {
		if m.Percent > 0 && m.Percent < 100 && len(seen) == 0 {
			seen = append(seen, s.state(t, "Sales_verify").State)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(seen, ",") != "RESTORING" {
		t.Fatalf("state while restoring: %v", seen)
	}
	if st := s.state(t, "Sales_verify"); st.State != "ONLINE" {
		t.Fatalf("state after the restore: %+v", st)
	}
	if err := s.verify.CrashAt(sqlsim.OpRestore, 50); err != nil {
		t.Fatal(err)
	}
	if _, err := s.verifyDB.Run(testCtx(t), "RESTORE DATABASE", stmt, nil); err == nil {
		t.Fatal("a RESTORE through a crash succeeded")
	}
	if err := s.verify.Start(); err != nil {
		t.Fatal(err)
	}
	s.verify.SetThrottle(0)
	// The pool's connections died with the instance: connect again, as
	// every activity does.
	s.verifyDB.Close()
	if s.verifyDB, err = Open(testCtx(t), Target{Instance: "verify01", Address: s.verify.Addr(), User: "sa", Password: "pw",
		Database: "master", Encrypt: "disable"}); err != nil {
		t.Fatal(err)
	}
	defer s.verifyDB.Close()
	st := s.state(t, "Sales_verify")
	p := s.proof(t, "Sales_verify")
	if st.State != "RESTORING" || p.HistoryID != 1 || !st.Created.After(p.RestoreDate.Add(-time.Millisecond)) {
		t.Fatalf("after a crash mid-RESTORE: state %+v, proof %+v (the cut restore is not in the history)", st, p)
	}
	// A database nobody restored: a state, no proof.
	if err := s.verify.CreateDatabase(sqlsim.DatabaseSpec{Name: "Mine_verify", Size: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	if st, p := s.state(t, "Mine_verify"), s.proof(t, "Mine_verify"); st == nil || st.State != "ONLINE" || p != nil {
		t.Fatalf("created database: state %+v proof %+v", st, p)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	q, args, _ := tsql.RestoreProof("Sales_verify")
	if _, err := s.verifyDB.LastRestoreProof(ctx, q, args...); err == nil {
		t.Fatal("a cancelled proof query returned no error")
	}
}
