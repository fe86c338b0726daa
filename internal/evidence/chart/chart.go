// Package chart renders an evidence report (evidence.Report) as an HTML
// page with a chart per database of the proven recovery point over time
// (gonum/plot, as SVG). Apart from package evidence so that the worker,
// which appends records, links no plotting library: the starter renders.
package chart

import (
	"bytes"
	"fmt"
	"html/template"
	"image/color"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/backupcycle/backupcycle/internal/evidence"
)

// kindColors tell the proofs apart on a chart.
var kindColors = map[evidence.Kind]color.RGBA{
	evidence.KindSet:      {R: 0x2b, G: 0x6c, B: 0xb0, A: 0xff},
	evidence.KindLogProof: {R: 0x2e, G: 0x9e, B: 0x5b, A: 0xff},
	evidence.KindDrill:    {R: 0xd9, G: 0x7b, B: 0x21, A: 0xff},
}

const timeFormat = "2006-01-02 15:04 UTC"

// SVG draws one database's proven recovery point (y) at each proof (x): a
// step line, since what was proven stays proven until the next proof,
// with each proof a dot coloured by its kind. nil when the period holds
// no proof.
func SVG(d evidence.DatabaseReport) ([]byte, error) {
	if len(d.Points) == 0 {
		return nil, nil
	}
	p := plot.New()
	// No name goes into the drawing: the page names the database,
	// escaped, above it.
	p.Title.Text = "Proven recovery point"
	p.X.Label.Text = "when proven (UTC)"
	p.Y.Label.Text = "restorable up to (UTC)"
	p.X.Tick.Marker = plot.TimeTicks{Format: "01-02\n15:04"}
	p.Y.Tick.Marker = plot.TimeTicks{Format: "01-02 15:04"}
	xy := make(plotter.XYs, len(d.Points))
	for i, pt := range d.Points {
		xy[i].X, xy[i].Y = unix(pt.At), unix(pt.RecoveryPoint)
	}
	line, err := plotter.NewLine(xy)
	if err != nil {
		return nil, fmt.Errorf("evidence chart of %s: %w", d.Database, err)
	}
	line.StepStyle = plotter.PostStep
	line.Color = color.RGBA{R: 0x70, G: 0x70, B: 0x70, A: 0xff}
	p.Add(line)
	for _, kind := range []evidence.Kind{evidence.KindSet, evidence.KindLogProof, evidence.KindDrill} {
		var pts plotter.XYs
		for _, pt := range d.Points {
			if pt.Kind == kind {
				pts = append(pts, plotter.XY{X: unix(pt.At), Y: unix(pt.RecoveryPoint)})
			}
		}
		if len(pts) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(pts)
		if err != nil {
			return nil, fmt.Errorf("evidence chart of %s: %w", d.Database, err)
		}
		sc.Color = kindColors[kind]
		sc.Shape = draw.CircleGlyph{}
		sc.Radius = vg.Points(3)
		p.Add(sc)
		p.Legend.Add(string(kind), sc)
	}
	p.Legend.Top, p.Legend.Left = true, true
	w, err := p.WriterTo(vg.Points(640), vg.Points(320), "svg")
	if err != nil {
		return nil, fmt.Errorf("evidence chart of %s: %w", d.Database, err)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("evidence chart of %s: %w", d.Database, err)
	}
	// Inline in the page: the <svg> element, without the XML prolog.
	b := buf.Bytes()
	if i := bytes.Index(b, []byte("<svg")); i > 0 {
		b = b[i:]
	}
	return b, nil
}

func unix(t time.Time) float64 { return float64(t.Unix()) }

var page = template.Must(template.New("report").Funcs(template.FuncMap{
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "never"
		}
		return t.UTC().Format(timeFormat)
	},
	"dur": func(s float64) string { return time.Duration(s * float64(time.Second)).Round(time.Second).String() },
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>backupcycle evidence {{when .From}} to {{when .To}}</title>
<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2em .6em;text-align:left}.bad{color:#b02020;font-weight:bold}</style>
</head><body>
<h1>Evidence from {{when .From}} to {{when .To}}</h1>
<table><tr><th>database</th><th>last proven restorable</th><th>recovery point</th><th>verified sets</th><th>log proofs</th><th>drills</th><th>drills that missed the RTO</th></tr>
{{range .Databases}}<tr><td>{{.Instance}}/{{.Database}}</td><td>{{when .LastProven}}{{if .LastKind}} ({{.LastKind}}){{end}}</td><td>{{when .LastRecoveryPoint}}</td><td>{{.Sets}}</td><td>{{.LogProofs}}</td><td>{{len .DrillResults}}</td><td{{if .MissedRTO}} class="bad"{{end}}>{{.MissedRTO}}</td></tr>
{{end}}</table>
{{range .Sections}}<h2>{{.D.Instance}}/{{.D.Database}}</h2>
<p>Backup servers: {{range $i, $s := .D.Servers}}{{if $i}}, {{end}}{{$s}}{{end}}.</p>
{{if .SVG}}<div>{{.SVG}}</div>{{else}}<p>No proof in the period.</p>{{end}}
{{if .D.DrillResults}}<table><tr><th>drill</th><th>recovery point</th><th>time to recover</th><th>rto</th><th>result</th></tr>
{{range .D.DrillResults}}<tr><td>{{when .At}}</td><td>{{when .RecoveryPoint}}</td><td>{{dur .RTOSeconds}}</td><td>{{if .TargetRTOSeconds}}{{dur .TargetRTOSeconds}}{{else}}none set{{end}}</td><td{{if or (not .Passed) (not .MetRTO)}} class="bad"{{end}}>{{if not .Passed}}failed{{else if .MetRTO}}met{{else}}missed{{end}}</td></tr>
{{end}}</table>{{end}}
{{end}}</body></html>
`))

type section struct {
	D   evidence.DatabaseReport
	SVG template.HTML // drawn by gonum/plot: axes, ticks and kinds only
}

// HTML renders the report as one page: a summary table, then per
// database its chart and its drills.
func HTML(r evidence.Report) ([]byte, error) {
	data := struct {
		evidence.Report
		Sections []section
	}{Report: r}
	for _, d := range r.Databases {
		svg, err := SVG(d)
		if err != nil {
			return nil, err
		}
		// The drawing holds no text of the records (SVG): it goes in as
		// markup.
		data.Sections = append(data.Sections, section{D: d, SVG: template.HTML(svg)})
	}
	var buf bytes.Buffer
	if err := page.Execute(&buf, data); err != nil {
		return nil, fmt.Errorf("evidence report: %w", err)
	}
	return buf.Bytes(), nil
}
