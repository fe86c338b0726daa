// Package chart draws a calibration report as a PNG (gonum/plot). It is
// apart from package calibrate so that the worker, which runs the
// calibration, does not link a plotting library and its fonts: the starter
// draws the chart.
package chart

import (
	"bytes"
	"fmt"
	"image/color"

	"github.com/backupcycle/backupcycle/internal/calibrate"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// phaseColors tell the phases apart in the chart.
var phaseColors = map[string]color.RGBA{
	calibrate.PhaseStripes:      {R: 0x2b, G: 0x6c, B: 0xb0, A: 0xff},
	calibrate.PhaseTransferSize: {R: 0x2e, G: 0x9e, B: 0x5b, A: 0xff},
	calibrate.PhaseBuffers:      {R: 0xd9, G: 0x7b, B: 0x21, A: 0xff},
}

// PNG draws the report: MB/s of every setting run, one bar each
// in the order they ran, coloured by phase, with the read speed (the backup
// to NUL) as a line no setting can pass.
func PNG(r *calibrate.Report) ([]byte, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("BACKUP throughput of %s on %s (%d NIC paths)", r.Database, r.Server, r.NICs)
	p.Y.Label.Text = "MB/s (SQL Server's 3014 message)"
	p.Y.Min = 0
	var labels []string
	n := 0
	for _, res := range r.Results {
		if !res.Null {
			n++
		}
	}
	if n == 0 {
		return nil, fmt.Errorf("calibration chart of %s: no setting was measured", r.Database)
	}
	for _, phase := range []string{calibrate.PhaseStripes, calibrate.PhaseTransferSize, calibrate.PhaseBuffers} {
		vals := make(plotter.Values, n)
		has := false
		j := 0
		for _, res := range r.Results {
			if res.Null {
				continue
			}
			if res.Phase == phase {
				vals[j], has = res.MBps, true
			}
			j++
		}
		if !has {
			continue
		}
		bars, err := plotter.NewBarChart(vals, vg.Points(14))
		if err != nil {
			return nil, fmt.Errorf("calibration chart: %w", err)
		}
		bars.Color = phaseColors[phase]
		bars.LineStyle.Width = 0
		p.Add(bars)
		p.Legend.Add(phase, bars)
	}
	for _, res := range r.Results {
		if !res.Null {
			labels = append(labels, shortLabel(res.Point))
		}
	}
	p.NominalX(labels...)
	p.X.Tick.Label.Rotation = 0.6
	p.X.Tick.Label.XAlign = -0.9
	if r.ReadMBps > 0 {
		read := r.ReadMBps
		line := plotter.NewFunction(func(float64) float64 { return read })
		line.Color = color.RGBA{R: 0xb0, G: 0x20, B: 0x20, A: 0xff}
		line.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		line.XMin, line.XMax = -0.5, float64(n)-0.5
		p.Add(line)
		p.Legend.Add(fmt.Sprintf("read speed (NUL) %.0f MB/s", read), line)
		p.Y.Max = max(p.Y.Max, read*1.1)
	}
	p.Legend.Top = true
	w, err := p.WriterTo(vg.Points(float64(max(480, 60*n))), vg.Points(360), "png")
	if err != nil {
		return nil, fmt.Errorf("calibration chart: %w", err)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("calibration chart: %w", err)
	}
	return buf.Bytes(), nil
}

// shortLabel names a point on the chart's axis: "8f 4M b64".
func shortLabel(p calibrate.Point) string {
	s := fmt.Sprintf("%df", p.Stripes)
	if p.MaxTransferSize > 0 {
		s += fmt.Sprintf(" %dK", p.MaxTransferSize>>10)
	}
	if p.BufferCount > 0 {
		s += fmt.Sprintf(" b%d", p.BufferCount)
	}
	return s
}
