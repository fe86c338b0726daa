package chart

import (
	"encoding/xml"
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/evidence"
)

// The page names each database (escaped), draws a chart of every proof of
// the period as well-formed SVG, and marks a drill that missed its RTO.
func TestHTML(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 2, 0, 0, 0, time.UTC)
	var recs []evidence.Record
	for i := 0; i < 5; i++ {
		at := t0.Add(time.Duration(i) * 24 * time.Hour)
		recs = append(recs, evidence.Record{Kind: evidence.KindSet, Server: "bak01", Instance: "sql01", Database: "<Sales>", At: at.Add(10 * time.Minute),
			RecoveryPoint: at, Set: &evidence.Set{Sequence: int64(i + 1)}})
	}
	recs = append(recs, evidence.Record{Kind: evidence.KindDrill, Server: "bak01", Instance: "sql01", Database: "<Sales>", At: t0.Add(50 * time.Hour),
		RecoveryPoint: t0.Add(49 * time.Hour), WorkflowID: "drill/sql01/Sales", RunID: "r1",
		Drill: &evidence.Drill{Passed: true, RTOSeconds: 5400, TargetRTOSeconds: 3600}})
	rep := evidence.Summarize(recs, t0, t0.Add(7*24*time.Hour))
	if d := rep.Databases[0]; d.Sets != 5 || len(d.DrillResults) != 1 || d.MissedRTO != 1 || len(d.Points) != 6 {
		t.Fatalf("summary %+v", d)
	}
	page, err := HTML(rep)
	if err != nil {
		t.Fatal(err)
	}
	s := string(page)
	if strings.Contains(s, "<Sales>") || !strings.Contains(s, "sql01/&lt;Sales&gt;") || !strings.Contains(s, `class="bad">missed`) {
		t.Errorf("page:\n%s", s)
	}
	svg, err := SVG(rep.Databases[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal(svg, new(struct{})); err != nil || !strings.HasPrefix(string(svg), "<svg") || !strings.Contains(s, string(svg)) {
		t.Errorf("chart is not one well-formed <svg> in the page: %v", err)
	}
}
