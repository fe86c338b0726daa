package activities

import (
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/sitetest"
)

// After a verified set (Cleanup) a verification instance that takes the
// connection but never answers the login is given CleanupConnectTimeout,
// not the instance's connect_timeout, and is not retried: the copy is
// left to the next cycle, which the error says. Without Cleanup (a failed
// restore, a cancel) the same failure stays retryable.
func TestDropVerifyDBCleanupLoginTimeout(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	_, verify := f.copiedSet()
	f.must(f.acts.Restore, verify, nil)

	srv, ok := f.cfg.BackupServer(verify.Server)
	if !ok {
		t.Fatalf("no backup server %s", verify.Server)
	}
	inst, ok := f.cfg.SQLInstance(srv.VerifyInstance)
	if !ok {
		t.Fatalf("no instance %s", srv.VerifyInstance)
	}
	inst.Address, inst.ConnectTimeout = sitetest.SilentServer(t), time.Minute

	verify.Cleanup = true
	began := time.Now()
	err := f.run(f.acts.DropVerifyDB, verify, nil)
	took := time.Since(began)
	t.Logf("drop against a silent instance: %s: %v", took.Round(time.Millisecond), err)
	if took > CleanupConnectTimeout+5*time.Second {
		t.Errorf("the drop took %s, want about CleanupConnectTimeout (%s)", took.Round(time.Millisecond), CleanupConnectTimeout)
	}
	if errorTypeOf(err) != ErrSQLHostUnreachable || !appErrorOf(t, err).NonRetryable() {
		t.Fatalf("drop: %v, want non-retryable SQLHostUnreachable", err)
	}
	if want := "the copy Sales_verify is left on " + srv.VerifyInstance + ": the next cycle replaces it and drops it"; !strings.Contains(err.Error(), want) {
		t.Errorf("drop: %v, want %q", err, want)
	}

	verify.Cleanup = false
	inst.ConnectTimeout = time.Second
	err = f.run(f.acts.DropVerifyDB, verify, nil)
	if errorTypeOf(err) != ErrSQLHostUnreachable || appErrorOf(t, err).NonRetryable() {
		t.Errorf("drop without Cleanup: %v, want retryable SQLHostUnreachable", err)
	}
}
