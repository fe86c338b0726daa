package endpoint

import (
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/status"
)

// The last verified timestamp and time to recover are those of the newest
// point a restore reaches, as status judges the rpo and rto: the newest
// verified differential on the newest verified full when there is one (its
// restore step restored both), else that full. The gauge marking a
// differential verified and the next read of the manifests agree.
func TestLastVerifiedCountsTheDifferential(t *testing.T) {
	s := newManifestState()
	full := time.Date(2026, 11, 29, 22, 0, 0, 0, time.UTC)
	diff := full.Add(6 * time.Hour)
	s.beginLoad()
	s.verified("sql01", "Sales", diff, 40*time.Minute)
	r := reportOf(t, "sql01", "Sales", full)
	r.Databases[0].LastVerified.TimeToRecover = status.Duration(30 * time.Minute)
	r.Databases[0].LastDifferential = &status.Verified{Sequence: 8, Base: 7, TakenAt: diff, TimeToRecover: status.Duration(40 * time.Minute)}
	s.beginLoad() // the next read, after the verify
	s.apply(r, time.Now())
	if got := s.rows[dbKey{"sql01", "Sales"}]; !got.takenAt.Equal(diff) || got.timeToRecover != 40*time.Minute {
		t.Fatalf("after a read: %v, %s; want the differential's %v, 40m", got.takenAt, got.timeToRecover, diff)
	}
}
