package cycle

import (
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/sitetest"
)

// TestSQLBackupTakesOnlyANarrowerMode: a Backup input's mode and stripe
// count are held to the configuration. COPY_ONLY cannot be turned off nor
// COMPRESSION on where the configuration says otherwise (the BACKUP the
// emulator ran says COPY_ONLY and NO_COMPRESSION); more stripes than
// configured, and a backup server the configuration knows but the
// database does not use, are InvalidConfig before any BACKUP is sent.
func TestSQLBackupTakesOnlyANarrowerMode(t *testing.T) {
	f := newSQLFixtureOf(t, sitetest.Options{Database: "Sales", Uncompressed: true})
	if db, err := f.acts.Cycle.DatabaseEntry("sql01", "Sales", ""); err != nil || !db.CopyOnly || db.Compression {
		t.Fatalf("configured database %+v, %v: want copy_only and no compression", db, err)
	}
	other := t.TempDir()
	if err := f.src.AddShare(sitetest.UNC("bak03"), other); err != nil {
		t.Fatal(err)
	}
	f.reconfigure(sitetest.WithServer("bak03", other))
	var seq int64
	f.must(f.acts.AllocateSequence, activities.SequenceInput{Database: "Sales"}, &seq)
	for _, in := range []activities.BackupInput{
		{Database: "Sales", Sequence: seq, Server: "bak03", Stripes: 2},
		{Database: "Sales", Sequence: seq, Server: "bak01", Stripes: 8},
	} {
		err := f.run(f.acts.Backup, in, nil)
		wantInvalidInput(t, "Backup "+in.Server, err)
	}
	if n := len(statements(f.src, "BACKUP DATABASE")); n != 0 {
		t.Fatalf("%d BACKUP statements for refused inputs", n)
	}
	wide := &activities.BackupMode{CopyOnly: false, Compression: true, Sequence: config.SequenceCatalog}
	f.must(f.acts.Backup, activities.BackupInput{Database: "Sales", Sequence: seq, Server: "bak01", Stripes: 1, Mode: wide}, nil)
	bs := statements(f.src, "BACKUP DATABASE")
	if len(bs) != 1 || !strings.Contains(bs[0].SQL, "COPY_ONLY") || !strings.Contains(bs[0].SQL, "NO_COMPRESSION") {
		t.Fatalf("BACKUP statements %+v: want one WITH COPY_ONLY and NO_COMPRESSION, as configured", bs)
	}
	if strings.Count(bs[0].SQL, "DISK =") != 1 {
		t.Errorf("BACKUP %s: want the one stripe asked for (fewer than configured is narrower)", bs[0].SQL)
	}
}

// TestSQLWriteManifestDerivesItsStripes: the stripes a WriteManifest input
// lists are only counted: their names and paths come from the
// configuration and the set's claim, so a path in the input never reaches
// SQL Server (RESTORE HEADERONLY FROM DISK = whatever it names) and the
// manifest records the files the worker sees.
func TestSQLWriteManifestDerivesItsStripes(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	var p activities.Plan
	f.must(f.acts.PlanCycle, activities.PlanInput{Database: "Sales"}, &p)
	var seq int64
	f.must(f.acts.AllocateSequence, activities.SequenceInput{Database: "Sales"}, &seq)
	var b activities.BackupOutput
	f.must(f.acts.Backup, activities.BackupInput{Database: "Sales", Sequence: seq, Server: p.Rotation[0], Stripes: p.Stripes}, &b)
	forged := b
	forged.Stripes = nil
	for i := range b.Stripes {
		forged.Stripes = append(forged.Stripes, activities.Stripe{Name: "elsewhere.bak", Path: `\\attacker\share\x` + string(rune('a'+i)) + `.bak`, Size: 1})
	}
	var out activities.ManifestOutput
	f.must(f.acts.WriteManifest, activities.ManifestInput{Database: "Sales", Sequence: seq, Server: p.Rotation[0], Backup: forged}, &out)
	for _, st := range f.src.Statements() {
		if strings.Contains(st.SQL, "attacker") {
			t.Errorf("SQL Server was sent a path from the input: %s", st.SQL)
		}
	}
	m := f.load(p.Rotation[0], seq)
	if len(m.Stripes) != len(b.Stripes) {
		t.Fatalf("manifest stripes %+v, want %d", m.Stripes, len(b.Stripes))
	}
	for i, s := range m.Stripes {
		if s.Name != b.Stripes[i].Name || s.Size != b.Stripes[i].Size || out.Stripes[i].Path != b.Stripes[i].Path {
			t.Errorf("stripe %d: manifest %+v, output %+v; want %+v as the worker sees it", i, s, out.Stripes[i], b.Stripes[i])
		}
	}
}

// TestSQLCheckDBBaselineIsNotTheHeartbeats: a CHECKDB that ended while no
// worker watched counts as clean only against the baseline Restore
// recorded in the manifest. A forged heartbeat (an earlier attempt "sent"
// a CHECKDB, with a baseline from long ago) does not make an unchecked
// copy, which carries its source's LastGoodCheckDbTime, clean: CHECKDB
// runs.
func TestSQLCheckDBBaselineIsNotTheHeartbeats(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	// The source was checked clean before its BACKUP: the copy carries a
	// LastGoodCheckDbTime from the start.
	execOn(t, f.src, "DBCC CHECKDB([Sales]) WITH NO_INFOMSGS")
	seq, verify := f.copiedSet()
	f.must(f.acts.Restore, verify, nil)
	if m := f.load("bak02", seq); m.VerifyCopy == nil || m.VerifyCopy.CheckDBBaseline == nil {
		t.Errorf("Restore recorded no CHECKDB baseline: %+v", m.VerifyCopy)
	}
	long := time.Date(1901, 1, 1, 0, 0, 0, 0, time.UTC)
	f.env.SetHeartbeatDetails(map[string]any{"step": activities.StepCheckDB, "seq": seq, "started": true,
		"baseline": map[string]any{"last_good": long, "at": long}})
	f.must(f.acts.CheckDB, verify, nil)
	if got := statements(f.verify, "DBCC CHECKDB"); len(got) != 1 || got[0].Outcome != "ok" {
		t.Fatalf("CHECKDB statements %+v: want the CHECKDB run, not taken as done from a forged heartbeat", got)
	}
	if m := f.load("bak02", seq); m.Proof == nil || m.State != catalog.StateChecked {
		t.Errorf("after CHECKDB: %s, proof %+v", m.State, m.Proof)
	}
}

// TestSQLRestoreOnlyFromTheRemoteCopy: a set restores, and is checked,
// only on a server its manifest says it was copied to: a Restore input
// naming the set's primary (also a copy target, of the other server) is
// refused before anything is restored, so a set is never verified from
// the files of its primary alone.
func TestSQLRestoreOnlyFromTheRemoteCopy(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	p, seq, _ := f.backedUp()
	verify := activities.VerifyInput{Database: "Sales", Sequence: seq, Server: p.Rotation[0]}
	for _, step := range []struct {
		name string
		fn   any
	}{{"Restore", f.acts.Restore}, {"CheckDB", f.acts.CheckDB}, {"SanityChecks", f.acts.SanityChecks}} {
		wantInvalidInput(t, step.name+" on the primary", f.run(step.fn, verify, nil), p.Rotation[0])
	}
	if n := f.verifyRestores(); n != 0 {
		t.Errorf("%d RESTORE statements from a set's primary", n)
	}
	if m := f.load(p.Rotation[0], seq); m.State != catalog.StateWritten {
		t.Errorf("set %d on its primary: %s, want written", seq, m.State)
	}
}
