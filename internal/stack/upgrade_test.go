//go:build stack

package stack_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	sdkclient "go.temporal.io/sdk/client"

	"github.com/backupcycle/backupcycle/internal/devenv"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
	"github.com/backupcycle/backupcycle/internal/stack"
	"github.com/backupcycle/backupcycle/workflows"
)

// upgradeChange is workflows.UpgradeTestChange, which only the -tags
// upgradetest build has.
const upgradeChange = "upgrade-test-step"

// A fleet runs on the stack while both workers are replaced, one at a time,
// by a build that changes the cycle behind workflow.GetVersion, each after
// `worker --replay-open` of the new build approved the open workflows:
// every database ends verified, no workflow task fails (a history the new
// build cannot replay would), no BACKUP, RESTORE or CHECKDB runs twice, a
// cycle in flight across the swap is finished by the new build, and exactly
// the cycles whose workflow task past the copy ran on the new build took the
// new path (its marker); a cycle started afterwards takes it too.
func TestStackRollingUpgrade(t *testing.T) {
	bin := t.TempDir()
	oldWorker := build(t, bin, "./worker")
	newWorker := buildTags(t, filepath.Join(bin, "new"), "./worker", "upgradetest")
	starter := build(t, bin, "./starter")
	tools := temporalTools(t)
	state := t.TempDir()
	t.Cleanup(func() { removeOutside(state) })

	ctx, cancel := context.WithCancel(context.Background())
	upgrades := make(chan stack.Upgrade)
	ready := make(chan stack.Addresses, 1)
	// The stack's progress, written by its goroutine.
	progressFile, err := os.Create(filepath.Join(bin, "progress"))
	if err != nil {
		t.Fatal(err)
	}
	defer progressFile.Close()
	progress := func() string {
		b, _ := os.ReadFile(progressFile.Name())
		return string(b)
	}
	ran := make(chan error, 1)
	began := time.Now()
	go func() {
		ran <- stack.Run(ctx, stack.Options{StateDir: state, Repo: repo, Tools: tools, Worker: oldWorker,
			DatabaseSize: 64 << 20, FleetDatabases: 6, Upgrades: upgrades, Progress: progressFile},
			func(a stack.Addresses, _ time.Duration) { ready <- a })
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-ran; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("the stack: %v", err)
		}
	})
	var a stack.Addresses
	select {
	case a = <-ready:
	case err := <-ran:
		t.Fatalf("the stack did not come up: %v\n%s", err, progress())
	case <-time.After(5 * time.Minute):
		t.Fatalf("the stack was not up after 5 minutes:\n%s", progress())
	}
	t.Logf("stack up in %s", time.Since(began).Round(time.Second))
	// Until the workers are replaced, Sales's BACKUP takes minutes and the
	// small databases' cycles some seconds each beside it: the workers are
	// replaced once two of those are verified, in the middle of Sales's
	// BACKUP.
	a.Site.Source.SetThrottle(64 << 10)

	fleetBegan := time.Now()
	fleetOut := make(chan []byte, 1)
	go func() {
		out, err := exec.Command(starter, "--config", a.ConfigFile, "fleet", "--wait", "--json").Output()
		if err != nil {
			out = append(out, []byte("\nstarter fleet --wait: "+err.Error())...)
		}
		fleetOut <- out
	}()
	until(t, "two cycles past DBCC CHECKDB", 3*time.Minute, func() bool { return ended(a.Site.Verify, "DBCC CHECKDB") >= 2 })
	if !runningKind(a.Site.Source, "BACKUP DATABASE") {
		t.Fatalf("no BACKUP runs on %s when the upgrade begins: the upgrade would not fall within a running step", devenv.SourceInstance)
	}
	upgradeBegan := time.Now()
	result := make(chan error, 1)
	upgrades <- stack.Upgrade{Worker: newWorker, Result: result}
	select {
	case err := <-result:
		if err != nil {
			t.Fatalf("the rolling upgrade: %v\n%s", err, progress())
		}
	case <-time.After(5 * time.Minute):
		t.Fatalf("the rolling upgrade did not end within 5 minutes:\n%s", progress())
	}
	a.Site.Source.SetThrottle(0)
	t.Logf("both workers replaced in %s, %s after the fleet began:\n%s", time.Since(upgradeBegan).Round(time.Second),
		upgradeBegan.Sub(fleetBegan).Round(time.Second), progress())

	var fleet struct {
		Outcomes []struct {
			Database   string `json:"database"`
			Outcome    string `json:"outcome"`
			WorkflowID string `json:"workflow_id"`
			Reason     string `json:"reason"`
		}
	}
	var out []byte
	select {
	case out = <-fleetOut:
	case <-time.After(10 * time.Minute):
		t.Fatal("the fleet did not end within 10 minutes")
	}
	t.Logf("fleet run: %s", time.Since(fleetBegan).Round(time.Second))
	if err := json.Unmarshal(out, &fleet); err != nil || len(fleet.Outcomes) != 7 {
		t.Fatalf("starter fleet --wait --json: %v, %d outcomes; want 7:\n%s", err, len(fleet.Outcomes), out)
	}
	for _, o := range fleet.Outcomes {
		if o.Outcome != workflows.OutcomeVerified {
			t.Errorf("%s: %s (%s), want verified", o.Database, o.Outcome, o.Reason)
		}
	}
	// Nothing ran twice: one BACKUP per database on the source, one
	// RESTORE and one CHECKDB per database on the verification instance,
	// each successful.
	for _, on := range []struct {
		name  string
		in    *sqlsim.Instance
		kinds []string
	}{{devenv.SourceInstance, a.Site.Source, []string{"BACKUP DATABASE"}}, {devenv.VerifyInstance, a.Site.Verify, []string{"RESTORE DATABASE", "DBCC CHECKDB"}}} {
		for _, kind := range on.kinds {
			per := map[string][]string{}
			for _, s := range on.in.Statements() {
				if s.Kind == kind {
					per[s.Database] = append(per[s.Database], s.Outcome)
				}
			}
			if len(per) != len(fleet.Outcomes) {
				t.Errorf("%s on %s for %d databases, want %d: %v", kind, on.name, len(per), len(fleet.Outcomes), per)
			}
			for db, outcomes := range per {
				if len(outcomes) != 1 || outcomes[0] != "ok" {
					t.Errorf("%s of %s on %s: %v, want one, successful", kind, db, on.name, outcomes)
				}
			}
		}
	}

	c, err := sdkclient.Dial(sdkclient.Options{HostPort: a.Frontend, Namespace: stack.Namespace, Logger: quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The build that started the fleet is the old one: the identity of
	// the worker that completed the fleet's first workflow task.
	oldIdentity := ""
	for _, e := range events(t, c, workflows.FleetWorkflowID) {
		if e.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			oldIdentity = e.GetWorkflowTaskCompletedEventAttributes().GetIdentity()
			break
		}
	}
	if oldIdentity == "" {
		t.Fatal("the fleet's history has no completed workflow task")
	}
	newPath, across := 0, 0
	var retried []string
	for _, o := range fleet.Outcomes {
		h := readCycle(t, c, o.WorkflowID)
		if h.failedTasks > 0 {
			t.Errorf("%s: %d workflow tasks failed (a history the new build does not replay?)", o.WorkflowID, h.failedTasks)
		}
		if len(h.timedOut) > 0 {
			t.Errorf("%s: %v retried only after a timeout: a stopped worker did not report the attempt it ended", o.WorkflowID, h.timedOut)
		}
		if h.afterCopy == "" {
			t.Errorf("%s: no workflow task after its copy", o.WorkflowID)
			continue
		}
		if want := h.afterCopy != oldIdentity; h.marker != want {
			t.Errorf("%s: the workflow task past the copy ran on %s (old build %s); the new path's marker %s: %t, want %t",
				o.WorkflowID, h.afterCopy, oldIdentity, upgradeChange, h.marker, want)
		}
		if h.marker {
			newPath++
		}
		for _, r := range h.retried {
			retried = append(retried, o.Database+" "+r)
		}
		if h.identities[oldIdentity] && len(h.identities) > 1 {
			across++
		}
	}
	t.Logf("%d of %d cycles took the new path, %d ran on both builds; activities retried: %v", newPath, len(fleet.Outcomes), across, retried)
	// Sales's BACKUP ran across the first worker's replacement: its
	// attempt ended there, and the next one, on the new worker,
	// re-attached to the statement (the single BACKUP above).
	if !slices.Contains(retried, devenv.Database+" Backup") {
		t.Errorf("the BACKUP of %s was not retried: the first worker was not replaced while it ran (retried: %v)", devenv.Database, retried)
	}
	if across == 0 || newPath == 0 || newPath == len(fleet.Outcomes) {
		t.Errorf("%d cycles ran on both builds, %d of %d took the new path: want at least one on both and cycles on either path (the upgrade began %s after the fleet)",
			across, newPath, len(fleet.Outcomes), upgradeBegan.Sub(fleetBegan).Round(time.Second))
	}

	// A cycle started after the upgrade runs the new build from its start.
	cycle, err := exec.Command(starter, "--config", a.ConfigFile, "run", "--database", devenv.Database, "--wait").CombinedOutput()
	if err != nil || !bytes.Contains(cycle, []byte("VERIFIED "+devenv.Database+" sequence 2")) {
		t.Fatalf("starter run --database %s --wait after the upgrade: %v\n%s", devenv.Database, err, cycle)
	}
	if h := readCycle(t, c, workflows.CycleWorkflowID(devenv.SourceInstance, devenv.Database)); !h.marker || h.identities[oldIdentity] || h.failedTasks > 0 {
		t.Errorf("the cycle of %s started after the upgrade: marker %t, ran on the old build %t, %d workflow tasks failed; want the new build only",
			devenv.Database, h.marker, h.identities[oldIdentity], h.failedTasks)
	}
	// And the new build still takes over every open workflow.
	replay, err := exec.Command(newWorker, "--config", a.ConfigFile, "--replay-open").CombinedOutput()
	if err != nil {
		t.Errorf("worker --replay-open of the new build after the upgrade: %v\n%s", err, replay)
	}
}

// cycleHistory is what the test reads from a cycle's history.
type cycleHistory struct {
	identities  map[string]bool // of the workers that completed its workflow tasks
	afterCopy   string          // the identity that completed the workflow task after CopyToRemote
	marker      bool            // the version marker of upgradeChange
	failedTasks int
	// timedOut are the activities an attempt of which ended by its
	// heartbeat timeout: the worker that ran it did not report it.
	timedOut []string
	// retried are the activities whose last attempt was not their first.
	retried []string
}

func readCycle(t *testing.T, c sdkclient.Client, id string) cycleHistory {
	t.Helper()
	h := cycleHistory{identities: map[string]bool{}}
	copies := map[int64]bool{}  // scheduled event ids of CopyToRemote
	types := map[int64]string{} // activity types by scheduled event id
	copied := false
	for _, e := range events(t, c, id) {
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			who := e.GetWorkflowTaskCompletedEventAttributes().GetIdentity()
			h.identities[who] = true
			if copied && h.afterCopy == "" {
				h.afterCopy = who
			}
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED:
			h.failedTasks++
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			name := e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()
			types[e.GetEventId()] = name
			if name == "CopyToRemote" {
				copies[e.GetEventId()] = true
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			// An attempt's start records the failure of the one before.
			a := e.GetActivityTaskStartedEventAttributes()
			if a.GetLastFailure().GetTimeoutFailureInfo() != nil {
				h.timedOut = append(h.timedOut, types[a.GetScheduledEventId()])
			}
			if a.GetAttempt() > 1 {
				h.retried = append(h.retried, types[a.GetScheduledEventId()])
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			copied = copied || copies[e.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()]
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			for _, p := range e.GetMarkerRecordedEventAttributes().GetDetails() {
				for _, d := range p.GetPayloads() {
					h.marker = h.marker || bytes.Contains(d.GetData(), []byte(upgradeChange))
				}
			}
		}
	}
	return h
}

func events(t *testing.T, c sdkclient.Client, id string) []*historypb.HistoryEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out []*historypb.HistoryEvent
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatalf("history of %s: %v", id, err)
		}
		out = append(out, e)
	}
	return out
}

func runningKind(in *sqlsim.Instance, kind string) bool {
	for _, s := range in.Statements() {
		if s.Kind == kind && s.Outcome == "running" {
			return true
		}
	}
	return false
}

// ended is how many statements of kind ended successfully on in.
func ended(in *sqlsim.Instance, kind string) int {
	n := 0
	for _, s := range in.Statements() {
		if s.Kind == kind && s.Outcome == "ok" {
			n++
		}
	}
	return n
}

func until(t *testing.T, what string, timeout time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %s", what, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type quiet struct{}

func (quiet) Debug(string, ...any) {}
func (quiet) Info(string, ...any)  {}
func (quiet) Warn(string, ...any)  {}
func (quiet) Error(string, ...any) {}
