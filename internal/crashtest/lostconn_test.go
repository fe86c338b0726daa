package crashtest

import (
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
)

// A network failure between the worker and the source instance in the
// middle of a BACKUP closes the worker's connections; SQL Server notices a
// vanished client only when it next writes to it, so the BACKUP (sent
// without STATS) runs on. The worker must find it on the instance and wait
// for it, not take it for a lost host: one BACKUP statement executed, the
// set of the first sequence number verified, no set marked failed.
func TestConnectionDroppedDuringBackup(t *testing.T) {
	t.Parallel()
	srv := sharedTemporal(t)
	c := dial(t, srv)
	s := newSite(t, "Sales", 2*dbSize, "")
	s.src.SetThrottle(2 << 20) // ~24 s of BACKUP
	s.inProcessWorker(c)

	run := s.start(c, s.tq+"-lostconn")
	var seq int64
	until(t, "the cycle to be in BACKUP", 3*time.Minute, func() bool {
		p, err := progress(c, run)
		seq = p.Sequence
		return err == nil && p.Step == activities.StepBackup && p.Percent >= 10 && running(s.src, "BACKUP DATABASE")
	})
	s.src.DropConnections() // a network blip: every connection to the source closed
	res, err := wait(t, run, 5*time.Minute)
	if err != nil {
		t.Fatalf("cycle after the lost connection: %v", err)
	}
	if got := outcomes(s.src, "BACKUP DATABASE"); len(got) != 1 || got[0] != "ok" {
		t.Errorf("BACKUP statements on the source: %v; want exactly one, ok", got)
	}
	if res.Sequence != seq || len(res.Failed) != 0 {
		t.Errorf("cycle verified seq %d, failed %v; want seq %d (the BACKUP that outlived its connection) and no failed set",
			res.Sequence, res.Failed, seq)
	}
	if m := s.manifest(res.Server, res.Sequence); m == nil || m.State != catalog.StateVerified {
		t.Errorf("set %d on %s: %+v, want verified", res.Sequence, res.Server, m)
	}
	runs := history(t, c, run)
	if runs.completed["MarkFailed"] != 0 {
		t.Errorf("MarkFailed ran %d times: a lost connection proves nothing against the set", runs.completed["MarkFailed"])
	}
	t.Logf("backup attempts started %d, failed %d", runs.started["Backup"], runs.failed["Backup"])
}
