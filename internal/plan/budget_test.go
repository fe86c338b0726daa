package plan

import (
	"strings"
	"testing"
	"time"
)

const gb = int64(1) << 30

func budgetFor(t *testing.T, size int64, nics int, compressed bool, o Overrides) Budget {
	t.Helper()
	est, err := SiteEstimate(size, nics, nics, compressed, 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Timeouts(size, est, o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A 4 TB database over one 1 GbE NIC path takes hours per step: its steps
// must not be stopped at the 12 h the workflow used to allow, and every
// bound leaves room for the expected duration.
func TestTimeoutsOfALargeDatabaseOn1Gbps(t *testing.T) {
	for _, compressed := range []bool{true, false} {
		b := budgetFor(t, 4*tb, 1, compressed, Overrides{})
		t.Logf("4 TiB, 1 NIC, compressed %v: expected backup %v copy %v restore %v checkdb %v; timeouts backup %v/%v restore %v/%v checkdb %v/%v copy %v",
			compressed, b.Expected.Backup.Round(time.Minute), b.Expected.Copy.Round(time.Minute), b.Expected.Restore.Round(time.Minute),
			b.Expected.CheckDB.Round(time.Minute), b.Backup.StartToClose.Round(time.Minute), b.Backup.ScheduleToClose.Round(time.Minute),
			b.Restore.StartToClose.Round(time.Minute), b.Restore.ScheduleToClose.Round(time.Minute),
			b.CheckDB.StartToClose.Round(time.Minute), b.CheckDB.ScheduleToClose.Round(time.Minute), b.Copy.StartToClose.Round(time.Minute))
		for name, s := range map[string]Step{"backup": b.Backup, "restore": b.Restore, "checkdb": b.CheckDB} {
			if s.StartToClose <= 12*time.Hour {
				t.Errorf("compressed %v: %s StartToClose %v, want above 12 h for 4 TiB on 1 Gbps", compressed, name, s.StartToClose)
			}
			if s.ScheduleToClose < s.StartToClose {
				t.Errorf("%s: ScheduleToClose %v below StartToClose %v", name, s.ScheduleToClose, s.StartToClose)
			}
		}
		if b.Backup.StartToClose < SafetyFactor*b.Expected.Backup || b.Restore.StartToClose < SafetyFactor*b.Expected.Restore {
			t.Errorf("timeouts below %d x expected: %+v", SafetyFactor, b)
		}
		if b.Copy.StartToClose != b.Copy.ScheduleToClose || b.Copy.StartToClose < SafetyFactor*b.Expected.Copy+CopyWaitFloor {
			t.Errorf("copy deadline %+v, want one bound of %d x %v + %v", b.Copy, SafetyFactor, b.Expected.Copy, CopyWaitFloor)
		}
		if b.Heartbeat != DefaultHeartbeat || b.Heartbeat < 3*time.Minute || b.Heartbeat > 5*time.Minute {
			t.Errorf("heartbeat %v, want the default %v (3-5 min)", b.Heartbeat, DefaultHeartbeat)
		}
	}
	// The network alone at 1 Gbps (125 MB/s decimal = 119.2 MiB/s) with
	// disks that never limit: still far above 12 h for the backup.
	fast := Hardware{NICMBps: 1e9 / 8 / MiB, NICs: 1, BackupLUNReadMBps: 2000, BackupLUNWriteMBps: 2000, BackupLUNs: 1,
		DataLUNReadMBps: 2000, DataLUNWriteMBps: 2000, DataLUNs: 1}
	est, err := CycleTime(Cycle{Source: fast, Remote: fast, CopyMBps: 1e9 / 8 / MiB, Workload: Workload{DataBytes: 4 * tb}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Timeouts(4*tb, est, Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if est.Backup < 9*time.Hour || b.Backup.StartToClose <= 12*time.Hour {
		t.Errorf("4 TiB over 1 Gbps: expected backup %v, timeout %v; want about 9.8 h and a timeout above 12 h", est.Backup, b.Backup.StartToClose)
	}
}

// A 10 GB database gets timeouts of about the floor: a stuck step is
// noticed within the hour, not after half a day.
func TestTimeoutsOfASmallDatabaseAreModest(t *testing.T) {
	b := budgetFor(t, 10*gb, 2, true, Overrides{})
	for name, s := range map[string]Step{"backup": b.Backup, "restore": b.Restore, "checkdb": b.CheckDB} {
		if s.StartToClose < TimeoutFloor || s.StartToClose > time.Hour {
			t.Errorf("%s StartToClose %v, want between the floor %v and 1 h for 10 GiB", name, s.StartToClose, TimeoutFloor)
		}
		if s.ScheduleToClose > 2*time.Hour {
			t.Errorf("%s ScheduleToClose %v, want at most 2 h for 10 GiB", name, s.ScheduleToClose)
		}
	}
	if b.Copy.StartToClose > 3*time.Hour {
		t.Errorf("copy deadline %v, want about %v for 10 GiB", b.Copy.StartToClose, CopyWaitFloor)
	}
	big := budgetFor(t, 4*tb, 2, true, Overrides{})
	if !(big.Restore.StartToClose > 10*b.Restore.StartToClose) {
		t.Errorf("restore timeout of 4 TiB %v not well above 10 GiB's %v: not derived from the size", big.Restore.StartToClose, b.Restore.StartToClose)
	}
}

// Configured values win over the derived ones; the retry bound still adds
// room for one more attempt.
func TestTimeoutOverridesWin(t *testing.T) {
	o := Overrides{Backup: 2 * time.Hour, Restore: 3 * time.Hour, CheckDB: 4 * time.Hour, CopyDeadline: 5 * time.Hour, Heartbeat: 90 * time.Second}
	b := budgetFor(t, 4*tb, 1, true, o)
	if b.Backup.StartToClose != o.Backup || b.Restore.StartToClose != o.Restore || b.CheckDB.StartToClose != o.CheckDB ||
		b.Copy.StartToClose != o.CopyDeadline || b.Copy.ScheduleToClose != o.CopyDeadline || b.Heartbeat != o.Heartbeat {
		t.Errorf("overrides %+v not taken: %+v", o, b)
	}
	if b.Backup.ScheduleToClose != o.Backup+b.Expected.Backup {
		t.Errorf("backup ScheduleToClose %v, want the override %v + expected %v", b.Backup.ScheduleToClose, o.Backup, b.Expected.Backup)
	}
	if _, err := Timeouts(gb, CycleEstimate{}, Overrides{Restore: -time.Minute}); err == nil || !strings.Contains(err.Error(), "restore_timeout") {
		t.Errorf("negative restore_timeout: %v, want an error naming it", err)
	}
}

func TestCompressionSupportedByEdition(t *testing.T) {
	for _, tc := range []struct {
		engine           int
		edition          string
		supported, known bool
	}{
		{3, "Enterprise Edition: Core-based Licensing (64-bit)", true, true},
		{3, "Developer Edition (64-bit)", true, true},
		{2, "Standard Edition (64-bit)", true, true},
		{2, "Web Edition (64-bit)", false, true},
		{4, "Express Edition (64-bit)", false, true},
		{4, "Express Edition with Advanced Services (64-bit)", false, true},
		{0, "", true, false},
	} {
		s, k := CompressionSupported(tc.engine, tc.edition)
		if s != tc.supported || k != tc.known {
			t.Errorf("CompressionSupported(%d, %q) = %v, %v; want %v, %v", tc.engine, tc.edition, s, k, tc.supported, tc.known)
		}
	}
}
