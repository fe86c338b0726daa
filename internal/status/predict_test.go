package status

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/plan"
)

// sized gives a verified manifest its RESTORE HEADERONLY size.
func sized(m *catalog.Manifest, data int64) *catalog.Manifest {
	m.Header = &catalog.Header{FirstLSN: "1", LastLSN: "2", BackupFinish: m.CreatedAt, BackupSize: data, CompressedBackupSize: data}
	return m
}

// The last verified set's time to recover is shown measured and predicted:
// predicted from the rates of the sets before it, or from the site the
// timeouts assume for a step never measured.
func TestPredictedBesideMeasuredTimeToRecover(t *testing.T) {
	const gib = int64(1) << 30
	target := []Target{{Instance: "sql01", Database: "Sales", Objectives: def}}
	last := sized(verified(t, "sql01", "Sales", 42, now.Add(-5*time.Hour), 20*time.Minute, 5*time.Minute), 10*gib)

	// Nothing before it: both steps on the assumed site, uncompressed
	// (restore: data LUN write 200 MB/s, zeroed first = 100 MB/s; CHECKDB:
	// data LUN read 200 MB/s).
	d := find(t, Summarize(now, target, def, []Found{{Server: "bak01", Manifest: last}}), "sql01", "Sales")
	p := d.LastVerified.Predicted
	if p == nil || p.SizeBytes != 10*gib || time.Duration(p.Restore) != 102400*time.Millisecond || time.Duration(p.CheckDB) != 51200*time.Millisecond ||
		p.TimeToRecover != p.Restore+p.CheckDB || p.RestoreRate.Source != plan.SourceAssumed || p.CheckDBRate.Source != plan.SourceAssumed {
		t.Fatalf("prediction without history: %+v, want 102.4 s + 51.2 s on the assumed site", p)
	}
	if time.Duration(d.LastVerified.TimeToRecover) != 25*time.Minute {
		t.Errorf("measured time to recover %v, want 25m", d.LastVerified.TimeToRecover)
	}

	// An earlier set restored 10 GiB in 800 s (12.8 MB/s); its 5 s CHECKDB
	// is too short to measure. The last set's own times are not used to
	// predict it, nor a later set's.
	earlier := sized(verified(t, "sql01", "Sales", 41, now.Add(-29*time.Hour), 800*time.Second, 5*time.Second), 10*gib)
	failedLater := failed(t, "sql01", "Sales", 43, now.Add(-time.Hour), catalog.StepCheckDB, catalog.EvidenceCheckDBFailed)
	d = find(t, Summarize(now, target, def, []Found{{Server: "bak01", Manifest: last}, {Server: "bak02", Manifest: earlier},
		{Server: "bak01", Manifest: failedLater}}), "sql01", "Sales")
	p = d.LastVerified.Predicted
	if p == nil || time.Duration(p.Restore) != 800*time.Second || p.RestoreRate.Source != plan.SourceCycle || p.RestoreRate.Sequence != 41 ||
		time.Duration(p.CheckDB) != 51200*time.Millisecond || p.CheckDBRate.Source != plan.SourceAssumed {
		t.Fatalf("prediction from set 41: %+v, want the restore at set 41's 12.8 MB/s (800 s) and CHECKDB assumed", p)
	}
	data, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"time_to_recover_seconds":1500`, `"predicted":{"size_bytes":10737418240,"restore_seconds":800,"checkdb_seconds":51.2,"time_to_recover_seconds":851.2`,
		`"restore_rate":{"mbps":12.8,"source":"cycle","sequence":41`, `"checkdb_rate":{"mbps":200,"source":"assumed"}`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("JSON %s\nlacks %s", data, want)
		}
	}

	// No size in the manifest: no prediction.
	last.Header = nil
	if d := find(t, Summarize(now, target, def, []Found{{Server: "bak01", Manifest: last}}), "sql01", "Sales"); d.LastVerified.Predicted != nil {
		t.Errorf("prediction without a size: %+v", d.LastVerified.Predicted)
	}
}
