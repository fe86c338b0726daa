package client

import (
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/config"
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
	if p.Layout[0].Path != `\\192.168.2.2\backup\sql01@Sales_00000001_1of8.bak` || p.Layout[1].Path != `\\192.168.3.2\backup\sql01@Sales_00000001_2of8.bak` {
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
	if p.Layout[7].Name != "sql01@Inventory_00000042_8of8.bak" {
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
