// Package calibrate measures what BACKUP settings a database's site can
// sustain, as seeds 001 and 004 of the case study ask: the read speed of the
// data files (a backup to NUL), then the backup to the real targets over
// stripe counts spread across the NIC paths, MAXTRANSFERSIZE and BUFFERCOUNT,
// within the memory the instance may give to backup buffers. The package is
// pure: an Explorer proposes the next point from the results so far (the
// Calibrate workflow runs it and replays it deterministically), a Report
// picks the setting to propose and draws the chart.
package calibrate

import (
	"fmt"
	"slices"

	"github.com/backupcycle/backupcycle/internal/plan"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// Phases of a calibration, in the order they run.
const (
	PhaseRead         = "read"              // BACKUP TO DISK = 'NUL': how fast SQL Server reads the data files
	PhaseStripes      = "stripes"           // files spread over the NIC paths, SQL Server's buffer defaults
	PhaseTransferSize = "max_transfer_size" // MAXTRANSFERSIZE at the best stripe count
	PhaseBuffers      = "buffer_count"      // BUFFERCOUNT at the best stripes and MAXTRANSFERSIZE
)

// Point is one BACKUP setting. Zero BufferCount or MaxTransferSize leaves
// the option out: SQL Server chooses (plan.DefaultBufferCount, 1 MiB).
type Point struct {
	Stripes         int  `json:"stripes"`
	BufferCount     int  `json:"buffer_count,omitempty"`
	MaxTransferSize int  `json:"max_transfer_size,omitempty"` // bytes
	Null            bool `json:"null,omitempty"`              // TO DISK = 'NUL': reads, writes nothing
}

// String reads like the BACKUP options: "8 stripes, MAXTRANSFERSIZE 4 MiB,
// BUFFERCOUNT 64".
func (p Point) String() string {
	if p.Null {
		return "TO DISK = 'NUL'"
	}
	s := fmt.Sprintf("%d stripe", p.Stripes)
	if p.Stripes != 1 {
		s += "s"
	}
	if p.MaxTransferSize > 0 {
		s += fmt.Sprintf(", MAXTRANSFERSIZE %d KiB", p.MaxTransferSize>>10)
	}
	if p.BufferCount > 0 {
		s += fmt.Sprintf(", BUFFERCOUNT %d", p.BufferCount)
	}
	return s
}

// normal is p with SQL Server's defaults written out, so that "left out"
// and "given as the default" count as the same setting.
func (p Point) normal(volumes int) Point {
	if p.MaxTransferSize == 0 {
		p.MaxTransferSize = plan.DefaultMaxTransferSize
	}
	if p.BufferCount == 0 {
		p.BufferCount = plan.DefaultBufferCount(max(p.Stripes, 1), volumes)
	}
	return p
}

// Result is one measured point.
type Result struct {
	Point
	Phase   string  `json:"phase"`
	MBps    float64 `json:"mb_per_sec"` // SQL Server's own figure, from its 3014 message
	Seconds float64 `json:"seconds"`
	Bytes   int64   `json:"bytes"` // data read (pages x 8 KiB)
	// Failed is why the point did not give a figure (its error type and
	// message); MBps is 0 then.
	Failed string `json:"failed,omitempty"`
}

// Skip is a grid point that was not run, and why.
type Skip struct {
	Point
	Phase  string `json:"phase"`
	Reason string `json:"reason"`
}

// Grid is what a calibration may try.
type Grid struct {
	Stripes          []int `json:"stripes"`
	MaxTransferSizes []int `json:"max_transfer_sizes"` // bytes, multiples of 64 KiB up to 4 MiB
	// BuffersPerStripe: BUFFERCOUNT = stripes x each value (BUFFERCOUNT is
	// the total over all files).
	BuffersPerStripe []int `json:"buffers_per_stripe"`
}

// DefaultGrid is the grid for a backup server with nics NIC paths: 1 file,
// then powers of two and multiples of the path count up to 4 files per
// path (at most 64, SQL Server's limit); MAXTRANSFERSIZE 1, 2 and 4 MiB
// (seed 004 gains with 2 MiB, 4 MiB is SQL Server's largest); BUFFERCOUNT
// 8, 16, 32 and 64 per file.
func DefaultGrid(nics int) Grid {
	nics = max(nics, 1)
	top := min(4*nics, tsql.MaxStripes)
	var stripes []int
	for s := 1; s <= top; s *= 2 {
		stripes = append(stripes, s)
	}
	for s := nics; s <= top; s += nics {
		stripes = append(stripes, s)
	}
	slices.Sort(stripes)
	return Grid{
		Stripes:          slices.Compact(stripes),
		MaxTransferSizes: []int{1 << 20, 2 << 20, 4 << 20},
		BuffersPerStripe: []int{8, 16, 32, 64},
	}
}

// Check validates a grid against SQL Server's limits and a backup server
// with nics NIC paths: at least one stripe count must spread evenly over
// them, since only such a count can be configured (plan.CheckBalance).
func (g Grid) Check(nics int) error {
	if len(g.Stripes) == 0 {
		return fmt.Errorf("calibration grid: no stripe counts; give at least one, e.g. [1, 2, 4, 8]")
	}
	balanced := false
	for _, s := range g.Stripes {
		if s < 1 || s > tsql.MaxStripes {
			return fmt.Errorf("calibration grid: %d stripes is out of range; SQL Server writes 1 to %d files", s, tsql.MaxStripes)
		}
		balanced = balanced || s%max(nics, 1) == 0
	}
	if !balanced {
		return fmt.Errorf("calibration grid: no stripe count in %v is a multiple of the backup server's %d NIC paths; add one, e.g. %d", g.Stripes, nics, nics)
	}
	for _, m := range g.MaxTransferSizes {
		if m <= 0 {
			return fmt.Errorf("calibration grid: MAXTRANSFERSIZE %d must be positive, e.g. 4194304", m)
		}
		if err := tsql.CheckTuning(0, m, 0); err != nil {
			return fmt.Errorf("calibration grid: %w", err)
		}
	}
	for _, b := range g.BuffersPerStripe {
		if b < 1 {
			return fmt.Errorf("calibration grid: %d buffers per stripe must be at least 1", b)
		}
	}
	return nil
}

// Bounds of what a calibration may run against a backup server with nics
// NIC paths: DefaultGrid's largest values. A grid or a point beyond them
// would load the production instance and its backup network more than any
// calibration the product proposes, so neither a start's grid (the Web UI
// takes any input) nor a point is taken past them.
func bounds(nics int) (stripes, buffersPerStripe int) {
	d := DefaultGrid(nics)
	return slices.Max(d.Stripes), slices.Max(d.BuffersPerStripe)
}

// CheckBounds checks g against the bounds of a calibration on a backup
// server with nics NIC paths, after Check.
func (g Grid) CheckBounds(nics int) error {
	if err := g.Check(nics); err != nil {
		return err
	}
	top, perStripe := bounds(nics)
	for _, s := range g.Stripes {
		if s > top {
			return fmt.Errorf("calibration grid: %d stripes is more than a calibration runs on %d NIC paths (at most %d, 4 per path)", s, max(nics, 1), top)
		}
	}
	for _, b := range g.BuffersPerStripe {
		if b > perStripe {
			return fmt.Errorf("calibration grid: %d buffers per stripe is more than a calibration tries (at most %d)", b, perStripe)
		}
	}
	return nil
}

// CheckBounds checks that p is a point a calibration on a backup server
// with nics NIC paths may run: 1 to the bound's stripes (or the read to
// NUL), a MAXTRANSFERSIZE SQL Server takes, and at most the bound's
// buffers per stripe.
func (p Point) CheckBounds(nics int) error {
	top, perStripe := bounds(nics)
	if p.Null {
		if p.Stripes != 1 || p.BufferCount != 0 || p.MaxTransferSize != 0 {
			return fmt.Errorf("calibration point %s: the read to NUL takes no stripes or buffer settings", p)
		}
		return nil
	}
	if p.Stripes < 1 || p.Stripes > top {
		return fmt.Errorf("calibration point %s: a calibration on %d NIC paths runs 1 to %d stripes", p, max(nics, 1), top)
	}
	if p.BufferCount < 0 || p.BufferCount > perStripe*p.Stripes {
		return fmt.Errorf("calibration point %s: BUFFERCOUNT %d is beyond %d per stripe", p, p.BufferCount, perStripe)
	}
	if err := tsql.CheckTuning(p.BufferCount, p.MaxTransferSize, 0); err != nil {
		return fmt.Errorf("calibration point %s: %w", p, err)
	}
	return nil
}

// Clearly worse and not better: a branch of the grid stops at a point below
// (1-Worse) of the best so far, or after Flat points in a row that do not
// beat the best by Gain. Backups on a busy site vary by a few percent from
// run to run; these margins keep the noise from steering the search.
const (
	Worse = 0.10
	Gain  = 0.05
	Flat  = 2
)

// Explorer walks a grid one phase after the other: the read speed, then
// stripe counts upwards, then MAXTRANSFERSIZE and BUFFERCOUNT at the best so
// far. It is deterministic: the same results give the same points, so a
// workflow replays it. Points whose buffers exceed the memory budget are
// skipped, never run: SQL Server does not refuse them cleanly, the backup
// dies with "There is insufficient system memory in resource pool
// 'default'" (seed 004).
type Explorer struct {
	grid    Grid
	budget  int64 // bytes of BUFFERCOUNT x MAXTRANSFERSIZE; 0 = none
	volumes int   // database volumes (DefaultBufferCount)
	nics    int   // NIC paths of the backup server

	phase   string
	queue   []Point // the phase's points still to run
	results []Result
	skipped []Skip
	flat    int // points in a row of this phase that did not beat the best
	stopped map[string]string
	pending *Point
}

// NewExplorer starts a calibration over grid within budget bytes of backup
// buffer memory (0 = no budget) for a database on volumes volumes, backed up
// to a server with nics NIC paths.
func NewExplorer(grid Grid, budget int64, volumes, nics int) (*Explorer, error) {
	nics = max(nics, 1)
	if err := grid.Check(nics); err != nil {
		return nil, err
	}
	return &Explorer{grid: grid, budget: budget, volumes: max(volumes, 1), nics: nics, stopped: map[string]string{}}, nil
}

// Next is the next point to run and its phase; ok is false when the
// calibration is done. Every point Next returns must be given back to Record
// before Next is called again.
func (e *Explorer) Next() (p Point, phase string, ok bool) {
	if e.pending != nil {
		panic("calibrate: Next called before the previous point was recorded") // a programming error
	}
	for {
		if len(e.queue) > 0 {
			p, e.queue = e.queue[0], e.queue[1:]
			if reason := e.overBudget(p); reason != "" {
				e.skipped = append(e.skipped, Skip{Point: p, Phase: e.phase, Reason: reason})
				continue
			}
			e.pending = &p
			return p, e.phase, true
		}
		if !e.advance() {
			return Point{}, "", false
		}
	}
}

// advance moves to the next phase and fills its queue; false when none is
// left.
func (e *Explorer) advance() bool {
	best, haveBest := e.Best()
	e.flat = 0
	switch e.phase {
	case "":
		e.phase = PhaseRead
		e.queue = []Point{{Stripes: 1, Null: true}}
	case PhaseRead:
		e.phase = PhaseStripes
		for _, s := range e.grid.Stripes {
			e.queue = append(e.queue, Point{Stripes: s})
		}
	case PhaseStripes:
		if !haveBest {
			return false // no stripe count worked: nothing to tune
		}
		e.phase = PhaseTransferSize
		for _, m := range e.grid.MaxTransferSizes {
			p := Point{Stripes: best.Stripes, MaxTransferSize: m}
			if !e.measured(p) {
				e.queue = append(e.queue, p)
			}
		}
	case PhaseTransferSize:
		e.phase = PhaseBuffers
		for _, b := range e.grid.BuffersPerStripe {
			p := Point{Stripes: best.Stripes, MaxTransferSize: best.MaxTransferSize, BufferCount: b * best.Stripes}
			if !e.measured(p) {
				e.queue = append(e.queue, p)
			}
		}
	default:
		return false
	}
	// Over-budget points are reported now, with their own reason, even if
	// the phase ends early before reaching them.
	e.queue = slices.DeleteFunc(e.queue, func(p Point) bool {
		reason := e.overBudget(p)
		if reason != "" {
			e.skipped = append(e.skipped, Skip{Point: p, Phase: e.phase, Reason: reason})
		}
		return reason != ""
	})
	return true
}

// measured reports a point already run (in its normal form).
func (e *Explorer) measured(p Point) bool {
	n := p.normal(e.volumes)
	for _, r := range e.results {
		if !r.Null && r.Point.normal(e.volumes) == n {
			return true
		}
	}
	return false
}

// overBudget is why p may not run, or "".
func (e *Explorer) overBudget(p Point) string {
	if p.Null || e.budget <= 0 {
		return ""
	}
	t := plan.Tuning{Stripes: p.Stripes, BufferCount: p.BufferCount, MaxTransferSize: p.MaxTransferSize}
	mem := plan.BackupMemory(t, e.volumes)
	if mem <= e.budget {
		return ""
	}
	n := p.normal(e.volumes)
	return fmt.Sprintf("BUFFERCOUNT %d x MAXTRANSFERSIZE %d KiB = %d MiB of buffers is above memory_budget (%d MiB): SQL Server would fail the backup for lack of memory",
		n.BufferCount, n.MaxTransferSize>>10, mem>>20, e.budget>>20)
}

// Record gives back the outcome of the point Next returned last. A point
// clearly worse than the best, or the Flat-th in a row that does not beat it
// by Gain, ends its phase; the rest of the phase is reported as skipped.
func (e *Explorer) Record(r Result) {
	if e.pending == nil || r.Point != *e.pending {
		panic("calibrate: Record of a point Next did not return") // a programming error
	}
	e.pending = nil
	r.Phase = e.phase
	before, had := best(e.results, 1) // any stripe count: the branch's trend
	e.results = append(e.results, r)
	if r.Null || e.phase == PhaseRead {
		return
	}
	var why string
	switch {
	case r.Failed != "":
		why = "" // a failed point says nothing about the next; the phase goes on
	case !had:
	case r.MBps < (1-Worse)*before.MBps:
		why = fmt.Sprintf("%s ran at %.0f MB/s, clearly below the best so far (%.0f MB/s at %s)", r.Point, r.MBps, before.MBps, before.Point)
	case r.MBps < (1+Gain)*before.MBps:
		e.flat++
		if e.flat >= Flat {
			why = fmt.Sprintf("%d settings in a row gained less than %.0f%% over %.0f MB/s at %s", Flat, Gain*100, before.MBps, before.Point)
		}
	default:
		e.flat = 0
	}
	if why == "" {
		return
	}
	e.stopped[e.phase] = why
	for _, p := range e.queue {
		e.skipped = append(e.skipped, Skip{Point: p, Phase: e.phase, Reason: "not run: " + why})
	}
	e.queue = nil
}

// Best is the fastest point measured so far that can be configured: its
// stripes spread evenly over the NIC paths (the read phase excluded). The
// tuning phases start from it.
func (e *Explorer) Best() (Result, bool) {
	return best(e.results, e.nics)
}

func best(results []Result, nics int) (Result, bool) {
	var best Result
	ok := false
	for _, r := range results {
		if r.Null || r.Failed != "" || r.MBps <= 0 || r.Stripes%max(nics, 1) != 0 {
			continue
		}
		if !ok || r.MBps > best.MBps {
			best, ok = r, true
		}
	}
	return best, ok
}

// Results are the points run, in order; Skipped those that were not, with
// why; Stopped why each phase ended early.
func (e *Explorer) Results() []Result          { return slices.Clone(e.results) }
func (e *Explorer) Skipped() []Skip            { return slices.Clone(e.skipped) }
func (e *Explorer) Stopped() map[string]string { return e.stopped }
