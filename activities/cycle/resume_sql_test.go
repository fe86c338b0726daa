package cycle

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// flipStripe flips one byte in the middle of a stripe of set seq on server.
func (f *sqlFixture) flipStripe(server string, seq int64, index, count int) {
	f.t.Helper()
	path := filepath.Join(f.dirs[server], tsql.StripeFileName("sql01", f.db, seq, index, count))
	data, err := os.ReadFile(path)
	if err != nil {
		f.t.Fatal(err)
	}
	data[len(data)/2] ^= 0x40
	if err := os.WriteFile(path, data, 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// A copied set whose primary stripe was damaged while no run owned it (an
// outage stopped its cycle after the copy) is not resumed: the restore
// would read the intact remote copy and the set would be called verified
// on a primary that no longer holds it. ResumeSet hashes every holder's
// stripes against the manifest and fails the set with hash_mismatch,
// naming the server and the stripe.
func TestResumeRefusesASetDamagedOnAHolder(t *testing.T) {
	for _, server := range []string{"bak01", "bak02"} {
		t.Run(server, func(t *testing.T) {
			f := newSQLFixture(t, "Sales", "")
			seq, _ := f.copiedSet()
			f.flipStripe(server, seq, 2, 2)
			_, err := f.env.ExecuteActivity(f.acts.ResumeSet, ResumeInput{Database: "Sales", Sequence: seq, Servers: []string{"bak01", "bak02"}})
			if activities.ErrorType(err) != activities.ErrHashMismatch || !strings.Contains(err.Error(), server) {
				t.Fatalf("resuming a set damaged on %s: %v, want %s naming the server", server, err, activities.ErrHashMismatch)
			}
			for _, s := range []string{"bak01", "bak02"} {
				m := f.load(s, seq)
				if m.State != catalog.StateFailed || m.Failure == nil || m.Failure.Evidence != catalog.EvidenceHashMismatch {
					t.Errorf("manifest on %s after the refused resume: state %s failure %+v, want failed with %s",
						s, m.State, m.Failure, catalog.EvidenceHashMismatch)
				}
			}
		})
	}
}

// An intact copied set is resumed (its stripes hash as the manifest says on
// both holders) and reports its progress while hashing.
func TestResumeHashesAnIntactSet(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	seq, _ := f.copiedSet()
	var res ResumeOutput
	f.must(f.acts.ResumeSet, ResumeInput{Database: "Sales", Sequence: seq, Servers: []string{"bak01", "bak02"}}, &res)
	if res.State != ResumeFromRestore || len(res.Holders) != 2 {
		t.Fatalf("resume of an intact copied set: %+v, want from restore on two holders", res)
	}
}
