package endpoint

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/metrics"
)

// rulesDir holds the alert rules and their promtool unit tests.
const rulesDir = "../../../deploy/prometheus"

// The rules are valid and fire when they should: promtool checks them and
// runs alerts.test.yml. `make test-deps` installs promtool, so its absence
// fails the test.
func TestAlertRulesPassPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool not found (%v): `make test-deps` installs it (Debian package prometheus)", err)
	}
	for _, args := range [][]string{{"check", "rules", "alerts.yml"}, {"test", "rules", "alerts.test.yml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = rulesDir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// targetLabels are what Prometheus adds to every scraped series (and
// exported_instance, our instance renamed under honor_labels: false).
var targetLabels = map[string]bool{"job": true, "instance": true, "exported_instance": true}

// Every metric and label the rules (and the series of their unit tests)
// name is one the worker exports: renaming a metric without the rules
// fails here instead of silencing an alert.
func TestAlertRulesUseExportedMetrics(t *testing.T) {
	exported := exportedLabels(t)

	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	readYAML(t, filepath.Join(rulesDir, "alerts.yml"), &rules)
	var tests struct {
		Tests []struct {
			InputSeries []struct {
				Series string `yaml:"series"`
			} `yaml:"input_series"`
		} `yaml:"tests"`
	}
	readYAML(t, filepath.Join(rulesDir, "alerts.test.yml"), &tests)

	used := map[string]bool{}
	check := func(where, text string) {
		for _, s := range selectors(text) {
			used[s.name] = true
			labels, ok := exported[s.name]
			if !ok {
				t.Errorf("%s: metric %s is not exported by the worker", where, s.name)
				continue
			}
			for _, l := range s.labels {
				if !labels[l] && !targetLabels[l] {
					t.Errorf("%s: %s has no label %q (it has %v)", where, s.name, l, labels)
				}
			}
		}
	}
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			check("alert "+r.Alert, r.Expr)
			n++
		}
	}
	for _, tc := range tests.Tests {
		for _, s := range tc.InputSeries {
			check("alerts.test.yml series "+s.Series, s.Series)
		}
	}
	// A parse that finds nothing must not pass.
	for _, want := range []string{LastVerified, RPO, TimeToRecover, RTO, LastFailure, CyclesEnded, ServerReadable, ManifestsRead, SourceDamaged,
		EvidenceMissed, LastDrill, LastDrillOK, LastDrillRTO, DrillMaxAge, ImmutableProven, ImmutableMissingAge, ImmutableWithin, "up"} {
		if !used[want] {
			t.Errorf("no rule uses %s", want)
		}
	}
	if n < 8 {
		t.Errorf("%d rules, want the 8+ a DBA needs", n)
	}
}

type selector struct {
	name   string
	labels []string
}

var (
	quoted     = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	metricName = regexp.MustCompile(`\b((?:backupcycle|temporal)_[a-zA-Z0-9_]*|up)\b(\s*\{[^}]*\})?`)
	matcher    = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
)

// selectors finds the product's and the SDK's metric names in a PromQL
// expression or a series notation, with the label names each is matched
// on. Every such name has one of the two prefixes (or is up), so no full
// PromQL parser is needed to find them; promtool checks the syntax.
func selectors(expr string) []selector {
	expr = quoted.ReplaceAllString(expr, `""`)
	var out []selector
	for _, m := range metricName.FindAllStringSubmatch(expr, -1) {
		s := selector{name: m[1]}
		for _, l := range matcher.FindAllStringSubmatch(m[2], -1) {
			s.labels = append(s.labels, l[1])
		}
		out = append(out, s)
	}
	return out
}

// exportedLabels scrapes an endpoint on which every metric has a value and
// returns each exported name (histograms also as _bucket, _sum and _count)
// with its label names; up is Prometheus's own.
func exportedLabels(t *testing.T) map[string]map[string]bool {
	t.Helper()
	dir := t.TempDir()
	cfg := siteConfigWith(t, dir, vaultServer(t), `  - name: Sales
    instance: sql01
    backup_servers: [bak01, bak02]
    rto: 1h
    drill: {every: 24h}
    immutable_copy: vault01
  - name: Ledger
    instance: sql01
    backup_servers: [bak01, bak02]
    owns_backup_chain: true
    log_backup: {every: 1m}
`)
	taken := time.Now().Add(-time.Hour).UTC()
	save(t, verifiedSet(t, "sql01", "Sales", 1, taken, time.Minute, time.Minute), filepath.Join(dir, "bak01"))
	save(t, failedSet(t, "sql01", "Sales", 2, taken, "checkdb", "checkdb_failed"), filepath.Join(dir, "bak01"))
	drill := catalog.NewDrillRecord("sql01", "Sales", taken)
	drill.Add(catalog.DrillResult{WorkflowID: "w", RunID: "r", Instance: "verify", Database: "Sales_drill", Outcome: catalog.DrillPassed,
		RTO: time.Minute, StartedAt: taken, At: taken.Add(time.Minute)})
	drill.Add(catalog.DrillResult{WorkflowID: "w", RunID: "r2", Instance: "verify", Database: "Sales_drill", Outcome: catalog.DrillPassed,
		From: config.DrillFromImmutable, Immutable: &catalog.DrillImmutable{Store: "vault01", Sequence: 1, Staging: "bak02", Dir: "staging/x"},
		RTO: time.Minute, StartedAt: taken.Add(2 * time.Minute), At: taken.Add(3 * time.Minute)})
	if err := catalog.SaveDrill(context.Background(), dirFS(t, filepath.Join(dir, "bak01")), nil, drill); err != nil {
		t.Fatal(err)
	}

	e := newEndpoint(t)
	p := e.Product()
	p.Refresh(context.Background(), cfg, nil)
	for _, step := range []string{metrics.StepBackup, metrics.StepCopy, metrics.StepRestore, metrics.StepCheckDB} {
		p.StepDone(step, "sql01", "Sales", "bak01", 1, time.Second)
	}
	p.SetFailed("checkdb", "checkdb_failed")
	p.SourceDamaged("sql01", "Sales")
	p.EvidenceNotRecorded("sql01", "Sales", "bak02")
	p.ImmutableProbed("vault01", false, time.Now())
	// The tags the SDK gives a workflow's handler (worker tags and workflow
	// type), on which CycleEnded adds its own.
	metrics.CycleEnded(e.SDKHandler().WithTags(map[string]string{"namespace": "default", "task_queue": "backupcycle", "workflow_type": "BackupCycle"}),
		metrics.OutcomeFailed, "CorruptBackup")

	out := map[string]map[string]bool{"up": {}}
	for name, fam := range scrapeHandler(t, e) {
		labels := map[string]bool{}
		for _, m := range fam.GetMetric() {
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = true
			}
		}
		out[name] = labels
		if fam.GetType().String() == "HISTOGRAM" {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				out[name+suffix] = labels
			}
			out[name+"_bucket"]["le"] = true
		}
	}
	return out
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
