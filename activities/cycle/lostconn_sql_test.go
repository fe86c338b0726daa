package cycle

import (
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
)

// A network failure closes the connection of a running BACKUP, RESTORE or
// CHECKDB. SQL Server notices a vanished client only when it next writes to
// it, and these statements write nothing until their end, so each runs on:
// the step finds it on the instance, waits for it and reads what it left.
// Exactly one statement of each kind runs, and each step succeeds; before,
// the lost connection counted as a lost host (a failed set and a second
// BACKUP, another restore round with REPLACE while the CHECKDB still ran).
func TestSQLConnectionLostMidStatement(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	var p activities.Plan
	f.must(f.acts.PlanCycle, activities.PlanInput{Database: "Sales"}, &p)
	var seq int64
	f.must(f.acts.AllocateSequence, activities.SequenceInput{Database: "Sales"}, &seq)

	f.src.SetThrottle(2 << 20)
	if err := f.src.DropConnectionAt(sqlsim.OpBackup, 30); err != nil {
		t.Fatal(err)
	}
	var b activities.BackupOutput
	if err := f.run(f.acts.Backup, activities.BackupInput{Database: "Sales", Sequence: seq, Server: p.Rotation[0], Stripes: p.Stripes}, &b); err != nil {
		t.Fatalf("backup whose connection was lost: %v; want it found on the instance and awaited", err)
	}
	f.src.SetThrottle(0)
	if f.src.LostConnections() != 1 {
		t.Fatal("the armed lost connection did not fire")
	}
	if got := statements(f.src, "BACKUP DATABASE"); len(got) != 1 || got[0].Outcome != "ok" || len(b.Stripes) != p.Stripes {
		t.Fatalf("BACKUP statements %+v, output %+v; want one, ok, with every stripe", got, b)
	}
	f.must(f.acts.WriteManifest, activities.ManifestInput{Database: "Sales", Sequence: seq, Server: p.Rotation[0], Backup: b}, nil)
	f.must(f.acts.CopyToRemote, activities.CopyInput{Database: "Sales", Sequence: seq, From: p.Rotation[0], To: p.Remote}, nil)
	verify := activities.VerifyInput{Database: "Sales", Sequence: seq, Server: p.Remote}

	f.verify.SetThrottle(2 << 20)
	defer f.verify.SetThrottle(0)
	for _, tc := range []struct {
		op, kind string
		step     any
	}{
		{sqlsim.OpRestore, "RESTORE DATABASE", f.acts.Restore},
		{sqlsim.OpCheckDB, "DBCC CHECKDB", f.acts.CheckDB},
	} {
		lost := f.verify.LostConnections()
		if err := f.verify.DropConnectionAt(tc.op, 30); err != nil {
			t.Fatal(err)
		}
		if err := f.run(tc.step, verify, nil); err != nil {
			t.Fatalf("%s whose connection was lost: %v; want it found on the instance and awaited", tc.kind, err)
		}
		if f.verify.LostConnections() != lost+1 {
			t.Fatalf("the armed lost connection of %s did not fire", tc.kind)
		}
		if got := statements(f.verify, tc.kind); len(got) != 1 || got[0].Outcome != "ok" {
			t.Fatalf("%s statements %+v; want one, ok", tc.kind, got)
		}
	}
	if m := f.load(p.Remote, seq); m.State != catalog.StateChecked || m.Proof == nil {
		t.Errorf("manifest after CHECKDB: %s, proof %+v; want checked with its proof", m.State, m.Proof)
	}
}

// A lost connection mid-BACKUP for a login that cannot see other sessions:
// the step cannot tell whether the BACKUP runs on, so it sends no second
// one and names the missing grant (BackupDeviceInUse: the workflow waits
// and takes the same set again); once the BACKUP has ended, the same set
// is found complete.
func TestSQLConnectionLostBlindLogin(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	f.blindBackupLogin()
	var seq int64
	f.must(f.acts.AllocateSequence, activities.SequenceInput{Database: "Sales"}, &seq)
	f.src.SetThrottle(1 << 20)
	if err := f.src.DropConnectionAt(sqlsim.OpBackup, 20); err != nil {
		t.Fatal(err)
	}
	in := activities.BackupInput{Database: "Sales", Sequence: seq, Server: "bak01", Stripes: 2}
	wantBlind(t, "BACKUP", f.run(f.acts.Backup, in, nil), activities.ErrBackupDeviceInUse)
	if got := statements(f.src, "BACKUP DATABASE"); len(got) != 1 || got[0].Outcome != "running" {
		t.Fatalf("BACKUP statements %+v; want the first alone, still running", got)
	}
	waitDone := time.Now().Add(time.Minute)
	for statements(f.src, "BACKUP DATABASE")[0].Outcome == "running" && time.Now().Before(waitDone) {
		time.Sleep(50 * time.Millisecond)
	}
	f.src.SetThrottle(0)
	var out activities.BackupOutput
	f.must(f.acts.Backup, in, &out)
	if got := statements(f.src, "BACKUP DATABASE"); len(got) != 1 || got[0].Outcome != "ok" || !out.Reattached {
		t.Errorf("BACKUP statements %+v, output %+v; want the first alone, ok, found complete", got, out)
	}
}
