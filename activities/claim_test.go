package activities

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"

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
			errs[i] = createClaim(context.Background(), st, nil, m)
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
	stripe := filepath.Join(f.dirs["bak01"], tsql.StripeFileName("sql01", "Sales", 9, 1, 1))
	if err := os.WriteFile(stripe, []byte("someone else's bytes"), 0o644); err != nil {
		t.Fatal(err)
	}
	db, err := f.cfg.Database("sql01", "Sales")
	if err != nil {
		t.Fatal(err)
	}
	f.env.RegisterActivityWithOptions(func(ctx context.Context) (bool, error) {
		st, err := local.Open(ctx, f.dirs["bak01"])
		if err != nil {
			return false, err
		}
		defer st.Close()
		_, resumed, err := f.acts.claimSet(ctx, st, db, "bak01", 9)
		return resumed, err
	}, activity.RegisterOptions{Name: "claimNine"})
	if _, err := f.env.ExecuteActivity("claimNine"); errorTypeOf(err) != ErrSequenceInUse {
		t.Errorf("claiming set 9 over a claim of no run: %v, want %s (the cycle takes a new number)", err, ErrSequenceInUse)
	}
	in := MarkInput{Database: "Sales", Sequence: 9, Servers: []string{"bak01"}, Step: StepBackup, Reason: "cancelled"}
	if _, err := f.env.ExecuteActivity(f.acts.MarkCancelled, in); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stripe); err != nil {
		t.Errorf("the cancel of a cycle removed a file of a claim of no run: %v", err)
	}
	if m := f.load("bak01", "Sales", 9); m.State != catalog.StatePending {
		t.Errorf("the claim of no run is now %s, want left pending", m.State)
	}
}
