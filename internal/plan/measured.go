package plan

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/backupcycle/backupcycle/internal/catalog"
)

// Source says where a throughput figure came from.
type Source string

const (
	// SourceAssumed: the site the timeouts assume (TimeoutSite) or the
	// throughputs given to `starter plan`; nothing was measured.
	SourceAssumed Source = "assumed"
	// SourceCycle: the step timings of a verified cycle's manifest.
	SourceCycle Source = "cycle"
	// SourceCalibration: a calibration run's COPY_ONLY backups, with the
	// settings it measured them with.
	SourceCalibration Source = "calibration"
)

// MinMeasuredDuration is the shortest step a rate is taken from: under it
// the login, opening the files and the clock's resolution weigh more than
// the bytes, and a rate from a small database would not extrapolate to a
// large one.
const MinMeasuredDuration = 10 * time.Second

// MeasuredWindow is how many recent measurements of a step Combine looks at.
const MeasuredWindow = 3

// Settings are the BACKUP settings a rate was measured with (zero: SQL
// Server's default, or not recorded).
type Settings struct {
	Compression     bool `json:"compression"`
	Stripes         int  `json:"stripes,omitempty"`
	NICPaths        int  `json:"nic_paths,omitempty"` // UNC paths the stripes were spread over
	BufferCount     int  `json:"buffercount,omitempty"`
	MaxTransferSize int  `json:"maxtransfersize,omitempty"` // bytes
	BlockSize       int  `json:"blocksize,omitempty"`       // bytes
}

// StepRate is the throughput of one step, in the unit its estimate divides
// by: MB/s of database data (BackupSize) for backup, restore and CHECKDB,
// MB/s of file bytes for the copy. MBps 0 means not measured.
type StepRate struct {
	MBps   float64 `json:"mbps"`
	Source Source  `json:"source"`
	// Sequence is the set it was measured on (SourceCycle), At when: the
	// set's backup (catalog.Manifest.TakenAt) or the calibration's run.
	Sequence int64     `json:"sequence,omitempty"`
	At       time.Time `json:"measured_at,omitzero"`
	// Bytes and Seconds are what the rate was computed from.
	Bytes    int64    `json:"bytes,omitempty"`
	Seconds  float64  `json:"seconds,omitempty"`
	Settings Settings `json:"settings,omitzero"`
}

// Measured reports whether r is a measurement (not an assumption).
func (r StepRate) Measured() bool {
	return r.MBps > 0 && !math.IsInf(r.MBps, 0) && (r.Source == SourceCycle || r.Source == SourceCalibration || r.Source == SourceDrill)
}

// Throughput is what was measured of one database's steps; a step not
// measured has MBps 0. A calibration supplies Backup (SourceCalibration,
// with its Settings) and leaves the rest zero.
type Throughput struct {
	Backup  StepRate `json:"backup"`
	Copy    StepRate `json:"copy"`
	Restore StepRate `json:"restore"`
	CheckDB StepRate `json:"checkdb"`
	// CompressionFactor is BackupSize / bytes in the files, measured on
	// compressed sets only (0: none): it says how many bytes the copy moves.
	CompressionFactor float64 `json:"compression_factor,omitempty"`
}

// Any reports whether some step was measured.
func (t Throughput) Any() bool {
	return t.Backup.Measured() || t.Copy.Measured() || t.Restore.Measured() || t.CheckDB.Measured()
}

// steps lists the rates in the order backup, copy, restore, CHECKDB.
func (t *Throughput) steps() []*StepRate {
	return []*StepRate{&t.Backup, &t.Copy, &t.Restore, &t.CheckDB}
}

// Measure derives the step rates of a verified set from its manifest:
// BackupSize (RESTORE HEADERONLY, uncompressed) over the backup, restore
// and CHECKDB durations, the stripes' bytes over the copy's. A step without
// a timing, without its byte count or shorter than MinMeasuredDuration is
// left unmeasured; a set that is not verified measures nothing (a failed
// run's timings may be of a partial step).
func Measure(m *catalog.Manifest) Throughput {
	var t Throughput
	if m == nil || !m.Verified() {
		return t
	}
	set := Settings{Compression: m.Options.Compression, Stripes: len(m.Stripes), BufferCount: m.Options.BufferCount,
		MaxTransferSize: m.Options.MaxTransferSize, BlockSize: m.Options.BlockSize}
	at := m.TakenAt()
	rate := func(step catalog.Step, bytes int64) StepRate {
		tm, ok := m.Timings[step]
		if !ok || bytes <= 0 || tm.DurationSeconds < MinMeasuredDuration.Seconds() {
			return StepRate{}
		}
		return StepRate{MBps: float64(bytes) / MiB / tm.DurationSeconds, Source: SourceCycle, Sequence: m.Sequence, At: at,
			Bytes: bytes, Seconds: tm.DurationSeconds, Settings: set}
	}
	var data, files int64
	if m.Header != nil {
		data = m.Header.BackupSize
	}
	for _, s := range m.Stripes {
		files += s.Size
	}
	if files == 0 && m.Header != nil {
		files = m.Header.CompressedBackupSize
	}
	t.Backup = rate(catalog.StepBackup, data)
	t.Copy = rate(catalog.StepCopy, files)
	t.Restore = rate(catalog.StepRestore, data)
	t.CheckDB = rate(catalog.StepCheckDB, data)
	if m.Options.Compression && data > 0 && files > 0 {
		t.CompressionFactor = max(1, float64(data)/float64(files))
	}
	return t
}

// Combine makes one figure per step of several measurements (of sets, of
// calibrations; any order): the slowest of the newest MeasuredWindow that
// measured the step. The slowest, because the figures become timeouts, and
// a timeout that stops a healthy statement costs the whole step again: one
// quiet night (an idle SAN, a warm cache) must not shorten the next cycle's
// bounds, while a rotation over two backup servers alternates the copy's
// direction and the verification instance, so that the last few sets cover
// both. The newest only, because the hardware and the settings change.
// A calibration of a step drops the older measurements of that step: they
// may be of settings the calibration replaced.
func Combine(ms []Throughput) Throughput {
	var out Throughput
	for i, dst := range out.steps() {
		var rates []StepRate
		for _, m := range ms {
			if r := *m.steps()[i]; r.Measured() {
				rates = append(rates, r)
			}
		}
		slices.SortStableFunc(rates, func(a, b StepRate) int {
			if c := b.At.Compare(a.At); c != 0 {
				return c
			}
			return cmp.Compare(b.Sequence, a.Sequence)
		})
		if j := slices.IndexFunc(rates, func(r StepRate) bool { return r.Source == SourceCalibration }); j >= 0 {
			rates = rates[:j+1]
		}
		for k, r := range rates {
			if k == MeasuredWindow {
				break
			}
			if dst.MBps == 0 || r.MBps < dst.MBps {
				*dst = r
			}
		}
	}
	// The smallest factor: the most bytes to copy.
	var cfs []Throughput
	for _, m := range ms {
		if m.CompressionFactor > 0 {
			cfs = append(cfs, m)
		}
	}
	slices.SortStableFunc(cfs, func(a, b Throughput) int { return newest(b).Compare(newest(a)) })
	for k, m := range cfs {
		if k == MeasuredWindow {
			break
		}
		if out.CompressionFactor == 0 || m.CompressionFactor < out.CompressionFactor {
			out.CompressionFactor = m.CompressionFactor
		}
	}
	return out
}

func newest(t Throughput) time.Time {
	var at time.Time
	for _, r := range t.steps() {
		if r.At.After(at) {
			at = r.At
		}
	}
	return at
}

// FromManifests is the combined measurement (Combine) of the verified sets
// of database d among the trusted manifests (catalog.Manifest.Trusted: an
// untrusted one's timings are anybody's), which may hold the same set once per
// backup server (each set counts once, by its copy with the most timings),
// and of more: measurements made elsewhere, such as a calibration's
// (Throughput{Backup: StepRate{Source: SourceCalibration, ...}}).
//
// Differentials are left out: their BackupSize is the changes only, while
// their restore step restored their base as well and their CHECKDB read
// the whole copy.
func FromManifests(d catalog.DB, manifests []*catalog.Manifest, more ...Throughput) Throughput {
	best := map[int64]*catalog.Manifest{}
	for _, m := range manifests {
		if m == nil || !d.Owns(m) || !m.Verified() || !m.Trusted() || m.IsDifferential() {
			continue
		}
		if b := best[m.Sequence]; b == nil || len(m.Timings) > len(b.Timings) {
			best[m.Sequence] = m
		}
	}
	ms := make([]Throughput, 0, len(best)+len(more))
	ms = append(ms, more...)
	// Newest set first: Combine keeps this order among equal times.
	for _, seq := range slices.Backward(slices.Sorted(maps.Keys(best))) {
		ms = append(ms, Measure(best[seq]))
	}
	return Combine(ms)
}

// Estimate is CycleTime of c, with each step's duration taken from the
// measured rate of m where there is one that fits this run: the backup,
// copy and restore rates only when measured with compression as this run
// backs up (compression changes how many bytes cross the network and the
// disks), the CHECKDB rate always. The other steps keep c's assumption.
// It returns the estimate and the rates it used, each with its source
// (SourceAssumed for c's).
func Estimate(c Cycle, compressed bool, m Throughput) (CycleEstimate, Throughput, error) {
	est, err := CycleTime(c)
	if err != nil {
		return est, Throughput{}, err
	}
	cf := c.Workload.cf()
	used := Throughput{
		Backup:  StepRate{MBps: est.BackupRate.MBps, Source: SourceAssumed},
		Copy:    StepRate{MBps: c.CopyMBps, Source: SourceAssumed},
		Restore: StepRate{MBps: est.RestoreRate.MBps, Source: SourceAssumed},
		CheckDB: StepRate{MBps: c.Remote.DatabaseReadMBps(), Source: SourceAssumed},
	}
	if compressed && m.CompressionFactor >= 1 {
		cf, used.CompressionFactor = m.CompressionFactor, m.CompressionFactor
	}
	data := c.Workload.DataBytes
	fits := func(r StepRate, anyCompression bool) bool {
		return r.Measured() && (anyCompression || r.Settings.Compression == compressed)
	}
	if r := m.Backup; fits(r, false) {
		used.Backup = r
		est.Backup, est.BackupRate = durationFor(data, r.MBps), Rate{r.MBps, measuredBy(r)}
	}
	if r := m.Copy; fits(r, false) {
		used.Copy = r
	}
	est.Copy = durationFor(int64(float64(data)/cf), used.Copy.MBps)
	if r := m.Restore; fits(r, false) {
		used.Restore = r
		est.Restore, est.RestoreRate = durationFor(data, r.MBps), Rate{r.MBps, measuredBy(r)}
	}
	if r := m.CheckDB; fits(r, true) {
		used.CheckDB = r
		est.CheckDB = durationFor(data, r.MBps)
	}
	est.Total = est.Backup + est.Copy + est.Restore + est.CheckDB
	return est, used, nil
}

// measuredBy names a measured rate as a Rate's bottleneck: what limits it
// is not known, only where it was seen.
func measuredBy(r StepRate) string {
	if r.Source == SourceCalibration {
		return "measured by calibration"
	}
	return "measured on set " + strconv.FormatInt(r.Sequence, 10)
}
