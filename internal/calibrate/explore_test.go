package calibrate

import (
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/backupcycle/backupcycle/internal/plan"
)

// site models a backup server's NIC paths: each path carries pathMBps, each
// file stream at most streamMBps, and nothing beats the data files' read
// speed; buffers and transfer size change nothing.
type site struct {
	paths                      int
	pathMBps, streamMBps, read float64
}

func (s site) rate(p Point) float64 {
	if p.Null {
		return s.read
	}
	var total float64
	for path := range s.paths {
		streams := p.Stripes / s.paths
		if path < p.Stripes%s.paths {
			streams++
		}
		total += min(s.pathMBps, s.streamMBps*float64(streams))
	}
	return min(total, s.read)
}

// run drives an explorer to its end against rate.
func run(t *testing.T, e *Explorer, rate func(Point) float64) []Result {
	t.Helper()
	for range 100 {
		p, _, ok := e.Next()
		if !ok {
			return e.Results()
		}
		e.Record(Result{Point: p, MBps: rate(p), Seconds: 60})
	}
	t.Fatal("the explorer did not end within 100 points")
	return nil
}

func TestMoreStripesOverMorePathsWins(t *testing.T) {
	s := site{paths: 4, pathMBps: 40, streamMBps: 30, read: 500}
	e, err := NewExplorer(DefaultGrid(4), 256<<20, 1, 4)
	if err != nil {
		t.Fatal(err)
	}
	res := run(t, e, s.rate)
	if res[0].Phase != PhaseRead || !res[0].Null {
		t.Fatalf("first point %+v, want the read speed (NUL)", res[0])
	}
	var stripes []int
	for _, r := range res {
		if r.Phase == PhaseStripes {
			stripes = append(stripes, r.Stripes)
		}
	}
	if want := []int{1, 2, 4, 8, 12, 16}; !slices.Equal(stripes, want) {
		t.Errorf("stripe counts run %v, want %v", stripes, want)
	}
	rep := Report{Instance: "sql01", Database: "Sales", Server: "bak01", NICs: 4}
	rep.Finish(e)
	if rep.Best == nil || rep.Best.Stripes != 8 || rep.Best.MBps != 160 {
		t.Fatalf("best %+v, want 8 stripes at 160 MB/s", rep.Best)
	}
	if rep.Proposed.Point != (Point{Stripes: 8}) {
		t.Errorf("proposed %+v, want 8 stripes with SQL Server's buffers (the cheapest within %v%% of the best)", rep.Proposed.Point, Gain*100)
	}
	var cfg struct {
		Databases []struct {
			Name     string `yaml:"name"`
			Instance string `yaml:"instance"`
			Stripes  int    `yaml:"stripes"`
		} `yaml:"databases"`
	}
	if err := yaml.Unmarshal([]byte(rep.Patch), &cfg); err != nil || len(cfg.Databases) != 1 || cfg.Databases[0].Stripes != 8 ||
		cfg.Databases[0].Name != "Sales" || cfg.Databases[0].Instance != "sql01" {
		t.Errorf("patch %q does not read back as 8 stripes for sql01/Sales: %+v %v", rep.Patch, cfg, err)
	}
}

func TestOverBudgetPointsAreSkippedNeverRun(t *testing.T) {
	s := site{paths: 2, pathMBps: 100, streamMBps: 100, read: 1000}
	// 2 stripes x 64 buffers x 4 MiB = 512 MiB: above a 300 MiB budget.
	g := Grid{Stripes: []int{2}, MaxTransferSizes: []int{4 << 20}, BuffersPerStripe: []int{8, 64}}
	e, err := NewExplorer(g, 300<<20, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	// Rising rates keep every phase going until the budget stops it.
	calls := 0
	res := run(t, e, func(p Point) float64 { calls++; return s.rate(p) * float64(calls) })
	for _, r := range res {
		if memory(r.Point, 1) > 300<<20 && !r.Null {
			t.Errorf("ran %s, whose buffers are above the budget", r.Point)
		}
	}
	sk := e.Skipped()
	if len(sk) != 1 || sk[0].BufferCount != 128 || !strings.Contains(sk[0].Reason, "memory_budget") ||
		!strings.Contains(sk[0].Reason, "512 MiB") {
		t.Fatalf("skipped %+v, want BUFFERCOUNT 128 skipped for the memory budget (512 MiB of buffers)", sk)
	}
}

func TestClearlyWorseEndsTheBranch(t *testing.T) {
	g := Grid{Stripes: []int{1, 2, 4, 8, 16}, MaxTransferSizes: []int{1 << 20}, BuffersPerStripe: []int{8}}
	e, err := NewExplorer(g, 0, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	rates := map[int]float64{1: 100, 2: 150, 4: 120, 8: 400, 16: 500} // 4 files clearly worse: 8 and 16 never run
	res := run(t, e, func(p Point) float64 {
		if p.Null {
			return 1000
		}
		return rates[p.Stripes]
	})
	for _, r := range res {
		if r.Stripes >= 8 {
			t.Errorf("ran %s after 4 stripes were clearly worse", r.Point)
		}
	}
	if why := e.Stopped()[PhaseStripes]; !strings.Contains(why, "clearly below") {
		t.Errorf("stripes phase stopped %q, want a 'clearly below' reason", why)
	}
	skipped := 0
	for _, s := range e.Skipped() {
		if s.Phase == PhaseStripes {
			skipped++
		}
	}
	if skipped != 2 {
		t.Errorf("%d stripe counts reported skipped, want 2 (8 and 16)", skipped)
	}
}

func TestFailedPointDoesNotStopThePhase(t *testing.T) {
	g := Grid{Stripes: []int{1, 2, 4}, MaxTransferSizes: []int{1 << 20}, BuffersPerStripe: []int{8}}
	e, _ := NewExplorer(g, 0, 1, 1)
	for {
		p, _, ok := e.Next()
		if !ok {
			break
		}
		r := Result{Point: p, MBps: float64(p.Stripes) * 100}
		if p.Stripes == 2 && !p.Null {
			r = Result{Point: p, Failed: "BackupFailed: OS error 64"}
		}
		e.Record(r)
	}
	best, ok := e.Best()
	if !ok || best.Stripes != 4 {
		t.Errorf("best %+v, want 4 stripes run after 2 failed", best)
	}
}

func TestExplorerIsDeterministic(t *testing.T) {
	s := site{paths: 4, pathMBps: 40, streamMBps: 30, read: 120}
	var runs [2][]Result
	for i := range runs {
		e, _ := NewExplorer(DefaultGrid(4), 1<<30, 2, 4)
		runs[i] = run(t, e, s.rate)
	}
	if !slices.Equal(runs[0], runs[1]) {
		t.Errorf("two runs on the same results differ:\n%v\n%v", runs[0], runs[1])
	}
}

func TestReadBoundIsNoted(t *testing.T) {
	s := site{paths: 4, pathMBps: 400, streamMBps: 300, read: 250}
	e, _ := NewExplorer(DefaultGrid(4), 0, 1, 4)
	run(t, e, s.rate)
	rep := Report{Database: "Sales", NICs: 4}
	rep.Finish(e)
	if rep.ReadMBps != 250 || len(rep.Notes) == 0 || !strings.Contains(rep.Notes[0], "read-bound") {
		t.Errorf("read %v notes %q, want a read-bound note at 250 MB/s", rep.ReadMBps, rep.Notes)
	}
}

func TestGridCheck(t *testing.T) {
	for _, c := range []struct {
		g    Grid
		nics int
		want string
	}{
		{Grid{}, 1, "no stripe counts"},
		{Grid{Stripes: []int{65}}, 1, "out of range"},
		{Grid{Stripes: []int{1, 2}}, 4, "multiple of the backup server's 4 NIC paths"},
		{Grid{Stripes: []int{4}, MaxTransferSizes: []int{1000}}, 4, "multiple of 65536"},
		{Grid{Stripes: []int{4}, BuffersPerStripe: []int{0}}, 4, "at least 1"},
	} {
		err := c.g.Check(c.nics)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Check(%+v, %d) = %v, want %q", c.g, c.nics, err, c.want)
		}
	}
	if err := DefaultGrid(3).Check(3); err != nil {
		t.Errorf("default grid for 3 NICs: %v", err)
	}
	if g := DefaultGrid(3); !slices.Equal(g.Stripes, []int{1, 2, 3, 4, 6, 8, 9, 12}) {
		t.Errorf("default stripes for 3 NICs %v", g.Stripes)
	}
}

func TestPatchQuotesHostileNames(t *testing.T) {
	name := "Sales \"EU\"\\ 'x': #1\n"
	got := patch("sql:01", name, Point{Stripes: 4, MaxTransferSize: 4 << 20, BufferCount: 64})
	var cfg struct {
		Databases []map[string]any `yaml:"databases"`
	}
	if err := yaml.Unmarshal([]byte(got), &cfg); err != nil {
		t.Fatalf("patch %q: %v", got, err)
	}
	d := cfg.Databases[0]
	if d["name"] != name || d["instance"] != "sql:01" || d["max_transfer_size"] != "4MiB" || d["buffer_count"] != 64 {
		t.Errorf("patch reads back as %v", d)
	}
}

func TestShortBackupsAreFlagged(t *testing.T) {
	e, _ := NewExplorer(Grid{Stripes: []int{1, 2}}, 0, 1, 1)
	for {
		p, _, ok := e.Next()
		if !ok {
			break
		}
		e.Record(Result{Point: p, MBps: 50 * float64(p.Stripes), Seconds: 0.2})
	}
	rep := Report{Database: "Tiny", NICs: 1}
	rep.Finish(e)
	if len(rep.Notes) == 0 || !strings.Contains(rep.Notes[0], "too short to measure reliably") {
		t.Errorf("notes %q, want the figures flagged as too short", rep.Notes)
	}
}

func TestThroughputForThePlan(t *testing.T) {
	s := site{paths: 2, pathMBps: 100, streamMBps: 60, read: 1000}
	e, _ := NewExplorer(Grid{Stripes: []int{1, 2, 4}}, 0, 1, 2)
	run(t, e, s.rate)
	rep := Report{Database: "Sales", NICs: 2, Compression: true, Finished: time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)}
	rep.Finish(e)
	tp := rep.Throughput()
	if !tp.Backup.Measured() || tp.Backup.Source != plan.SourceCalibration || tp.Backup.MBps != rep.Proposed.MBps ||
		tp.Backup.Settings.Stripes != rep.Proposed.Stripes || tp.Backup.Settings.NICPaths != 2 || !tp.Backup.Settings.Compression ||
		!tp.Backup.At.Equal(rep.Finished) || tp.Copy.Measured() {
		t.Errorf("throughput %+v from proposed %+v", tp, rep.Proposed)
	}
	rep.Proposed.Seconds = 1
	if rep.Throughput().Any() {
		t.Error("a one-second backup became a measurement for the plan")
	}
}
