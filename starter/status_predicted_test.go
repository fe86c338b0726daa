package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/status"
)

// sizedSet writes the manifest of a verified, uncompressed set of (sql01,
// db) of data bytes, taken `ago` before now, with the given restore and
// CHECKDB times, into each dir.
func sizedSet(t *testing.T, db string, seq int64, ago time.Duration, data int64, restore, checkdb time.Duration, dirs ...string) {
	t.Helper()
	timedSet(t, db, seq, ago, data, map[catalog.Step]time.Duration{catalog.StepRestore: restore, catalog.StepCheckDB: checkdb}, dirs...)
}

// status --from-manifests --database D shows the last verified set's
// measured time to recover and, beside it, the plan's prediction: from the
// sets before it where they measured a step, else from the assumed site.
func TestStatusShowsPredictedBesideMeasured(t *testing.T) {
	file, bak01, bak02 := provenSite(t, "  - {name: Sales, instance: sql01, backup_servers: [bak01, bak02]}\n")
	// Set 1 restored 10 GiB in 800 s (12.8 MB/s) and checked it in 400 s
	// (25.6 MB/s); set 2 took 15 min + 10 min.
	sizedSet(t, "Sales", 1, 26*time.Hour, 10<<30, 800*time.Second, 400*time.Second, bak01, bak02)
	sizedSet(t, "Sales", 2, 2*time.Hour, 10<<30, 15*time.Minute, 10*time.Minute, bak02, bak01)

	code, out, errs := runStarter(t, "status", "--config", file, "--from-manifests", "--database", "Sales")
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	want := "recover 25m (restore 15m + CHECKDB 10m); predicted 20m (restore 13m20s at 13 MB/s measured on set 1 + CHECKDB 6m40s at 26 MB/s measured on set 1)"
	if !strings.Contains(out, want) {
		t.Errorf("status does not show measured and predicted side by side:\n%s\nwant %q", out, want)
	}

	code, out, errs = runStarter(t, "status", "--config", file, "--from-manifests", "--database", "Sales", "--json")
	if code != exitOK {
		t.Fatalf("json: exit %d\n%s%s", code, out, errs)
	}
	checkJSONStyle(t, "status --from-manifests --json", out)
	var r status.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	v := r.Databases[0].LastVerified
	if v == nil || v.Predicted == nil || time.Duration(v.TimeToRecover) != 25*time.Minute ||
		time.Duration(v.Predicted.TimeToRecover) != 20*time.Minute || v.Predicted.RestoreRate.Sequence != 1 {
		t.Fatalf("JSON last verified %+v, want measured 25m and predicted 20m from set 1", v)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(out)); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"predicted":{`, `"time_to_recover_seconds":1200`, `"source":"cycle"`, `"measured_at":"`} {
		if !strings.Contains(compact.String(), key) {
			t.Errorf("JSON lacks %s:\n%s", key, out)
		}
	}

	// One set only: the prediction is the assumed site's.
	file, bak01, _ = provenSite(t, "  - {name: Sales, instance: sql01, backup_servers: [bak01, bak02]}\n")
	sizedSet(t, "Sales", 1, time.Hour, 10<<30, 800*time.Second, 400*time.Second, bak01)
	_, out, _ = runStarter(t, "status", "--config", file, "--from-manifests", "--database", "Sales")
	if want := "predicted 2m34s (restore 1m42s at 100 MB/s assumed + CHECKDB 51s at 200 MB/s assumed)"; !strings.Contains(out, want) {
		t.Errorf("status of a first set:\n%s\nwant %q", out, want)
	}
}
