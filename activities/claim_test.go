package activities

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/storage/local"
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
			errs[i] = createClaim(context.Background(), st, m)
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
	m, err := catalog.Load(context.Background(), catalog.StorageFS{Storage: st}, catalog.Of("sql01", "Sales"), 12)
	if err != nil || won < 0 || m.RunID != fmt.Sprintf("run-%d", won) {
		t.Fatalf("claim on disk %+v, %v; want run-%d's", m, err, won)
	}
}
