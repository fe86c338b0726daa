package chart

import (
	"bytes"
	"image/png"
	"testing"

	"github.com/backupcycle/backupcycle/internal/calibrate"
)

func TestChartIsAPNG(t *testing.T) {
	e, _ := calibrate.NewExplorer(calibrate.DefaultGrid(4), 0, 1, 4)
	for {
		p, _, ok := e.Next()
		if !ok {
			break
		}
		e.Record(calibrate.Result{Point: p, MBps: 30 * float64(p.Stripes), Seconds: 60})
	}
	rep := calibrate.Report{Database: "Sales", Server: "bak01", NICs: 4}
	rep.Finish(e)
	b, err := PNG(&rep)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("chart is not a PNG: %v", err)
	}
	if w := img.Bounds().Dx(); w < 480 {
		t.Errorf("chart %d px wide", w)
	}
	if _, err := PNG(&calibrate.Report{Database: "x"}); err == nil {
		t.Error("a chart of nothing measured should fail")
	}
}
