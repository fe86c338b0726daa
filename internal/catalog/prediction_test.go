package catalog

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A drill record written before drills recorded their prediction (the
// golden file, signed then) still decodes and verifies: every field added
// since is optional, and left out of the signed bytes when empty.
func TestDrillRecordWithoutPredictionStillVerifies(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "drill-v1.json"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := DecodeDrill(data, testKeys(t, "k1"))
	if err != nil || !r.Trusted() {
		t.Fatalf("an old drill record: %v, trusted %v", err, r != nil && r.Trusted())
	}
	d := r.Last()
	if d.Predicted != nil || d.PredictionError != nil || d.LogBytes != 0 || d.LogFastest != 0 || d.Steps.Diff != 0 || d.Steps.Logs != 20*time.Second {
		t.Errorf("old drill read as %+v", d)
	}
}

// Each predicted step beside the measured one: the error measured -
// predicted and the ratio measured / predicted; the differential only when
// one was predicted or restored, CHECKDB only when it ran; the restore the
// compared steps together. A new record with them round-trips signed.
func TestPredictionErrors(t *testing.T) {
	p := &RecoveryPrediction{Full: 10 * time.Second, Logs: 2 * time.Second, LogCount: 500, Recovery: time.Second, CheckDB: 4 * time.Second}
	steps := DrillStepTimes{Full: 12 * time.Second, Logs: 20 * time.Second, Recovery: time.Second, Checks: 3 * time.Second}
	errs := PredictionErrors(p, steps, true)
	want := []StepError{
		{Step: PredictFull, Predicted: 10 * time.Second, Measured: 12 * time.Second, Error: 2 * time.Second, Ratio: 1.2},
		{Step: PredictLogs, Predicted: 2 * time.Second, Measured: 20 * time.Second, Error: 18 * time.Second, Ratio: 10},
		{Step: PredictRecovery, Predicted: time.Second, Measured: time.Second, Ratio: 1},
		{Step: PredictCheckDB, Predicted: 4 * time.Second, Measured: 3 * time.Second, Error: -time.Second, Ratio: 0.75},
		{Step: PredictRestore, Predicted: 13 * time.Second, Measured: 33 * time.Second, Error: 20 * time.Second, Ratio: 33.0 / 13},
	}
	if len(errs) != len(want) {
		t.Fatalf("errors %+v", errs)
	}
	for i := range want {
		if g, w := errs[i], want[i]; g.Step != w.Step || g.Predicted != w.Predicted || g.Measured != w.Measured || g.Error != w.Error ||
			g.Ratio < w.Ratio-1e-9 || g.Ratio > w.Ratio+1e-9 {
			t.Errorf("step %d: %+v, want %+v", i, g, w)
		}
	}
	if e, ok := ErrorOf(PredictionErrors(p, steps, false), PredictCheckDB); ok {
		t.Errorf("CHECKDB compared though it did not run: %+v", e)
	}
	steps.Diff = 5 * time.Second
	if e, ok := ErrorOf(PredictionErrors(p, steps, false), PredictDiff); !ok || e.Predicted != 0 || e.Ratio != 0 || e.Error != 5*time.Second {
		t.Errorf("a differential restored, none predicted: %+v %v", e, ok)
	}
	if PredictionErrors(nil, steps, true) != nil {
		t.Error("errors without a prediction")
	}

	keys := testKeys(t, "k1")
	at := time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)
	r := NewDrillRecord("sql01", "Sales", at)
	r.Add(DrillResult{WorkflowID: "drill/sql01/Sales", RunID: "r", Instance: "sqlverify", Database: "Sales_drill", Point: "latest",
		Steps: steps, LogBytes: 1 << 20, LogFastest: 30 * time.Millisecond, Predicted: p, PredictionError: errs,
		Outcome: DrillPassed, StartedAt: at, At: at.Add(time.Minute)})
	b, err := EncodeDrill(r, keys)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeDrill(b, keys)
	if err != nil || !got.Trusted() || *got.Last().Predicted != *p || len(got.Last().PredictionError) != len(errs) || got.Last().LogFastest != 30*time.Millisecond {
		t.Fatalf("round trip: %v, %+v", err, got)
	}
	r.Drills[0].Predicted = &RecoveryPrediction{Logs: -time.Second}
	if _, err := EncodeDrill(r, keys); err == nil {
		t.Error("a negative prediction was accepted")
	}
}
