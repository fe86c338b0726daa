package cycle

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/storage/local"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// Runs racing for one set number: exactly one claim is written, the others
// get ErrExists (and read the winner's claim), none overwrites it.
func TestClaimIsExclusive(t *testing.T) {
	st, err := local.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const runs = 8
	errs := make([]error, runs)
	var wg sync.WaitGroup
	for i := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := catalog.NewPending("sql01", "Sales", 12, time.Now(), "backup-sql01-Sales", fmt.Sprintf("run-%d", i))
			errs[i] = activities.CreateClaim(context.Background(), st, nil, m)
		}()
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil && won < 0:
			won = i
		case err == nil:
			t.Fatalf("runs %d and %d both claimed set 12", won, i)
		case !errors.Is(err, storage.ErrExists):
			t.Fatalf("run %d: %v, want ErrExists", i, err)
		}
	}
	m, err := catalog.Load(context.Background(), catalog.StorageFS{Storage: st}, nil, catalog.Of("sql01", "Sales"), 12)
	if err != nil || won < 0 || m.RunID != fmt.Sprintf("run-%d", won) {
		t.Fatalf("claim on disk %+v, %v; want run-%d's", m, err, won)
	}
}

// A claim that names no run (run_id "": planted on the share, or damaged)
// is no running cycle's: the cycle's BACKUP does not take it for its own
// claim, and its cancel neither removes the files under that number nor
// rewrites the manifest.
func TestClaimWithoutRunIsNobodys(t *testing.T) {
	f := newCycleFixture(t, "Sales", "")
	planted := catalog.NewPending("sql01", "Sales", 9, f.now.Add(-time.Hour), "", "")
	planted.PrimaryServer = "bak01"
	f.save("bak01", planted)
	f.checkNobodysClaim(9, "")
	if m := f.load("bak01", "Sales", 9); m.State != catalog.StatePending {
		t.Errorf("the claim of no run is now %s, want left pending", m.State)
	}
}

// checkNobodysClaim checks that the claim of set seq of Sales on bak01,
// with a stripe file beside it here, is no run's: claiming the number is
// SequenceInUse (its message holding why), and the run's cancel leaves the
// stripe where it is.
func (f *cycleFixture) checkNobodysClaim(seq int64, why string) {
	t := f.t
	t.Helper()
	stripe := filepath.Join(f.dirs["bak01"], tsql.StripeFileName("sql01", "Sales", seq, 1, 1))
	if err := os.WriteFile(stripe, []byte("someone else's bytes"), 0o644); err != nil {
		t.Fatal(err)
	}
	db, err := f.cfg.Database("sql01", "Sales")
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("claim-%d", seq)
	f.env.RegisterActivityWithOptions(func(ctx context.Context) (bool, error) {
		st, err := local.Open(ctx, f.dirs["bak01"])
		if err != nil {
			return false, err
		}
		defer st.Close()
		_, resumed, err := activities.ClaimSet(f.acts.Activities, ctx, st, db, "bak01", seq, nil)
		return resumed, err
	}, activity.RegisterOptions{Name: name})
	if _, err := f.env.ExecuteActivity(name); activities.ErrorType(err) != activities.ErrSequenceInUse || !strings.Contains(err.Error(), why) {
		t.Errorf("claiming set %d over a claim that is no run's: %v, want %s (the cycle takes a new number) saying %q", seq, err, activities.ErrSequenceInUse, why)
	}
	in := activities.MarkInput{Database: "Sales", Sequence: seq, Servers: []string{"bak01"}, Step: activities.StepBackup, Reason: "cancelled"}
	if _, err := f.env.ExecuteActivity(f.acts.MarkCancelled, in); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stripe); err != nil {
		t.Errorf("the cancel of a cycle removed a file of a claim that is no run's: %v", err)
	}
}
