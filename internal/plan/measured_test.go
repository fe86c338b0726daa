package plan

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/catalog"
)

var t0 = time.Date(2026, 11, 1, 22, 0, 0, 0, time.UTC)

// verifiedSet is a verified manifest of (sql01, Sales) set seq taken at
// t0 + seq days: data bytes (BackupSize) in files bytes, and the given
// step durations (0: no timing).
func verifiedSet(t *testing.T, seq int64, data, files int64, compressed bool, steps map[catalog.Step]time.Duration) *catalog.Manifest {
	t.Helper()
	taken := t0.Add(time.Duration(seq) * 24 * time.Hour)
	m := catalog.New("sql01", "Sales", seq, taken)
	m.Options = catalog.Options{Compression: compressed, Checksum: true, Stripes: 2, BufferCount: 50, MaxTransferSize: 4 << 20}
	m.Stripes = []catalog.Stripe{{Name: m.StripeFileName(1, 2), Size: files / 2}, {Name: m.StripeFileName(2, 2), Size: files - files/2}}
	m.Header = &catalog.Header{FirstLSN: "1", LastLSN: "2", BackupFinish: taken, BackupSize: data, CompressedBackupSize: files}
	at := taken
	for _, st := range []catalog.Step{catalog.StepBackup, catalog.StepCopy, catalog.StepRestore, catalog.StepCheckDB} {
		if d, ok := steps[st]; ok {
			if err := m.SetTiming(st, at, at.Add(d)); err != nil {
				t.Fatal(err)
			}
			at = at.Add(d)
		}
	}
	for _, s := range []catalog.State{catalog.StateCopied, catalog.StateRestored, catalog.StateChecked, catalog.StateVerified} {
		if err := m.Advance(s, at); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6*math.Max(1, math.Abs(b)) }

func TestMeasureAVerifiedSet(t *testing.T) {
	m := verifiedSet(t, 7, 100*gb, 25*gb, true, map[catalog.Step]time.Duration{
		catalog.StepBackup: 1000 * time.Second, catalog.StepCopy: 500 * time.Second,
		catalog.StepRestore: 2000 * time.Second, catalog.StepCheckDB: 5 * time.Second})
	got := Measure(m)
	for _, c := range []struct {
		name string
		r    StepRate
		mbps float64
	}{{"backup", got.Backup, 102.4}, {"copy", got.Copy, 51.2}, {"restore", got.Restore, 51.2}} {
		if !near(c.r.MBps, c.mbps) || c.r.Source != SourceCycle || c.r.Sequence != 7 || !c.r.At.Equal(m.TakenAt()) || !c.r.Measured() {
			t.Errorf("%s: %+v, want %.1f MB/s measured on set 7 at %v", c.name, c.r, c.mbps, m.TakenAt())
		}
	}
	if got.Backup.Settings != (Settings{Compression: true, Stripes: 2, BufferCount: 50, MaxTransferSize: 4 << 20}) {
		t.Errorf("backup settings %+v, want the set's options", got.Backup.Settings)
	}
	// CHECKDB took 5 s: shorter than MinMeasuredDuration says nothing.
	if got.CheckDB.Measured() || got.CheckDB != (StepRate{}) {
		t.Errorf("CHECKDB of 5 s: %+v, want unmeasured", got.CheckDB)
	}
	if !near(got.CompressionFactor, 4) {
		t.Errorf("compression factor %v, want 4 (100 GiB in 25 GiB of files)", got.CompressionFactor)
	}

	// No header: nothing but the copy (its bytes are the stripes').
	m.Header = nil
	if got := Measure(m); got.Backup.Measured() || got.Restore.Measured() || !got.Copy.Measured() || got.CompressionFactor != 0 {
		t.Errorf("set without header: %+v, want the copy only", got)
	}
	// A set that is not verified measures nothing.
	failed := verifiedSet(t, 8, 100*gb, 25*gb, true, nil)
	failed.State = catalog.StateFailed
	_ = failed.SetTiming(catalog.StepBackup, t0, t0.Add(time.Hour))
	if got := Measure(failed); got.Any() {
		t.Errorf("failed set: %+v, want nothing measured", got)
	}
	if Measure(nil).Any() {
		t.Error("nil manifest measured something")
	}
}

func rateAt(mbps float64, seq int64, src Source) StepRate {
	return StepRate{MBps: mbps, Source: src, Sequence: seq, At: t0.Add(time.Duration(seq) * time.Hour)}
}

// Combine takes the slowest of the newest three measurements per step.
func TestCombineSlowestOfTheNewestThree(t *testing.T) {
	ms := []Throughput{
		{Backup: rateAt(50, 1, SourceCycle), Restore: rateAt(10, 1, SourceCycle), CompressionFactor: 2},
		{Backup: rateAt(120, 4, SourceCycle), Restore: rateAt(90, 4, SourceCycle), CompressionFactor: 5},
		{Backup: rateAt(80, 3, SourceCycle), CompressionFactor: 4},
		{Backup: rateAt(100, 2, SourceCycle), CompressionFactor: 4.5},
	}
	got := Combine(ms)
	if got.Backup.MBps != 80 || got.Backup.Sequence != 3 {
		t.Errorf("backup %+v, want 80 MB/s of set 3 (set 1's 50 is older than the newest three)", got.Backup)
	}
	// Only two sets measured the restore: the slowest of them.
	if got.Restore.MBps != 10 || got.Restore.Sequence != 1 {
		t.Errorf("restore %+v, want set 1's 10 MB/s", got.Restore)
	}
	if got.Copy.Measured() || got.CheckDB.Measured() {
		t.Errorf("copy %+v CHECKDB %+v, want unmeasured", got.Copy, got.CheckDB)
	}
	if got.CompressionFactor != 4 {
		t.Errorf("compression factor %v, want the smallest of the newest three (4)", got.CompressionFactor)
	}
	if (Combine(nil) != Throughput{}) {
		t.Error("nothing to combine gave a measurement")
	}
}

// A calibration supplies the backup rate; the cycles before it measured
// settings it may have replaced and drop out, the cycles after it count
// with it.
func TestCombineCalibration(t *testing.T) {
	cal := rateAt(400, 0, SourceCalibration)
	cal.At = t0.Add(5 * time.Hour)
	cal.Settings = Settings{Compression: true, Stripes: 16, NICPaths: 8, BufferCount: 64, MaxTransferSize: 4 << 20}
	cycles := []Throughput{{Backup: rateAt(100, 3, SourceCycle)}, {Backup: rateAt(90, 4, SourceCycle)}, {Backup: rateAt(110, 2, SourceCycle)}}
	got := Combine(append(cycles, Throughput{Backup: cal}))
	if got.Backup != cal {
		t.Errorf("calibration newer than every cycle: %+v, want it (%+v)", got.Backup, cal)
	}
	after := append(cycles, Throughput{Backup: cal}, Throughput{Backup: rateAt(300, 6, SourceCycle)})
	if got := Combine(after); got.Backup.MBps != 300 || got.Backup.Source != SourceCycle {
		t.Errorf("a cycle after the calibration: %+v, want its 300 MB/s (slower than the calibration's 400)", got.Backup)
	}
	var gotJSON map[string]any
	data, _ := json.Marshal(Throughput{Backup: cal})
	_ = json.Unmarshal(data, &gotJSON)
	if b := gotJSON["backup"].(map[string]any); b["source"] != "calibration" || b["settings"].(map[string]any)["nic_paths"] != 8.0 {
		t.Errorf("calibration as JSON: %s", data)
	}
}

// Each set counts once, however many servers hold its manifest, and only
// the verified sets of the database count.
func TestFromManifests(t *testing.T) {
	steps := func(backup time.Duration) map[catalog.Step]time.Duration {
		return map[catalog.Step]time.Duration{catalog.StepBackup: backup, catalog.StepRestore: 100 * time.Second}
	}
	a := verifiedSet(t, 1, 10*gb, 10*gb, false, steps(100*time.Second)) // 102.4 MB/s
	b := verifiedSet(t, 2, 10*gb, 10*gb, false, steps(200*time.Second)) // 51.2
	bOther := verifiedSet(t, 2, 10*gb, 10*gb, false, map[catalog.Step]time.Duration{catalog.StepBackup: 200 * time.Second})
	c := verifiedSet(t, 3, 10*gb, 10*gb, false, steps(50*time.Second))   // 204.8
	d := verifiedSet(t, 4, 10*gb, 10*gb, false, steps(1000*time.Second)) // 10.24, but another instance
	d.SourceInstance = "sql02"
	got := FromManifests(catalog.Of("sql01", "Sales"), []*catalog.Manifest{a, bOther, b, c, d, c})
	if !near(got.Backup.MBps, 51.2) || got.Backup.Sequence != 2 {
		t.Errorf("backup %+v, want set 2's 51.2 MB/s", got.Backup)
	}
	if !near(got.Restore.MBps, 102.4) || got.Restore.Sequence == 0 {
		t.Errorf("restore %+v, want 102.4 MB/s (set 2 counted by its copy with the restore timing)", got.Restore)
	}
	// Four sets: set 1 drops out of the window.
	e := verifiedSet(t, 5, 10*gb, 10*gb, false, steps(100*time.Second))
	got = FromManifests(catalog.Of("sql01", "Sales"), []*catalog.Manifest{a, b, c, e})
	if !near(got.Backup.MBps, 51.2) {
		t.Errorf("backup %+v, want 51.2", got.Backup)
	}
	// A calibration after the sets: the backup's window starts afresh.
	cal := Throughput{Backup: StepRate{MBps: 300, Source: SourceCalibration, At: e.TakenAt().Add(time.Hour),
		Settings: Settings{Stripes: 8, NICPaths: 4, BufferCount: 64, MaxTransferSize: 4 << 20}}}
	got = FromManifests(catalog.Of("sql01", "Sales"), []*catalog.Manifest{a, b, c, e}, cal)
	if got.Backup != cal.Backup || !near(got.Restore.MBps, 102.4) {
		t.Errorf("with a calibration: backup %+v restore %+v, want the calibration's 300 MB/s and the sets' restore", got.Backup, got.Restore)
	}
	if got := FromManifests(catalog.Of("sql01", "Other"), []*catalog.Manifest{a, b}); got.Any() {
		t.Errorf("another database's sets measured %+v", got)
	}
}

// Estimate uses a measured rate where one fits the run and the assumption
// elsewhere, and says which.
func TestEstimateMeasuredAndAssumed(t *testing.T) {
	size := 1024 * gb
	c := SiteCycle(size, 2, 2, true, 0)
	site, err := CycleTime(c)
	if err != nil {
		t.Fatal(err)
	}
	est, used, err := Estimate(c, true, Throughput{})
	if err != nil {
		t.Fatal(err)
	}
	if est != site {
		t.Errorf("nothing measured: %+v, want the site's estimate %+v", est, site)
	}
	for i, r := range used.steps() {
		if r.Source != SourceAssumed || r.MBps <= 0 {
			t.Errorf("step %d: %+v, want an assumed rate", i, r)
		}
	}

	backup := rateAt(512, 9, SourceCycle)
	backup.Settings.Compression = true
	copyRate := rateAt(256, 9, SourceCycle)
	copyRate.Settings.Compression = true
	restore := rateAt(64, 9, SourceCycle) // measured without compression: does not fit
	checkdb := rateAt(1024, 9, SourceCycle)
	m := Throughput{Backup: backup, Copy: copyRate, Restore: restore, CheckDB: checkdb, CompressionFactor: 4}
	est, used, err = Estimate(c, true, m)
	if err != nil {
		t.Fatal(err)
	}
	if est.Backup != 2048*time.Second || used.Backup != backup || !strings.Contains(est.BackupRate.Bottleneck, "set 9") {
		t.Errorf("backup %v %+v (%+v), want 1 TiB at 512 MB/s = 2048 s, measured on set 9", est.Backup, est.BackupRate, used.Backup)
	}
	// 1 TiB / 4 = 256 GiB at 256 MB/s.
	if est.Copy != 1024*time.Second || used.Copy != copyRate || used.CompressionFactor != 4 {
		t.Errorf("copy %v %+v, want 256 GiB at 256 MB/s = 1024 s with the measured factor 4", est.Copy, used)
	}
	if est.Restore != site.Restore || used.Restore.Source != SourceAssumed || est.RestoreRate != site.RestoreRate {
		t.Errorf("restore %v %+v, want the assumption: the measured rate is of an uncompressed set", est.Restore, used.Restore)
	}
	if est.CheckDB != 1024*time.Second || used.CheckDB != checkdb {
		t.Errorf("CHECKDB %v %+v, want 1 TiB at 1024 MB/s, measured whatever the compression", est.CheckDB, used.CheckDB)
	}
	if est.Total != est.Backup+est.Copy+est.Restore+est.CheckDB {
		t.Errorf("total %v is not the sum of the steps", est.Total)
	}

	// The timeouts keep the safety factor and the floors on measured rates.
	b, err := Timeouts(size, est, Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if b.Backup.StartToClose != SafetyFactor*2048*time.Second+TimeoutFloor || b.CheckDB.StartToClose != SafetyFactor*1024*time.Second+TimeoutFloor {
		t.Errorf("budget %+v, want %d x the measured durations + %v", b, SafetyFactor, TimeoutFloor)
	}
	// Uncompressed run: the compressed sets' backup and copy rates and
	// their factor do not fit.
	c = SiteCycle(size, 2, 2, false, 0)
	site, _ = CycleTime(c)
	est, used, _ = Estimate(c, false, m)
	if est.Backup != site.Backup || est.Copy != site.Copy || used.Backup.Source != SourceAssumed || used.CompressionFactor != 0 {
		t.Errorf("uncompressed run: %+v %+v, want the assumed backup and copy", est, used)
	}
	if est.Restore != 16384*time.Second || used.Restore != restore {
		t.Errorf("uncompressed run: restore %v %+v, want the measured 64 MB/s", est.Restore, used.Restore)
	}
}
