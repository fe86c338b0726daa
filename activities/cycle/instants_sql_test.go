package cycle

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/metrics"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
	"github.com/backupcycle/backupcycle/internal/status"
)

// verifiedCycle runs a whole cycle of the fixture's database through the
// activities, plan to verified, and drops the restored copy: the set's
// plan and number, and when (the worker's clock) its backup was read.
func (f *sqlFixture) verifiedCycle() (activities.Plan, int64, time.Time) {
	f.t.Helper()
	p, seq, _ := f.backedUp()
	backedUp := time.Now()
	f.must(f.acts.CopyToRemote, activities.CopyInput{Database: f.db, Sequence: seq, From: p.Rotation[0], To: p.Remote}, nil)
	verify := activities.VerifyInput{Database: f.db, Sequence: seq, Server: p.Remote, SourceUTCOffsetMinutes: p.Source.UTCOffsetMinutes}
	f.must(f.acts.Restore, verify, nil)
	f.must(f.acts.CheckDB, verify, nil)
	f.must(f.acts.SanityChecks, verify, nil)
	f.must(f.acts.MarkVerified, activities.MarkInput{Database: f.db, Sequence: seq, Servers: []string{p.Rotation[0], p.Remote}}, nil)
	f.must(f.acts.DropVerifyDB, verify, nil)
	return p, seq, backedUp
}

// takenRecorder keeps what MarkVerified tells the metrics.
type takenRecorder struct {
	metrics.Nop
	mu    sync.Mutex
	taken map[int]time.Time
	calls int
}

func (r *takenRecorder) Verified(_, _ string, takenAt time.Time, _ time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.taken == nil {
		r.taken = map[int]time.Time{}
	}
	r.taken[r.calls] = takenAt
}

// A source server east or west of UTC (the verification instance on UTC)
// reports its backup's finish on its own wall clock. The age `starter
// status` and the metrics give the newest verified set is its real age:
// east, a set 25 h old with rpo 24h is out of its objective (not 23 h old
// and fine); west, a set 20 h old is within it (not 25 h old and red).
func TestSQLAgeOfASetFromTheSourcesInstant(t *testing.T) {
	for _, tc := range []struct {
		name   string
		offset time.Duration
		later  time.Duration // how long after the backup status is asked
		red    bool
	}{
		{"east", 2 * time.Hour, 25 * time.Hour, true},
		{"west", -5 * time.Hour, 20 * time.Hour, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newSQLFixture(t, "Sales", "    rpo: 24h\n")
			f.withSource(func(c *sqlsim.Config) { c.TimeZone = time.FixedZone(tc.name, int(tc.offset.Seconds())) })
			rec := &takenRecorder{}
			f.acts.Metrics = rec
			_, seq, backedUp := f.verifiedCycle()

			// The manifest keeps what SQL Server reported, the offset and
			// the instant, for the source's HEADERONLY and the
			// verification instance's restore_date alike.
			m := f.load("bak02", seq)
			if h := m.Header; h.UTCOffsetMinutes == nil || *h.UTCOffsetMinutes != int(tc.offset/time.Minute) ||
				h.BackupFinish.Sub(backedUp.UTC().Add(tc.offset)).Abs() > time.Minute || h.BackupFinishUTC.Sub(backedUp).Abs() > time.Minute {
				t.Errorf("header finish %v (offset %s, instant %v), want the source's wall clock and %v", h.BackupFinish,
					minutes(h.UTCOffsetMinutes), h.BackupFinishUTC, backedUp.UTC())
			}
			if p := m.Proof; p == nil || p.UTCOffsetMinutes == nil || *p.UTCOffsetMinutes != 0 || p.RestoredAtUTC.Sub(backedUp).Abs() > time.Minute {
				t.Errorf("proof %+v, want restore_date with the verification instance's offset 0 and its instant", p)
			}
			// The metrics' gauge moves to the backup's finish, an instant.
			if rec.calls != 1 || rec.taken[1].Sub(backedUp).Abs() > time.Minute {
				t.Errorf("MarkVerified told the metrics the set was taken at %v, want about %v (the worker's clock)", rec.taken[1], backedUp.UTC())
			}
			r := status.Load(context.Background(), f.cfg, nil, backedUp.Add(tc.later))
			if len(r.Databases) != 1 || r.Databases[0].LastVerified == nil || r.Databases[0].LastVerified.Sequence != seq {
				t.Fatalf("status %+v, want set %d verified", r.Databases, seq)
			}
			d := r.Databases[0]
			if age := time.Duration(d.LastVerified.Age); (age - tc.later).Abs() > time.Minute {
				t.Errorf("age of set %d asked %s after its backup: %s (taken %v), want %s", seq, tc.later, d.LastVerified.Age, d.LastVerified.TakenAt, tc.later)
			}
			if d.OutOfObjectives != tc.red {
				t.Errorf("out of objectives = %v (%v), want %v with rpo 24h after %s", d.OutOfObjectives, d.Reasons, tc.red, tc.later)
			}
		})
	}
}

// The source moves from UTC+2 to UTC-5 between two sets (a VM moved west):
// set N+1 is taken after set N but its wall clock shows seven hours
// earlier. N+1 is the newest verified set: status reports it, the round
// robin continues from its server, and retention (keep_verified: 1) deletes
// N, never N+1.
func TestSQLSourceZoneChangeKeepsTheRealNewest(t *testing.T) {
	f := newSQLFixture(t, "Sales", "    retention:\n      keep_verified: 1\n")
	f.withSource(func(c *sqlsim.Config) { c.TimeZone = time.FixedZone("UTC+2", 2*3600) })
	p1, n, _ := f.verifiedCycle()
	f.withSource(func(c *sqlsim.Config) { c.TimeZone = time.FixedZone("UTC-5", -5*3600) })
	p2, n1, _ := f.verifiedCycle()
	if p1.Rotation[0] != "bak01" || p2.Rotation[0] != "bak02" || n1 <= n {
		t.Fatalf("sets %d on %s then %d on %s, want bak01 then bak02", n, p1.Rotation[0], n1, p2.Rotation[0])
	}

	if next := f.plan(); next.LastServer != "bak02" || next.Rotation[0] != "bak01" {
		t.Errorf("after set %d on bak02 the plan says last server %q, next %q; want bak02 then bak01", n1, next.LastServer, next.Rotation[0])
	}
	r := status.Load(context.Background(), f.cfg, nil, time.Now())
	if v := r.Databases[0].LastVerified; v == nil || v.Sequence != n1 {
		t.Errorf("status says the newest verified set is %+v, want set %d", v, n1)
	}
	var out activities.RetentionOutput
	f.must(f.acts.ApplyRetention, activities.RetentionInput{Database: f.db, Servers: []string{"bak01", "bak02"}}, &out)
	for _, s := range []string{"bak01", "bak02"} {
		if m := f.site.Manifest(s, f.db, n1); m == nil || m.State != catalog.StateVerified {
			t.Errorf("retention deleted set %d, the newest verified, from %s (deleted %+v)", n1, s, out.Deleted)
		}
		if m := f.site.Manifest(s, f.db, n); m != nil {
			t.Errorf("set %d, older, still on %s with keep_verified 1 (deleted %+v)", n, s, out.Deleted)
		}
	}
}

// A server whose GETDATE() and GETUTCDATE() lie further apart than any time
// zone cannot have its dates made instants: the manifest step stops with an
// error naming the server and the fix, and writes nothing.
func TestSQLServerOffsetBeyondAnyZone(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	f.withSource(func(c *sqlsim.Config) { c.TimeZone = time.FixedZone("UTC+15", 15*3600) })
	p := f.plan()
	var seq int64
	f.must(f.acts.AllocateSequence, activities.SequenceInput{Database: f.db}, &seq)
	var b activities.BackupOutput
	f.must(f.acts.Backup, activities.BackupInput{Database: f.db, Sequence: seq, Server: p.Rotation[0], Stripes: p.Stripes}, &b)
	err := f.run(f.acts.WriteManifest, activities.ManifestInput{Database: f.db, Sequence: seq, Server: p.Rotation[0], Backup: b}, nil)
	if activities.ErrorType(err) != activities.ErrInvalidConfig || !strings.Contains(err.Error(), "900 minutes apart") || !strings.Contains(err.Error(), "time zone") {
		t.Fatalf("WriteManifest at UTC+15: %v, want InvalidConfig naming 900 minutes and the time zone", err)
	}
	if m := f.site.Manifest(p.Rotation[0], f.db, seq); m == nil || m.State != catalog.StatePending {
		t.Errorf("manifest after the refusal: %+v, want the claim left pending", m)
	}
}

// A full backup whose manifest is written after the source restarted in
// another zone (an attempt of WriteManifest cut short, retried) keeps the
// offset it was taken with, msdb's backupset.time_zone: its header's
// instants are when it ran, not an hour off.
func TestSQLManifestAfterAZoneChangeKeepsTheBackupsOffset(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	var p activities.Plan
	f.must(f.acts.PlanCycle, activities.PlanInput{Database: f.db}, &p)
	var seq int64
	f.must(f.acts.AllocateSequence, activities.SequenceInput{Database: f.db}, &seq)
	var b activities.BackupOutput
	backedUp := time.Now()
	f.must(f.acts.Backup, activities.BackupInput{Database: f.db, Sequence: seq, Server: p.Rotation[0], Stripes: p.Stripes}, &b)
	f.withSource(func(c *sqlsim.Config) { c.TimeZone = time.FixedZone("UTC+1", 3600) })
	f.must(f.acts.WriteManifest, activities.ManifestInput{Database: f.db, Sequence: seq, Server: p.Rotation[0], Backup: b}, nil)
	h := f.load(p.Rotation[0], seq).Header
	if h.UTCOffsetMinutes == nil || *h.UTCOffsetMinutes != 0 || h.BackupFinishUTC.Sub(backedUp).Abs() > time.Minute {
		t.Fatalf("set %d, taken on UTC at %v: recorded with offset %s, finished %v (%v on its clock)", seq, backedUp.UTC(),
			minutes(h.UTCOffsetMinutes), h.BackupFinishUTC, h.BackupFinish)
	}
}
