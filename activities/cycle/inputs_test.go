package cycle

import (
	"crypto/sha256"
	"encoding"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/sitetest"
	"github.com/backupcycle/backupcycle/internal/storage/copier"
)

// reconfigure rewrites the fixture's configuration with edit.
func (f *cycleFixture) reconfigure(edit func(string) string) {
	f.t.Helper()
	data, err := os.ReadFile(f.cfg.File)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(f.cfg.File, []byte(edit(string(data))), 0o600); err != nil {
		f.t.Fatal(err)
	}
	cfg, err := config.Load(f.cfg.File)
	if err != nil {
		f.t.Fatal(err)
	}
	f.cfg, f.acts.Cycle.Config = cfg, cfg
}

// wantInvalidInput checks that err is the non-retryable InvalidConfig an
// input outside the configuration gets, naming what it named.
func wantInvalidInput(t *testing.T, what string, err error, names ...string) {
	t.Helper()
	if activities.ErrorType(err) != activities.ErrInvalidConfig || !appErrorOf(t, err).NonRetryable() {
		t.Errorf("%s: %v, want a non-retryable %s", what, err, activities.ErrInvalidConfig)
		return
	}
	for _, n := range names {
		if !strings.Contains(err.Error(), n) {
			t.Errorf("%s: %v does not name %q", what, err, n)
		}
	}
}

// TestActivityInputsKeepToTheDatabasesServers: whoever schedules an
// activity (a Web UI start, anyone polling the task queue) cannot make it
// touch a backup server the database does not use, even one the
// configuration knows: every server an input names is checked against the
// database's rotation and copy targets, and nothing is read or written on
// it.
func TestActivityInputsKeepToTheDatabasesServers(t *testing.T) {
	f := newCycleFixture(t, "Sales", "")
	other := filepath.Join(t.TempDir(), "bak03")
	if err := os.MkdirAll(other, 0o755); err != nil {
		t.Fatal(err)
	}
	f.reconfigure(sitetest.WithServer("bak03", other))
	f.writeSet("bak01", "Sales", 5, catalog.StateWritten, "bak01", 1000)
	checked := f.writeSet("bak01", "Sales", 6, catalog.StateChecked, "bak01", 1000)
	checked.Header = &catalog.Header{BackupSetGUID: "5d1f0c2e-aaaa-4bbb-8ccc-0123456789ab", FirstLSN: "1", LastLSN: "2"}
	checked.Proof = &catalog.Proof{VerifyInstance: "verify01", VerifyDatabase: "Sales_verify", RestoreHistoryID: 9,
		BackupSetGUID: checked.Header.BackupSetGUID}
	checked.SanityProof = &catalog.SanityProof{VerifyInstance: "verify01", VerifyDatabase: "Sales_verify", RestoreHistoryID: 9,
		BackupSetGUID: checked.Header.BackupSetGUID, Checks: []string{"orders-present"}, Passed: true}
	checked.Servers = []string{"bak01", "bak02"}
	f.save("bak01", checked)
	f.save("bak02", checked)

	verify := activities.VerifyInput{Database: "Sales", Sequence: 6, Server: "bak03"}
	for _, tc := range []struct {
		name string
		fn   any
		in   any
	}{
		{"CopyToRemote", f.acts.CopyToRemote, activities.CopyInput{Database: "Sales", Sequence: 5, From: "bak01", To: "bak03"}},
		{"CopyToRemote from", f.acts.CopyToRemote, activities.CopyInput{Database: "Sales", Sequence: 5, From: "bak03", To: "bak01"}},
		{"WriteManifest", f.acts.WriteManifest, activities.ManifestInput{Database: "Sales", Sequence: 5, Server: "bak03",
			Backup: activities.BackupOutput{Stripes: []activities.Stripe{{Name: "x"}}}}},
		{"Backup", f.acts.Backup, activities.BackupInput{Database: "Sales", Sequence: 9, Server: "bak03", Stripes: 2}},
		{"Restore", f.acts.Restore, verify},
		{"CheckDB", f.acts.CheckDB, verify},
		{"SanityChecks", f.acts.SanityChecks, verify},
		{"DropVerifyDB", f.acts.DropVerifyDB, verify},
		{"MarkVerified", f.acts.MarkVerified, activities.MarkInput{Database: "Sales", Sequence: 6, Servers: []string{"bak01", "bak02", "bak03"}}},
		{"MarkFailed", f.acts.MarkFailed, activities.MarkInput{Database: "Sales", Sequence: 7, Servers: []string{"bak03"},
			Evidence: string(catalog.EvidenceBackupIncomplete)}},
		{"MarkCancelled", f.acts.MarkCancelled, activities.MarkInput{Database: "Sales", Sequence: 5, Servers: []string{"bak01", "bak03"}}},
		{"ApplyRetention", f.acts.ApplyRetention, activities.RetentionInput{Database: "Sales", Servers: []string{"bak03"}}},
		{"ResumeSet", f.acts.ResumeSet, ResumeInput{Database: "Sales", Sequence: 5, Servers: []string{"bak01", "bak03"}}},
		{"StopStatements", f.acts.StopStatements, activities.StopInput{Database: "Sales", Sequence: 5, Server: "bak03"}},
		{"StopStatements remote", f.acts.StopStatements, activities.StopInput{Database: "Sales", Sequence: 5, Remote: "bak03"}},
	} {
		_, err := f.env.ExecuteActivity(tc.fn, tc.in)
		wantInvalidInput(t, tc.name, err, "bak03")
	}
	entries, err := os.ReadDir(other)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("bak03 holds %s: an activity wrote to a server the database does not use", e.Name())
	}
	if m := f.load("bak01", "Sales", 5); m.State != catalog.StateWritten || len(m.Stripes) != 2 {
		t.Errorf("set 5 on bak01 after the refused inputs: %s with %d stripes, want written as it was", m.State, len(m.Stripes))
	}
	if m := f.load("bak01", "Sales", 6); m.State != catalog.StateChecked {
		t.Errorf("set 6 on bak01 after the refused MarkVerified: %s, want checked", m.State)
	}
}

// TestActivityInputsWiderThanTheConfigurationAreRefused: a sequence method
// that writes to the source where the configuration says catalog is
// refused before anything runs. (The calibration's inputs: package
// activities/calibrate.)
func TestActivityInputsWiderThanTheConfigurationAreRefused(t *testing.T) {
	f := newCycleFixture(t, "Sales", "    memory_budget: 256MiB\n")
	for _, tc := range []struct {
		name string
		fn   any
		in   any
		want []string
	}{
		{"AllocateSequence", f.acts.AllocateSequence, activities.SequenceInput{Database: "Sales", Method: config.SequenceTable}, []string{`"table"`, "catalog"}},
	} {
		_, err := f.env.ExecuteActivity(tc.fn, tc.in)
		wantInvalidInput(t, tc.name, err, tc.want...)
	}
}

// TestCopyResumesOnlyWhatTheDestinationHolds: a copy's heartbeat (offset and
// SHA-256 state per stripe) comes back from Temporal, where anyone polling
// the task queue can forge it. A checkpoint that does not hold for the
// partial file on disk is dropped and the stripe copied again from the
// start: the copy completes with the source's bytes and hashes, and never
// fails with an error that is evidence against a good set.
func TestCopyResumesOnlyWhatTheDestinationHolds(t *testing.T) {
	f := newCycleFixture(t, "Sales", "")
	m := f.writeSet("bak01", "Sales", 5, catalog.StateWritten, "bak01", 50_000)
	hb := CopyHeartbeat{Files: map[string]*copier.Progress{}}
	for i, s := range m.Stripes {
		fi, err := os.Stat(filepath.Join(f.dirs["bak01"], s.Name))
		if err != nil {
			t.Fatal(err)
		}
		// The partial file holds other bytes than the source; the
		// checkpoint claims the whole stripe (first) or its first half
		// with a chunk beyond written (second), with the SHA-256 state of
		// nothing.
		junk := make([]byte, fi.Size())
		if err := os.WriteFile(filepath.Join(f.dirs["bak02"], s.Name+copier.DefaultTempSuffix), junk, 0o644); err != nil {
			t.Fatal(err)
		}
		p := &copier.Progress{File: s.Name, Size: fi.Size(), SrcModTime: fi.ModTime().UnixNano(), ChunkSize: 16 << 10,
			HashState: emptySHA256State(t)}
		if i == 0 {
			p.Offset = fi.Size()
		} else {
			p.Offset, p.Ahead = 32<<10, []int64{64 << 10}
		}
		hb.Files[s.Name] = p
	}
	f.env.SetHeartbeatDetails(hb)
	v, err := f.env.ExecuteActivity(f.acts.CopyToRemote, activities.CopyInput{Database: "Sales", Sequence: 5, From: "bak01", To: "bak02"})
	if err != nil {
		t.Fatalf("copy with a forged checkpoint: %v (type %s), want it copied again from the start", err, activities.ErrorType(err))
	}
	var out activities.CopyOutput
	if err := v.Get(&out); err != nil {
		t.Fatal(err)
	}
	for _, s := range m.Stripes {
		a, _ := os.ReadFile(filepath.Join(f.dirs["bak01"], s.Name))
		b, err := os.ReadFile(filepath.Join(f.dirs["bak02"], s.Name))
		if err != nil || string(a) != string(b) {
			t.Errorf("stripe %s not copied intact after the forged checkpoint: %v", s.Name, err)
		}
	}
	if got := f.load("bak02", "Sales", 5); got.State != catalog.StateCopied || got.Failure != nil {
		t.Errorf("manifest on bak02: %s %+v, want copied", got.State, got.Failure)
	}
}

// TestSanityMaxAgeNeverTakesAForgedOffset: the source's offset from UTC in
// a sanity check's input (the plan's reading) only ever makes max_age
// more lenient, by at most a clock change's hour against the manifest's:
// an offset hours away cannot fail a fresh copy.
func TestSanityMaxAgeNeverTakesAForgedOffset(t *testing.T) {
	h := &catalog.Header{BackupFinish: time.Date(2026, 11, 29, 21, 0, 0, 0, time.UTC)}
	h.SetUTCOffset(60)
	m := &catalog.Manifest{Header: h}
	c := config.SanityCheck{Expect: config.ExpectMaxAge, MaxAge: time.Hour}
	fresh := time.Date(2026, 11, 29, 20, 30, 0, 0, time.UTC) // 30 min before the finish, same clock
	for _, off := range []int{-600, 0, 600, 14 * 60} {
		if _, got := sanityMismatchAt(c, fresh, true, m, &off, time.Now()); got != "" {
			t.Errorf("offset %d in the input: %q, want the value 30 min older than the backup to hold", off, got)
		}
	}
	stale := time.Date(2026, 11, 29, 17, 0, 0, 0, time.UTC) // 4 h before the finish
	for _, off := range []int{-600, 0, 600} {
		if _, got := sanityMismatchAt(c, stale, true, m, &off, time.Now()); got == "" {
			t.Errorf("offset %d in the input: a value 4 h older than the backup held", off)
		}
	}
}

// emptySHA256State is the marshalled state of a SHA-256 over nothing.
func emptySHA256State(t *testing.T) []byte {
	t.Helper()
	b, err := sha256.New().(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
