package calibrate

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/backupcycle/backupcycle/internal/plan"
)

// Report is what a calibration found and what it proposes. It is the
// Calibrate workflow's result, and is kept on the backup server beside the
// manifests (tsql.CalibrationReportName), where the plan reads it.
type Report struct {
	Instance     string    `json:"instance"`
	Database     string    `json:"database"`
	Server       string    `json:"server"` // the backup server written to
	NICs         int       `json:"nics"`   // its NIC paths
	SizeBytes    int64     `json:"size_bytes"`
	Compression  bool      `json:"compression"`
	MemoryBudget int64     `json:"memory_budget_bytes,omitempty"`
	Started      time.Time `json:"started_at"`
	Finished     time.Time `json:"finished_at"`
	Grid         Grid      `json:"grid"`

	// ReadMBps is the backup to NUL: how fast SQL Server reads the data
	// files; no setting of the backup to files can beat it.
	ReadMBps float64           `json:"read_mb_per_sec,omitempty"`
	Results  []Result          `json:"results"`
	Skipped  []Skip            `json:"skipped,omitempty"`
	Stopped  map[string]string `json:"stopped,omitempty"` // why a phase ended early

	// Best is the fastest configurable point; Proposed the setting to
	// configure: the cheapest (least buffer memory, then fewest files)
	// within Gain of Best, since a few percent are noise and memory is not.
	Best     *Result `json:"best,omitempty"`
	Proposed *Result `json:"proposed,omitempty"`
	// Patch is the configuration change that applies Proposed.
	Patch string   `json:"config_patch,omitempty"`
	Notes []string `json:"notes,omitempty"`
}

// Finish fills Best, Proposed, Patch and Notes from the explorer's results.
func (r *Report) Finish(e *Explorer) {
	r.Results, r.Skipped = e.Results(), e.Skipped()
	if st := e.Stopped(); len(st) > 0 {
		r.Stopped = st
	}
	for _, res := range r.Results {
		if res.Null && res.Failed == "" {
			r.ReadMBps = res.MBps
		}
	}
	best, ok := e.Best()
	if !ok {
		r.Notes = append(r.Notes, "no setting that spreads evenly over the NIC paths gave a figure: nothing to propose; see the failures above")
		return
	}
	r.Best = &best
	cands := slices.DeleteFunc(slices.Clone(r.Results), func(x Result) bool {
		return x.Null || x.Failed != "" || x.Stripes%max(e.nics, 1) != 0 || x.MBps < best.MBps/(1+Gain)
	})
	slices.SortStableFunc(cands, func(a, b Result) int {
		ma, mb := memory(a.Point, e.volumes), memory(b.Point, e.volumes)
		switch {
		case ma != mb:
			return cmp.Compare(ma, mb)
		case a.Stripes != b.Stripes:
			return a.Stripes - b.Stripes
		default:
			return cmp.Compare(b.MBps, a.MBps)
		}
	})
	prop := cands[0]
	r.Proposed = &prop
	r.Patch = patch(r.Instance, r.Database, prop.Point)
	if short := shortRuns(r.Results); short > len(r.Results)/2 {
		r.Notes = append(r.Notes, fmt.Sprintf(
			"%d of %d backups took under %s: too short to measure reliably (start-up costs dominate); calibrate a larger database, or treat the figures as rough",
			short, len(r.Results), MinSeconds))
	}
	if r.ReadMBps > 0 && best.MBps >= (1-Worse)*r.ReadMBps && best.MBps <= (1+Worse)*r.ReadMBps {
		r.Notes = append(r.Notes, fmt.Sprintf(
			"the backup runs at %.0f MB/s, close to the read speed of the data files (%.0f MB/s to NUL): it is read-bound, more files or buffers cannot make it faster; faster data LUNs or compression can",
			best.MBps, r.ReadMBps))
	}
	switch n := len(r.Skipped); n {
	case 0:
	case 1:
		r.Notes = append(r.Notes, "1 grid point was not run; it is listed with its reason")
	default:
		r.Notes = append(r.Notes, fmt.Sprintf("%d grid points were not run; each is listed with its reason", n))
	}
}

// MinSeconds is the shortest backup whose figure says something: below it,
// opening the files and the media header dominate.
const MinSeconds = 2 * time.Second

func shortRuns(rs []Result) int {
	n := 0
	for _, r := range rs {
		if r.Failed == "" && r.Seconds < MinSeconds.Seconds() {
			n++
		}
	}
	return n
}

func memory(p Point, volumes int) int64 {
	return plan.BackupMemory(plan.Tuning{Stripes: p.Stripes, BufferCount: p.BufferCount, MaxTransferSize: p.MaxTransferSize}, volumes)
}

// patch is the databases: entry that applies p, as YAML to merge into the
// configuration. A setting SQL Server chooses by itself is left out.
func patch(instance, db string, p Point) string {
	var b strings.Builder
	b.WriteString("databases:\n")
	fmt.Fprintf(&b, "  - name: %s\n", yamlString(db))
	if instance != "" {
		fmt.Fprintf(&b, "    instance: %s\n", yamlString(instance))
	}
	fmt.Fprintf(&b, "    stripes: %d\n", p.Stripes)
	if p.MaxTransferSize > 0 {
		fmt.Fprintf(&b, "    max_transfer_size: %s\n", sizeText(p.MaxTransferSize))
	}
	if p.BufferCount > 0 {
		fmt.Fprintf(&b, "    buffer_count: %d\n", p.BufferCount)
	}
	return b.String()
}

// yamlString quotes s as a YAML double-quoted scalar (JSON's escapes are
// valid there), so any database name reads back unchanged.
func yamlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// sizeText writes bytes the way the configuration reads them (4MiB, 512KiB).
func sizeText(n int) string {
	switch {
	case n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprint(n)
}

// Throughput is what the plan takes from the calibration: the proposed
// setting's backup rate, with the settings it was measured with. A backup
// shorter than plan.MinMeasuredDuration gives nothing, as a cycle's would
// not: it would not extrapolate to the database's real size.
func (r *Report) Throughput() plan.Throughput {
	p := r.Proposed
	if p == nil || p.MBps <= 0 || p.Seconds < plan.MinMeasuredDuration.Seconds() {
		return plan.Throughput{}
	}
	return plan.Throughput{Backup: plan.StepRate{
		MBps: p.MBps, Source: plan.SourceCalibration, At: r.Finished, Bytes: p.Bytes, Seconds: p.Seconds,
		Settings: plan.Settings{Compression: r.Compression, Stripes: p.Stripes, NICPaths: r.NICs,
			BufferCount: p.BufferCount, MaxTransferSize: p.MaxTransferSize},
	}}
}
