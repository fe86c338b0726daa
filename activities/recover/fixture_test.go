package recover

import (
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"testing"
	"time"

	_ "github.com/microsoft/go-mssqldb"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/activities/cycle"
	"github.com/backupcycle/backupcycle/activities/logs"
	"github.com/backupcycle/backupcycle/internal/sitetest"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
)

// The recover's activities against the emulated site: the source sql01
// with Sales and its commit-time workload, the remote site's instance
// verify01 (the target here), bak01 and bak02; the verified full taken by
// the cycle's own activities, the log backups by the log chain's, all over
// real TDS and the backup servers' directories.

type fixture struct {
	t    *testing.T
	site *sitetest.Site
	base *activities.Activities
	env  *testsuite.TestActivityEnvironment
	// keep leaves the cycle's verification copy in place (its files in
	// the restore directory tell that volume's free space).
	keep bool
}

func newFixture(t *testing.T, o sitetest.Options) *fixture {
	t.Helper()
	o.Database, o.CommitLog, o.ManifestKeys = "Sales", true, []string{"k1"}
	o.Extra = "    owns_backup_chain: true\n    log_backup: {every: 1m}\n" + o.Extra
	site := sitetest.New(t, o)
	base := activities.New(nil)
	base.Cycle = activities.CycleDeps{Config: site.Config, Poll: 20 * time.Millisecond}
	var ts testsuite.WorkflowTestSuite
	ts.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := ts.NewTestActivityEnvironment()
	env.RegisterActivity(cycle.New(base))
	env.RegisterActivity(logs.New(base))
	env.RegisterActivity(New(base))
	return &fixture{t: t, site: site, base: base, env: env}
}

func (f *fixture) run(fn, in, out any) error {
	f.t.Helper()
	v, err := f.env.ExecuteActivity(fn, in)
	if err == nil && out != nil && v != nil && v.HasValue() {
		if err := v.Get(out); err != nil {
			f.t.Fatal(err)
		}
	}
	return err
}

func (f *fixture) must(fn, in, out any) {
	f.t.Helper()
	if err := f.run(fn, in, out); err != nil {
		f.t.Fatalf("%T: %v", in, err)
	}
}

// verified takes a full backup of Sales and verifies it as a cycle does:
// backed up to the rotation's server, copied, restored, CHECKDB, sanity,
// marked verified, the copy dropped (unless keep).
func (f *fixture) verified() int64 { return f.cycle(false) }

// cycle is verified, of a differential on the newest verified full with
// differential (the database needs diff_backup).
func (f *fixture) cycle(differential bool) int64 {
	f.t.Helper()
	a := cycle.New(f.base)
	var p activities.Plan
	f.must(a.PlanCycle, activities.PlanInput{Database: "Sales", Differential: differential}, &p)
	if differential && p.NoDifferentialBase != "" {
		f.t.Fatalf("no differential planned: %s", p.NoDifferentialBase)
	}
	var seq int64
	f.must(a.AllocateSequence, activities.SequenceInput{Database: "Sales", Instance: p.Instance}, &seq)
	var b activities.BackupOutput
	f.must(a.Backup, activities.BackupInput{Database: "Sales", Instance: p.Instance, Sequence: seq, Server: p.Rotation[0], Stripes: p.Stripes,
		Mode: p.RunMode()}, &b)
	f.must(a.WriteManifest, activities.ManifestInput{Database: "Sales", Instance: p.Instance, Sequence: seq, Server: p.Rotation[0], Backup: b}, nil)
	f.must(a.CopyToRemote, activities.CopyInput{Database: "Sales", Instance: p.Instance, Sequence: seq, From: p.Rotation[0], To: p.Remote}, nil)
	v := activities.VerifyInput{Database: "Sales", Instance: p.Instance, Sequence: seq, Server: p.Remote, SourceUTCOffsetMinutes: p.Source.UTCOffsetMinutes}
	f.must(a.Restore, v, nil)
	f.must(a.CheckDB, v, nil)
	f.must(a.SanityChecks, v, nil)
	f.must(a.MarkVerified, activities.MarkInput{Database: "Sales", Instance: p.Instance, Sequence: seq, Servers: []string{p.Rotation[0], p.Remote}}, nil)
	if !f.keep {
		f.must(a.DropVerifyDB, v, nil)
	}
	return seq
}

// commit commits n transactions of the workload on the source.
func (f *fixture) commit(n int) {
	f.t.Helper()
	for range n {
		if err := f.site.Source.CommitNow("Sales"); err != nil {
			f.t.Fatal(err)
		}
	}
}

// logAndCopy takes one log backup and copies it to the remote site.
func (f *fixture) logAndCopy() logs.BackupLogOutput {
	f.t.Helper()
	var out logs.BackupLogOutput
	if err := f.run(logs.New(nil).BackupLog, logs.BackupLogInput{Database: "Sales", Instance: "sql01"}, &out); err != nil || out.Number == 0 {
		f.t.Fatalf("BackupLog: %+v, %v", out, err)
	}
	f.must(logs.New(nil).CopyLogs, logs.CopyLogsInput{Database: "Sales", Instance: "sql01", Chain: out.Chain}, nil)
	return out
}

// history is a full and n log backups, each after a few commits spread
// over time (so that points between them split the rows).
func (f *fixture) history(n int) []logs.BackupLogOutput {
	f.t.Helper()
	f.commit(10)
	f.verified()
	var out []logs.BackupLogOutput
	for range n {
		for range 3 {
			f.commit(1)
			time.Sleep(150 * time.Millisecond)
		}
		out = append(out, f.logAndCopy())
	}
	return out
}

// primaryGone takes bak01 away: its directory renamed, and its UNC path
// unreachable from the target, as when the primary site burnt down.
func (f *fixture) primaryGone() {
	f.t.Helper()
	dir := f.site.Dirs["bak01"]
	if err := os.Rename(dir, dir+".gone"); err != nil {
		f.t.Fatal(err)
	}
	f.site.Verify.SetShareUnreachable(sitetest.UNC("bak01"), true)
}

func master(t *testing.T, in *sqlsim.Instance) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlserver", in.DSN("sa", sitetest.Password, "master"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// rows are the ids of dbo.CommitLog in database name, in order, and with
// at: only those committed at or before it (the source's wall clock).
func rows(t *testing.T, in *sqlsim.Instance, name string, at time.Time) []int64 {
	t.Helper()
	r, err := master(t, in).Query(fmt.Sprintf("SELECT id, committed_at FROM [%s].dbo.CommitLog", name))
	if err != nil {
		t.Fatalf("read %s.dbo.CommitLog: %v", name, err)
	}
	defer r.Close()
	var out []int64
	for r.Next() {
		var id int64
		var c time.Time
		if err := r.Scan(&id, &c); err != nil {
			t.Fatal(err)
		}
		if at.IsZero() || !c.After(at) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// restoredLogs are the backup set GUIDs msdb on in says were restored into
// name as logs, in order.
func restoredLogGUIDs(t *testing.T, in *sqlsim.Instance, name string) []string {
	t.Helper()
	r, err := master(t, in).Query("SELECT bs.backup_set_uuid FROM msdb.dbo.restorehistory AS rh JOIN msdb.dbo.backupset AS bs "+
		"ON bs.backup_set_id = rh.backup_set_id WHERE rh.destination_database_name = @p1 AND rh.restore_type = 'L' ORDER BY rh.restore_history_id", name)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []string
	for r.Next() {
		var g []byte
		if err := r.Scan(&g); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%x", g))
	}
	return out
}

func errType(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Type()
	}
	return ""
}

// recover runs the workflow's steps by hand: the plan, the full, each log
// (stopping where STOPAT was reached), the finish.
func (f *fixture) recover(in Request) (Plan, FinishOutput, []StepOutput) {
	f.t.Helper()
	return f.recoverFrom(PlanInput{Request: in})
}

// recoverFrom is recover with the plan's whole input (a tail taken).
func (f *fixture) recoverFrom(pin PlanInput) (Plan, FinishOutput, []StepOutput) {
	f.t.Helper()
	in := pin.Request
	var p Plan
	f.must(New(nil).PlanRecover, pin, &p)
	t := Target{Database: p.Database, Instance: p.Instance, To: p.Target, Name: p.Name, AsGiven: in.As != "", Replace: in.Replace}
	var full StepOutput
	f.must(New(nil).RestoreFull, RestoreFullInput{Target: t, Step: p.Restore.Full(), Moves: p.Moves, BufferCount: p.BufferCount,
		MaxTransferSize: p.MaxTransferSize, Intent: p.Intent}, &full)
	outs := []StepOutput{full}
	logsOf := p.Restore.Logs()
	for i, l := range logsOf {
		var o StepOutput
		f.must(New(nil).RestoreLog, RestoreLogInput{Target: t, Step: l, Index: i + 1, Count: len(logsOf), StopAt: p.Restore.StopAt,
			StopAtOffsetMinutes: p.Restore.StopAtOffsetMinutes, Copy: full.Copy}, &o)
		outs = append(outs, o)
		if o.Reached {
			break
		}
	}
	var fin FinishOutput
	f.must(New(nil).FinishRecover, FinishInput{Target: t, Copy: full.Copy, NoRecovery: in.NoRecovery}, &fin)
	return p, fin, outs
}

// crashAndBack arms a crash of the target when its next op reaches
// percent and starts it again at once once it is down (within the step's
// wait for its lost connection); the channel says how the start went.
func crashAndBack(t *testing.T, v *sqlsim.Instance, op string, percent float64) <-chan error {
	t.Helper()
	if err := v.CrashAt(op, percent); err != nil {
		t.Fatal(err)
	}
	addr := v.Addr()
	back := make(chan error, 1)
	go func() {
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
			if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
				c.Close()
				continue
			}
			back <- v.Start()
			return
		}
		back <- nil
	}()
	return back
}
