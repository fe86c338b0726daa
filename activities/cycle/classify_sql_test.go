package cycle

import (
	"strings"
	"testing"

	"github.com/backupcycle/backupcycle/activities"
)

// Failures read by their numbers through the emulator: a share name the
// backup server's host does not have (operating system error 67) is a
// configuration error, not an outage, while a host that does not answer
// (53) is; a CHECKDB that tempdb's space stopped before it checked
// (1105 + 8921) is retryable and proves nothing against the set.
func TestSQLClassifiesShareAndTempdbFailures(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	var seq int64
	f.must(f.acts.AllocateSequence, activities.SequenceInput{Database: "Sales"}, &seq)
	srv, _ := f.cfg.BackupServer("bak01")
	good := srv.UNCPaths
	srv.UNCPaths = []string{`\\bak01\bakup`} // mistyped share on a reachable host
	err := f.run(f.acts.Backup, activities.BackupInput{Database: "Sales", Sequence: seq, Server: "bak01", Stripes: 2}, nil)
	if ae := appErrorOf(t, err); ae.Type() != activities.ErrInvalidConfig || !ae.NonRetryable() || !strings.Contains(err.Error(), "67(") ||
		!strings.Contains(err.Error(), "unc_paths") {
		t.Errorf("mistyped share: %v; want non-retryable InvalidConfig quoting error 67 and naming unc_paths", err)
	}
	srv.UNCPaths = []string{`\\bak09\backup`} // a host that does not answer
	err = f.run(f.acts.Backup, activities.BackupInput{Database: "Sales", Sequence: seq + 1, Server: "bak01", Stripes: 2}, nil)
	if ae := appErrorOf(t, err); ae.Type() != activities.ErrBackupTargetUnreachable || ae.NonRetryable() || !strings.Contains(err.Error(), "53(") {
		t.Errorf("unknown host: %v; want retryable BackupTargetUnreachable quoting error 53", err)
	}
	srv.UNCPaths = good

	_, verify := f.copiedSet()
	f.must(f.acts.Restore, verify, nil)
	f.verify.SetTempdbFull(true)
	err = f.run(f.acts.CheckDB, verify, nil)
	ae := appErrorOf(t, err)
	if ae.Type() != activities.ErrCheckDBCouldNotRun || ae.NonRetryable() || activities.Evidence(ae.Type()) != "" || !strings.Contains(err.Error(), "8921") {
		t.Fatalf("CHECKDB with tempdb full: %v (type %s); want retryable CheckDBCouldNotRun, no evidence, quoting 8921", err, ae.Type())
	}
	f.verify.SetTempdbFull(false)
	f.must(f.acts.CheckDB, verify, nil)
	if got := statements(f.verify, "DBCC CHECKDB"); len(got) != 2 || got[1].Outcome != "ok" {
		t.Errorf("CHECKDB statements %+v; want the stopped one, then one ok", got)
	}
}
