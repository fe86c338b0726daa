package crashtest

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/sambatest"
	"github.com/backupcycle/backupcycle/internal/sitetest"
	"github.com/backupcycle/backupcycle/workflows"
)

// Crash table: the remote backup server dies during the copy and does not
// come back within copy_deadline. The cycle fails with
// CopyDeadlineExceeded naming the server; the set stays `written` on the
// primary (intact, not failed, not copied) and the earlier set is untouched.
func TestRemoteServerLostPastCopyDeadline(t *testing.T) {
	smb1, _, both := onTwoSambas(t)
	s := newSite(t, "Sales", 8<<20, "    copy_deadline: 20s\n", bandwidth("1MiB"), both)
	srv := sharedTemporal(t)
	c := dial(t, srv)
	s.inProcessWorker(c)

	good, err := wait(t, s.start(c, s.tq+"-good"), 3*time.Minute)
	if err != nil {
		t.Fatalf("clean cycle: %v", err)
	}
	if good.Server != "bak01" || good.Remote != "bak02" {
		t.Fatalf("clean cycle went %s->%s, want bak01->bak02", good.Server, good.Remote)
	}
	before, counts := s.hashes(), s.counts()

	// The second cycle copies bak02 -> bak01: kill bak01's smbd for good
	// once the copy is under way.
	start := time.Now()
	run := s.start(c, s.tq+"-lost")
	var killed sync.Once
	var killedAt time.Time
	until(t, "the copy to be under way", 3*time.Minute, func() bool {
		p, err := progress(c, run)
		if err == nil && p.Step == activities.StepCopy && p.Percent >= 20 {
			killed.Do(func() { smb1.Kill(); killedAt = time.Now() })
			return true
		}
		return false
	})
	_, err = wait(t, run, 3*time.Minute)
	took := time.Since(start)
	if errorType(err) != activities.ErrCopyDeadlineExceeded || !strings.Contains(err.Error(), "bak01") ||
		!strings.Contains(err.Error(), "stays written on bak02") {
		t.Fatalf("cycle with the remote server gone: %v, want CopyDeadlineExceeded naming bak01 and the set kept on bak02", err)
	}
	seq := good.Sequence + 1
	if m := s.manifest("bak02", seq); m == nil || m.State != catalog.StateWritten {
		t.Errorf("seq %d on the primary bak02: %+v, want written (intact, not failed)", seq, m)
	}
	if m := s.manifest("bak01", seq); m != nil {
		t.Errorf("seq %d has a manifest on the lost remote bak01 (%s): the manifest is copied last, after every stripe", seq, m.State)
	}
	if bad := unchanged(before, s.hashes()); len(bad) > 0 {
		t.Errorf("files of the earlier verified set changed: %v", bad)
	}
	runs := history(t, c, run)
	record(t, runs.events, "remote_lost_copy_deadline")
	if runs.completed["Backup"] != 1 || runs.completed["CopyToRemote"] != 0 || runs.started["Restore"] != 0 ||
		runs.started["MarkFailed"] != 0 || runs.started["CopyToRemote"] < 2 {
		t.Errorf("activities: attempts %v, completions %v; want one backup, copy retried until the deadline, no restore, nothing marked failed",
			runs.started, runs.completed)
	}
	if got := s.since(counts, "BACKUP DATABASE"); len(got) != 1 || got[0] != "ok" {
		t.Errorf("BACKUP in the failed cycle: %v, want one", got)
	}
	if got := s.since(counts, "RESTORE DATABASE"); len(got) != 0 {
		t.Errorf("RESTORE in the failed cycle: %v, want none", got)
	}
	if p, _ := progress(c, run); p.Outcome != workflows.OutcomeFailed || len(p.Failed) != 0 {
		t.Errorf("progress %+v, want failed with no set marked failed", p)
	}
	t.Logf("RECOVERY | remote server lost past copy_deadline 20s | CopyDeadlineExceeded | seq %d written on bak02 | failed %.1fs after the kill (cycle %.1fs) | -",
		seq, start.Add(took).Sub(killedAt).Seconds(), took.Seconds())
}

// Bad input: the remote backup server's share has no room for the copy
// (Samba `max disk size`): ShareFull before a byte is sent, nothing on the
// remote counts as good, and the set stays written on the primary.
func TestBadInputRemoteShareFull(t *testing.T) {
	smb := sambatest.Start(t, sambatest.Options{MaxDiskSizeMiB: 1})
	s := newSite(t, "Sales", smallDB, "", onSamba(map[string]*sambatest.Server{"bak02": smb}))
	runBad(t, s, false, nil, activities.ErrShareFull, "bak02", "no space left", "free space on the share")
	// A full remote share says nothing about the set: it stays written (and
	// intact) on the primary, for a resume once there is room.
	if m := s.manifest("bak01", 1); m == nil || m.State != catalog.StateWritten || m.Failure != nil {
		t.Errorf("seq 1 on the primary: %+v, want written, not failed", m)
	}
}

// A drill whose instance loses its way to the backup servers' shares (the
// worker still reads them over SMB, Samba) for 100 s from its start: its
// Recover waits for them (its plan reads the full's file list through
// them), the Recover's status naming the server, and resumes within
// seconds of their return, not after a backoff grown to minutes; the
// drill passes.
func TestDrillResumesSoonAfterTheSharesReturn(t *testing.T) {
	_, _, both := onTwoSambas(t)
	s := newSite(t, "Sales", 4<<20, "", both)
	srv := sharedTemporal(t)
	c := dial(t, srv)
	s.inProcessWorker(c)
	if _, err := wait(t, s.start(c, "full"), 3*time.Minute); err != nil {
		t.Fatalf("the verified full: %v", err)
	}
	away := func(on bool) {
		for _, srv := range sitetest.Servers {
			s.verify.SetShareUnreachable(sitetest.UNC(srv), on)
		}
	}
	restored := func() int {
		return len(slices.DeleteFunc(outcomes(s.verify, "RESTORE DATABASE"), func(o string) bool { return o != "ok" }))
	}
	before := restored() // the cycle's verification
	away(true)
	in := workflows.DrillInput{Database: "Sales", Instance: s.inst, ToInstance: sitetest.VerifyInstance, Latest: true}
	run, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: workflows.DrillWorkflowID(s.inst, "Sales"), TaskQueue: s.tq},
		workflows.DrillName, in)
	if err != nil {
		t.Fatal(err)
	}
	rid := workflows.RecoverWorkflowID(sitetest.VerifyInstance, "Sales_drill")
	var mu sync.Mutex
	var waiting string
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			if v, err := c.QueryWorkflow(ctx, rid, "", workflows.RecoverQuery); err == nil {
				var st workflows.RecoverStatus
				if v.Get(&st) == nil && st.Waiting != "" {
					mu.Lock()
					waiting = st.Waiting
					mu.Unlock()
				}
			}
			time.Sleep(time.Second)
		}
	}()
	time.Sleep(100 * time.Second)
	away(false)
	healed := time.Now()
	until(t, "the drill's full restored", 4*time.Minute, func() bool {
		return restored() > before
	})
	resumed := time.Since(healed)
	res, err := waitFor[workflows.DrillStatus](t, run, 3*time.Minute)
	if err != nil || res.Result.Outcome != "passed" {
		t.Fatalf("drill after the shares returned: %v (%+v)", err, res.Result)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(waiting, "bak0") {
		t.Errorf("the Recover's status while the shares were away said waiting %q, want the server it waits for", waiting)
	}
	if resumed > 30*time.Second {
		t.Errorf("the full was restored %.1fs after the shares returned, want within 30s", resumed.Seconds())
	}
	t.Logf("RECOVERY | drill instance without its shares for 100s | full restored %.1fs after their return | waiting: %s", resumed.Seconds(), waiting)
}
