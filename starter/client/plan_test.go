package client

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/calibrate"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/plan"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/storage/local"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

func loadSite(t *testing.T) *config.Config {
	t.Helper()
	cfg, err := config.Load("../testdata/site.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func near(t *testing.T, what string, got, want time.Duration) {
	t.Helper()
	if d := got - want; d < -time.Millisecond || d > time.Millisecond {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func TestPlanCycleConfiguredStripesAndCompression(t *testing.T) {
	p, err := PlanCycle(loadSite(t), PlanRequest{Database: "Sales", SizeBytes: 2 << 40, Assumptions: DefaultAssumptions()})
	if err != nil {
		t.Fatal(err)
	}
	if p.Database != "sql01/Sales" || p.Primary != "bak01" || p.Remote != "bak02" || p.VerifyInstance != "sqlverify" {
		t.Errorf("servers: %+v", p)
	}
	if p.Stripes != 8 || p.StripesAuto || len(p.Layout) != 8 {
		t.Fatalf("stripes %d auto %v layout %d", p.Stripes, p.StripesAuto, len(p.Layout))
	}
	// Round robin over the two NIC paths, seed 000 naming.
	if p.Layout[0].Path != `\\192.168.2.2\backup\sql01@Sales~8de4e0ea_00000001_1of8.bak` || p.Layout[1].Path != `\\192.168.3.2\backup\sql01@Sales~8de4e0ea_00000001_2of8.bak` {
		t.Errorf("layout %s, %s", p.Layout[0].Path, p.Layout[1].Path)
	}
	// BUFFERCOUNT 64 x 4 MiB.
	if p.MemoryBytes != 256<<20 || p.MemoryErr != "" || p.MemoryBudget != 2<<30 {
		t.Errorf("memory %d err %q budget %d", p.MemoryBytes, p.MemoryErr, p.MemoryBudget)
	}
	// compression: true assumes factor 4. 2 TiB = 2097152 MiB.
	e := p.Estimate
	if p.Assumptions.CompressionFactor != 4 || e == nil {
		t.Fatalf("factor %v estimate %v", p.Assumptions.CompressionFactor, e)
	}
	// backup: min(data read 200, network 2x110x4, file write 200x4) = 200.
	near(t, "backup", e.Backup, secs(2097152.0/200))
	if e.BackupRate.Bottleneck != "database read" {
		t.Errorf("backup bottleneck %q", e.BackupRate.Bottleneck)
	}
	near(t, "copy", e.Copy, secs(2097152.0/4/110))
	// restore on the remote server's own disks: data write 200 / 2 (no instant file init).
	near(t, "restore", e.Restore, secs(2097152.0/100))
	near(t, "CHECKDB", e.CheckDB, secs(2097152.0/200))
	near(t, "total", e.Total, e.Backup+e.Copy+e.Restore+e.CheckDB)
}

func TestPlanCycleAutoStripesRotationAndOverrides(t *testing.T) {
	a := DefaultAssumptions()
	a.Cores, a.NICMBps, a.DataLUNs, a.InstantFileInit = 16, 50, 4, true
	p, err := PlanCycle(loadSite(t), PlanRequest{Database: "Inventory", SizeBytes: 100 << 30, LastServer: "bak02", Sequence: 42, Assumptions: a})
	if err != nil {
		t.Fatal(err)
	}
	// Rotation [bak02, bak01], last bak02 -> bak01.
	if p.Primary != "bak01" || p.Remote != "bak02" {
		t.Errorf("primary %s remote %s", p.Primary, p.Remote)
	}
	// 100 GiB is large: 4 per NIC x 2 NICs = 8 divides 16 cores; the cycle
	// itself (no size, no cores) picks 2 per NIC.
	if p.Stripes != 8 || !p.StripesAuto || p.CycleStripes != 4 {
		t.Errorf("stripes %d auto %v cycle %d", p.Stripes, p.StripesAuto, p.CycleStripes)
	}
	if p.Layout[7].Name != "sql01@Inventory~758f487f_00000042_8of8.bak" {
		t.Errorf("last stripe %s", p.Layout[7].Name)
	}
	if p.Assumptions.CompressionFactor != 1 {
		t.Errorf("compression: false gives factor %v", p.Assumptions.CompressionFactor)
	}
	e := p.Estimate
	// backup: min(data read 4x200, network 2x50) = 100 MB/s over 102400 MiB.
	near(t, "backup", e.Backup, secs(1024))
	if e.BackupRate.Bottleneck != "network" {
		t.Errorf("bottleneck %q", e.BackupRate.Bottleneck)
	}
	// restore: min(data write 4x200 / 1, backup LUN read 200) = 200.
	near(t, "restore", e.Restore, secs(512))
	near(t, "CHECKDB", e.CheckDB, secs(102400.0/800))
}

func TestPlanCycleErrors(t *testing.T) {
	cfg := loadSite(t)
	if _, err := PlanCycle(cfg, PlanRequest{Database: "Nope", Assumptions: DefaultAssumptions()}); err == nil ||
		!strings.Contains(err.Error(), `database "Nope" is not configured`) || !strings.Contains(err.Error(), "sql01/Sales") {
		t.Errorf("unknown database: %v", err)
	}
	a := DefaultAssumptions()
	a.CopyMBps = 0
	if _, err := PlanCycle(cfg, PlanRequest{Database: "Sales", SizeBytes: 1 << 30, Assumptions: a}); err == nil || !strings.Contains(err.Error(), "copy throughput 0 MB/s") {
		t.Errorf("zero copy throughput: %v", err)
	}
	// Without a size there is a plan but no estimate.
	p, err := PlanCycle(cfg, PlanRequest{Database: "Sales", Assumptions: DefaultAssumptions()})
	if err != nil || p.Estimate != nil || p.Stripes != 8 {
		t.Errorf("no size: %+v, %v", p.Estimate, err)
	}
}

// timedManifest is a verified, compressed set of (sql01, Sales): 8 GiB of
// data in 2 GiB of files, backed up in 80 s (102.4 MB/s), copied in 40 s
// (51.2 MB/s), restored in 160 s (51.2 MB/s); CHECKDB 3 s, too short to
// measure.
func timedManifest(t *testing.T, seq int64) *catalog.Manifest {
	t.Helper()
	taken := time.Date(2026, 11, 20, 22, 0, 0, 0, time.UTC).Add(time.Duration(seq) * time.Hour)
	m := catalog.New("sql01", "Sales", seq, taken)
	m.Options = catalog.Options{Compression: true, Checksum: true, Stripes: 1}
	m.Stripes = []catalog.Stripe{{Name: m.StripeFileName(1, 1), Size: 2 << 30}}
	m.Header = &catalog.Header{FirstLSN: "1", LastLSN: "2", BackupFinish: taken, BackupSize: 8 << 30, CompressedBackupSize: 2 << 30}
	at := taken
	for _, s := range []struct {
		step catalog.Step
		d    time.Duration
	}{{catalog.StepBackup, 80 * time.Second}, {catalog.StepCopy, 40 * time.Second}, {catalog.StepRestore, 160 * time.Second}, {catalog.StepCheckDB, 3 * time.Second}} {
		if err := m.SetTiming(s.step, at, at.Add(s.d)); err != nil {
			t.Fatal(err)
		}
		at = at.Add(s.d)
	}
	for _, s := range []catalog.State{catalog.StateCopied, catalog.StateRestored, catalog.StateChecked, catalog.StateVerified} {
		if err := m.Advance(s, at); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// MeasuredThroughput reads the database's manifests on the servers it can
// open and says which it could not; PlanCycle estimates the measured steps
// from their rates and the others from the assumptions, and says which.
func TestPlanCycleWithMeasuredThroughput(t *testing.T) {
	cfg := loadSite(t)
	dir := t.TempDir()
	m := timedManifest(t, 5)
	data, err := catalog.Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, m.FileName()), data, 0o600); err != nil {
		t.Fatal(err)
	}
	open := func(ctx context.Context, srv *config.BackupServer) (storage.Storage, error) {
		if srv.Name == "bak02" {
			return nil, errors.New("connection refused")
		}
		return local.Open(ctx, dir)
	}
	got, err := MeasuredThroughput(context.Background(), cfg, "", "Sales", open)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Read) != 1 || got.Read[0] != "bak01" || !strings.Contains(got.Unread["bak02"], "connection refused") {
		t.Errorf("read %v unread %v, want bak01 read and bak02 with its error", got.Read, got.Unread)
	}
	mt := got.Throughput
	if mt.Backup.MBps != 102.4 || mt.Backup.Sequence != 5 || mt.Copy.MBps != 51.2 || mt.Restore.MBps != 51.2 || mt.CheckDB.Measured() || mt.CompressionFactor != 4 {
		t.Fatalf("measured %+v, want backup 102.4, copy and restore 51.2 MB/s of set 5, CHECKDB unmeasured, factor 4", mt)
	}
	if _, err := MeasuredThroughput(context.Background(), cfg, "", "Nope", open); err == nil {
		t.Error("an unknown database measured something")
	}

	// A calibration report beside the manifests gives the backup rate.
	rep := calibrate.Report{Instance: m.SourceInstance, Database: "Sales", Server: "bak01", NICs: 2, Compression: true, Finished: time.Now().UTC(),
		Proposed: &calibrate.Result{Point: calibrate.Point{Stripes: 8}, MBps: 400, Seconds: 90}}
	if data, err = json.Marshal(rep); err != nil {
		t.Fatal(err)
	}
	cal := filepath.Join(dir, tsql.CalibrationReportName(m.SourceInstance, "Sales"))
	if err := os.WriteFile(cal, data, 0o600); err != nil {
		t.Fatal(err)
	}
	withCal, err := MeasuredThroughput(context.Background(), cfg, "", "Sales", open)
	if err != nil {
		t.Fatal(err)
	}
	if b := withCal.Throughput.Backup; b.Source != plan.SourceCalibration || b.MBps != 400 || b.Settings.Stripes != 8 {
		t.Errorf("backup rate %+v, want the calibration's 400 MB/s at 8 stripes", b)
	}
	if err := os.Remove(cal); err != nil {
		t.Fatal(err)
	}

	p, err := PlanCycle(cfg, PlanRequest{Database: "Sales", SizeBytes: 2 << 40, Assumptions: DefaultAssumptions(), Measured: mt})
	if err != nil {
		t.Fatal(err)
	}
	e, r := p.Estimate, p.Rates
	near(t, "backup", e.Backup, secs(2097152.0/102.4))
	near(t, "copy", e.Copy, secs(2097152.0/4/51.2))
	near(t, "restore", e.Restore, secs(2097152.0/51.2))
	near(t, "CHECKDB", e.CheckDB, secs(2097152.0/200)) // the data LUN read flag
	if r.Backup.Source != plan.SourceCycle || r.Copy.Source != plan.SourceCycle || r.Restore.Source != plan.SourceCycle ||
		r.CheckDB.Source != plan.SourceAssumed || r.CheckDB.MBps != 200 {
		t.Errorf("rates %+v, want backup, copy, restore measured and CHECKDB assumed at 200 MB/s", r)
	}
}
