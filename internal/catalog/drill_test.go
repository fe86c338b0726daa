package catalog

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// A drill record round-trips signed; a changed byte, or a chain record's
// signature purpose, does not verify; the newest MaxDrills are kept.
func TestDrillRecordSignedAndBounded(t *testing.T) {
	keys := testKeys(t, "k1")
	at := time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)
	r := NewDrillRecord("sql01", "Sales", at)
	r.Scratch = &VerifyCopy{VerifyInstance: "sqlverify", VerifyDatabase: "Sales_drill", InstanceTime: at}
	for i := range MaxDrills + 3 {
		r.Add(DrillResult{WorkflowID: "drill/sql01/Sales", RunID: string(rune('a' + i)), Instance: "sqlverify", Database: "Sales_drill",
			Point: "latest", RTO: time.Duration(i) * time.Second, Outcome: DrillPassed, StartedAt: at, At: at.Add(time.Minute)})
	}
	if len(r.Drills) != MaxDrills || r.Last().RTO != time.Duration(MaxDrills+2)*time.Second {
		t.Fatalf("kept %d drills, last %+v", len(r.Drills), r.Last())
	}
	b, err := EncodeDrill(r, keys)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeDrill(b, keys)
	if err != nil || !got.Trusted() || got.Last().RunID != r.Last().RunID {
		t.Fatalf("decode: %v, trusted %v", err, got != nil && got.Trusted())
	}
	tampered := bytes.Replace(b, []byte(`"rto": 32000000000`), []byte(`"rto": 1000000000`), 1)
	if bytes.Equal(tampered, b) {
		t.Fatal("the test did not change the record")
	}
	if got, err := DecodeDrill(tampered, keys); err != nil || got.Trusted() {
		t.Errorf("a changed rto: %v, trusted %v", err, got != nil && got.Trusted())
	}
	// A signature made for another purpose does not verify a drill record.
	body := *r
	body.Signature = nil
	plain, _ := marshalRecord[DrillRecord](&body, drillKind)
	body.Signature = keys.Sign(purposeLogProof, plain)
	forged, _ := marshalRecord[DrillRecord](&body, drillKind)
	if got, err := DecodeDrill(forged, keys); err != nil || got.Trusted() {
		t.Errorf("a proof record's signature: %v, trusted %v", err, got != nil && got.Trusted())
	}
	r.Drills[0].Outcome = "maybe"
	if _, err := EncodeDrill(r, keys); err == nil || !strings.Contains(err.Error(), `outcome "maybe"`) {
		t.Errorf("a bad outcome: %v", err)
	}
}
