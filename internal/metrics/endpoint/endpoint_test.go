package endpoint

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/metrics"
	"github.com/backupcycle/backupcycle/internal/status"
	"github.com/backupcycle/backupcycle/internal/storage/local"
)

// families is one scrape, by metric family name.
type families map[string]*dto.MetricFamily

func scrape(t *testing.T, url string) families {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: not Prometheus text: %v", url, err)
	}
	return fams
}

// find returns the series of name whose labels include want.
func (f families) find(name string, want map[string]string) []*dto.Metric {
	fam := f[name]
	if fam == nil {
		return nil
	}
	var out []*dto.Metric
	for _, m := range fam.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		ok := true
		for k, v := range want {
			ok = ok && have[k] == v
		}
		if ok {
			out = append(out, m)
		}
	}
	return out
}

// value is the value of the one series of name with labels want.
func (f families) value(t *testing.T, name string, want map[string]string) float64 {
	t.Helper()
	ms := f.find(name, want)
	if len(ms) != 1 {
		t.Fatalf("%s%v: %d series, want 1 (family: %v)", name, want, len(ms), f[name])
	}
	m := ms[0]
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	t.Fatalf("%s%v: neither counter, gauge nor histogram", name, want)
	return 0
}

func labels(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

func TestEndpointServesSDKAndProductMetrics(t *testing.T) {
	e, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	url, err := e.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, "/metrics") {
		t.Fatalf("URL %q", url)
	}
	// A second endpoint on the same address is refused with the flag named.
	if _, err := func() (string, error) {
		e2, err := New(nil)
		if err != nil {
			return "", err
		}
		defer e2.Close()
		return e2.Listen(strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/metrics"))
	}(); err == nil || !strings.Contains(err.Error(), "--metrics-addr") {
		t.Errorf("second listener on the same port: %v", err)
	}

	// What the activities record.
	var rec metrics.Recorder = e.Product()
	rec.StepDone(metrics.StepBackup, "sql01", "Sales", "bak01", 1000, 90*time.Second)
	rec.StepDone(metrics.StepBackup, "sql01", "Sales", "bak01", 500, 30*time.Second)
	rec.StepDone(metrics.StepCopy, "sql01", "Sales", "bak02", 1500, 3*time.Minute)
	rec.StepDone(metrics.StepRestore, "sql01", "Sales", "bak02", 0, 2*time.Hour)
	rec.StepDone(metrics.StepCheckDB, "sql01", "Sales", "bak02", 0, 5*time.Hour)
	rec.SetFailed("checkdb", "checkdb_failed")
	rec.SourceDamaged("sql01", "Sales")
	taken := time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)
	rec.Verified("sql01", "Sales", taken, 7*time.Hour)

	// Real SDK traffic: a client dialing a port nobody listens on (its
	// GetSystemInfo fails), and workflow code counting two cycles.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if c, err := sdkclient.DialContext(ctx, sdkclient.Options{HostPort: closedPort(t), MetricsHandler: e.SDKHandler()}); err == nil {
		c.Close()
		t.Fatal("dial of a closed port succeeded")
	}
	var suite testsuite.WorkflowTestSuite
	suite.SetMetricsHandler(e.SDKHandler())
	env := suite.NewTestWorkflowEnvironment()
	env.ExecuteWorkflow(func(ctx workflow.Context) error {
		h := workflow.GetMetricsHandler(ctx)
		metrics.CycleEnded(h, metrics.OutcomeFailed, "CorruptBackup")
		metrics.CycleEnded(h, metrics.OutcomeFailed, "CorruptBackup")
		metrics.CycleEnded(h, metrics.OutcomeVerified, "")
		return nil
	})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}

	f := scrape(t, url)
	sales := func(kv ...string) map[string]string {
		return labels(append([]string{"instance", "sql01", "database", "Sales"}, kv...)...)
	}
	if v := f.value(t, BackupBytes, sales("server", "bak01")); v != 1500 {
		t.Errorf("%s = %v, want 1500", BackupBytes, v)
	}
	if v := f.value(t, CopyBytes, sales("server", "bak02")); v != 1500 {
		t.Errorf("%s = %v, want 1500", CopyBytes, v)
	}
	for step, n := range map[string]uint64{"backup": 2, "copy": 1, "restore": 1, "checkdb": 1} {
		h := f.find(StepDuration, labels("step", step))
		if len(h) != 1 || h[0].GetHistogram().GetSampleCount() != n {
			t.Errorf("%s{step=%s}: %v, want %d observations", StepDuration, step, h, n)
		}
	}
	// CHECKDB's 5h lands in the 8h bucket, not the 4h one: the buckets reach hours.
	for _, b := range f.find(StepDuration, labels("step", "checkdb"))[0].GetHistogram().GetBucket() {
		want := uint64(0)
		if b.GetUpperBound() >= 5*3600 {
			want = 1
		}
		if b.GetCumulativeCount() != want {
			t.Errorf("checkdb bucket le=%v: %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want)
		}
	}
	if v := f.value(t, SetsFailed, labels("step", "checkdb", "evidence", "checkdb_failed")); v != 1 {
		t.Errorf("%s = %v, want 1", SetsFailed, v)
	}
	if v := f.value(t, SourceDamaged, sales()); v != 1 || f[SourceDamaged].GetType() != dto.MetricType_COUNTER {
		t.Errorf("%s = %v (%v), want a counter at 1", SourceDamaged, v, f[SourceDamaged].GetType())
	}
	if v := f.value(t, LastVerified, sales()); v != float64(taken.Unix()) {
		t.Errorf("%s = %v, want %d", LastVerified, v, taken.Unix())
	}
	if v := f.value(t, TimeToRecover, sales()); v != 7*3600 {
		t.Errorf("%s = %v, want %d", TimeToRecover, v, 7*3600)
	}
	if v := f.value(t, CyclesEnded, labels("outcome", "failed", "type", "CorruptBackup")); v != 2 {
		t.Errorf("%s failed = %v, want 2", CyclesEnded, v)
	}
	if v := f.value(t, CyclesEnded, labels("outcome", "verified", "type", metrics.NoType)); v != 1 {
		t.Errorf("%s verified = %v, want 1", CyclesEnded, v)
	}
	if f[CyclesEnded].GetType() != dto.MetricType_COUNTER {
		t.Errorf("%s is a %v, want a counter", CyclesEnded, f[CyclesEnded].GetType())
	}
	// The SDK's own metrics, under the names Temporal documents.
	if v := f.value(t, "temporal_request_failure_total", labels("operation", "GetSystemInfo", "status_code", "UNAVAILABLE")); v < 1 {
		t.Errorf("temporal_request_failure_total = %v", v)
	}
	if lat := f.find("temporal_request_latency", labels("operation", "GetSystemInfo")); len(lat) != 1 ||
		!hasBucket(lat[0], 60) || hasBucket(lat[0], 7500) {
		t.Errorf("temporal_request_latency: %v, want a histogram with buckets in seconds; families: %v", lat, names(f))
	}
	if h := f[CyclesEnded].GetHelp(); !strings.Contains(h, "by outcome") {
		t.Errorf("%s HELP %q", CyclesEnded, h)
	}
	if f["go_goroutines"] == nil || f["process_resident_memory_bytes"] == nil {
		t.Errorf("no Go runtime / process metrics; families: %v", names(f))
	}

	// Close frees the port.
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if resp, err := http.Get(url); err == nil {
		resp.Body.Close()
		t.Fatalf("GET %s after Close answered %d", url, resp.StatusCode)
	}
}

func TestNilProductRecordsNothing(t *testing.T) {
	var p *Product
	var rec metrics.Recorder = p
	rec.StepDone(metrics.StepBackup, "i", "d", "s", 1, time.Second)
	rec.Verified("i", "d", time.Now(), time.Second)
	rec.SetFailed("backup", "backup_incomplete")
	rec.SourceDamaged("i", "d")
	if r := p.Refresh(context.Background(), nil, nil); len(r.Databases) != 0 {
		t.Fatalf("nil Product read %+v", r)
	}
	metrics.CycleEnded(nil, metrics.OutcomeVerified, "")
}

// A label value Prometheus refuses (not UTF-8) loses its own series, never
// the activity (a panic) nor the rest of the scrape.
func TestInvalidLabelValueLosesOnlyItsSeries(t *testing.T) {
	e := newEndpoint(t)
	p := e.Product()
	p.StepDone(metrics.StepBackup, "sql01", "bad\xff", "bak01", 1, time.Second)
	p.Verified("sql01", "bad\xff", time.Now(), time.Second)
	p.Verified("sql01", "Sales", time.Unix(1_800_000_000, 0), time.Second)
	f := scrapeHandler(t, e)
	if v := f.value(t, LastVerified, labels("instance", "sql01", "database", "Sales")); v != 1_800_000_000 {
		t.Errorf("%s Sales = %v", LastVerified, v)
	}
	if n := len(f[LastVerified].GetMetric()); n != 1 {
		t.Errorf("%s: %d series, want Sales only", LastVerified, n)
	}
}

func TestURLOfAnUnspecifiedHost(t *testing.T) {
	for addr, want := range map[string]string{
		"[::]:9090":      "http://127.0.0.1:9090/metrics",
		"0.0.0.0:9090":   "http://127.0.0.1:9090/metrics",
		"127.0.0.1:9464": "http://127.0.0.1:9464/metrics",
		"[::1]:9090":     "http://[::1]:9090/metrics",
	} {
		if got := URL(fakeAddr(addr)); got != want {
			t.Errorf("URL(%s) = %s, want %s", addr, got, want)
		}
	}
}

type fakeAddr string

func (a fakeAddr) Network() string { return "tcp" }
func (a fakeAddr) String() string  { return string(a) }

// The per-database gauges come from the manifests a worker finds on the
// backup servers (also right after a restart), follow a set verified at
// once, and keep their values while a backup server cannot be read.
func TestGaugesFromTheManifests(t *testing.T) {
	dir := t.TempDir()
	bak01, bak02 := filepath.Join(dir, "bak01"), filepath.Join(dir, "bak02")
	cfg := siteConfig(t, dir, `  - name: Sales
    instance: sql01
    backup_servers: [bak01, bak02]
    rpo: 2h
    rto: 30m
  - name: Never
    instance: sql01
    backup_servers: [bak01, bak02]
`)
	t1 := time.Now().Add(-3 * time.Hour).UTC().Truncate(time.Second)
	save(t, verifiedSet(t, "sql01", "Sales", 10, t1, 20*time.Minute, 15*time.Minute), bak01, bak02)
	save(t, failedSet(t, "sql01", "Sales", 11, t1.Add(time.Hour), catalog.StepCheckDB, catalog.EvidenceCheckDBFailed), bak02)

	e := newEndpoint(t)
	r := e.Product().Refresh(context.Background(), cfg, nil)
	if len(r.Incomplete()) != 0 {
		t.Fatalf("servers not read: %+v", r.Servers)
	}
	f := scrapeHandler(t, e)
	sales, never := labels("instance", "sql01", "database", "Sales"), labels("instance", "sql01", "database", "Never")
	checks := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{LastVerified, sales, float64(t1.Unix())},
		{TimeToRecover, sales, 35 * 60},
		{RPO, sales, 2 * 3600},
		{RTO, sales, 30 * 60},
		{LastVerified, never, 0},
		{RPO, never, config.DefaultRPO.Seconds()},
		{LastFailure, labels("instance", "sql01", "database", "Sales", "type", "checkdb_failed"), float64(t1.Add(2 * time.Hour).Unix())},
		{ServerReadable, labels("server", "bak01"), 1},
		{ServerReadable, labels("server", "bak02"), 1},
	}
	for _, c := range checks {
		if v := f.value(t, c.name, c.labels); v != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, v, c.want)
		}
	}
	if ms := f.find(TimeToRecover, never); len(ms) != 0 {
		t.Errorf("Never has a time to recover: %v", ms)
	}
	if ms := f.find(RTO, never); len(ms) != 0 {
		t.Errorf("Never has an RTO: %v", ms)
	}
	if v := f.value(t, ManifestsRead, nil); time.Since(time.Unix(int64(v), 0)) > time.Minute {
		t.Errorf("%s = %v: not now", ManifestsRead, v)
	}

	// MarkVerified of seq 12 (its manifest written first, as the activity
	// does): the gauge moves at once and the failure before it is history.
	t2 := t1.Add(2 * time.Hour)
	save(t, verifiedSet(t, "sql01", "Sales", 12, t2, 5*time.Minute, 5*time.Minute), bak02)
	e.Product().Verified("sql01", "Sales", t2, 10*time.Minute)
	f = scrapeHandler(t, e)
	if v := f.value(t, LastVerified, sales); v != float64(t2.Unix()) {
		t.Errorf("after Verified: %s = %v, want %d", LastVerified, v, t2.Unix())
	}
	if ms := f.find(LastFailure, sales); len(ms) != 0 {
		t.Errorf("after Verified: a failure older than the verified set is still reported: %v", ms)
	}

	// bak02 goes away: Sales keeps what only bak02 knew (seq 12), and the
	// server shows unreadable.
	if err := os.Rename(bak02, bak02+".away"); err != nil {
		t.Fatal(err)
	}
	e.Product().Refresh(context.Background(), cfg, nil)
	f = scrapeHandler(t, e)
	if v := f.value(t, LastVerified, sales); v != float64(t2.Unix()) {
		t.Errorf("bak02 unreadable: %s = %v, want the last known %d", LastVerified, v, t2.Unix())
	}
	if v := f.value(t, ServerReadable, labels("server", "bak02")); v != 0 {
		t.Errorf("bak02 unreadable: %s = %v, want 0", ServerReadable, v)
	}

	// A worker started afresh reads the same from the manifests.
	if err := os.Rename(bak02+".away", bak02); err != nil {
		t.Fatal(err)
	}
	restarted := newEndpoint(t)
	restarted.Product().Refresh(context.Background(), cfg, nil)
	f = scrapeHandler(t, restarted)
	if v := f.value(t, LastVerified, sales); v != float64(t2.Unix()) {
		t.Errorf("after a restart: %s = %v, want %d", LastVerified, v, t2.Unix())
	}
	if v := f.value(t, TimeToRecover, sales); v != 10*60 {
		t.Errorf("after a restart: %s = %v, want 600", TimeToRecover, v)
	}

	// With every server read, the manifests are the truth: a Verified call
	// whose manifest was never written does not survive the next read.
	restarted.Product().Verified("sql01", "Never", t2, time.Minute)
	restarted.Product().Refresh(context.Background(), cfg, nil)
	if v := scrapeHandler(t, restarted).value(t, LastVerified, never); v != 0 {
		t.Errorf("Never without a verified manifest: %s = %v, want 0", LastVerified, v)
	}
}

// A set verified while the manifests are being read is not undone by that
// read, which began before its manifest was written.
func TestVerifiedDuringARead(t *testing.T) {
	s := newManifestState()
	t1 := time.Date(2026, 11, 29, 22, 0, 0, 0, time.UTC)
	t2 := t1.Add(24 * time.Hour)
	s.beginLoad()
	s.verified("sql01", "Sales", t2, time.Minute)
	s.apply(reportOf(t, "sql01", "Sales", t1), time.Now())
	if got := s.rows[dbKey{"sql01", "Sales"}].takenAt; !got.Equal(t2) {
		t.Fatalf("after a read that began before the verify: %v, want %v", got, t2)
	}
	// An older set verified late never moves the gauge back.
	s.verified("sql01", "Sales", t1, time.Minute)
	if got := s.rows[dbKey{"sql01", "Sales"}].takenAt; !got.Equal(t2) {
		t.Fatalf("after a late verify of an older set: %v, want %v", got, t2)
	}
}

func TestWatchReadsAtStartAndAgain(t *testing.T) {
	dir := t.TempDir()
	bak01 := filepath.Join(dir, "bak01")
	cfg := siteConfig(t, dir, `  - name: Sales
    instance: sql01
    backup_servers: [bak01, bak02]
`)
	t1 := time.Now().Add(-2 * time.Hour).UTC().Truncate(time.Second)
	save(t, verifiedSet(t, "sql01", "Sales", 1, t1, time.Minute, time.Minute), bak01, filepath.Join(dir, "bak02"))
	e := newEndpoint(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.Product().Watch(ctx, cfg, 100*time.Millisecond, nil, nil)
	}()
	defer func() {
		cancel()
		<-done
	}()
	sales := labels("instance", "sql01", "database", "Sales")
	waitFor(t, func() bool { return valueOr(scrapeHandler(t, e), LastVerified, sales) == float64(t1.Unix()) })
	// Another worker's cycle verifies a newer set: the next read shows it.
	t2 := t1.Add(time.Hour)
	save(t, verifiedSet(t, "sql01", "Sales", 2, t2, time.Minute, time.Minute), bak01)
	waitFor(t, func() bool { return valueOr(scrapeHandler(t, e), LastVerified, sales) == float64(t2.Unix()) })
}

func newEndpoint(t *testing.T) *Endpoint {
	t.Helper()
	e, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

func scrapeHandler(t *testing.T, e *Endpoint) families {
	t.Helper()
	srv := httptest.NewServer(e.Handler())
	defer srv.Close()
	return scrape(t, srv.URL)
}

func valueOr(f families, name string, want map[string]string) float64 {
	ms := f.find(name, want)
	if len(ms) != 1 || ms[0].Gauge == nil {
		return -1
	}
	return ms[0].Gauge.GetValue()
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("condition not met within 20s")
}

func hasBucket(m *dto.Metric, le float64) bool {
	for _, b := range m.GetHistogram().GetBucket() {
		if b.GetUpperBound() == le {
			return true
		}
	}
	return false
}

func names(f families) []string {
	out := make([]string, 0, len(f))
	for n := range f {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// closedPort is a 127.0.0.1 address nobody listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.Listener.Addr().String()
	srv.Close()
	return addr
}

// siteConfig is a site whose backup servers bak01 and bak02 are local
// directories under dir, with the given databases.
func siteConfig(t *testing.T, dir, databases string) *config.Config {
	t.Helper()
	return siteConfigWith(t, dir, "", databases)
}

// siteConfigWith is siteConfig with more backup servers (YAML list items).
func siteConfigWith(t *testing.T, dir, servers, databases string) *config.Config {
	t.Helper()
	yaml := `
sql_instances:
  - name: sql01
    address: 127.0.0.1:1433
    user: backup
    password_env: SQL01_PASSWORD
  - name: verify
    address: 127.0.0.1:1434
    user: backup
    password_env: SQL01_PASSWORD
backup_servers:
  - name: bak01
    unc_paths: ['/var/opt/mssql/backup/bak01']
    location: bak01
    verify_instance: verify
    restore_data_dir: /data
    restore_log_dir: /log
  - name: bak02
    unc_paths: ['/var/opt/mssql/backup/bak02']
    location: bak02
    verify_instance: verify
    restore_data_dir: /data
    restore_log_dir: /log
` + servers + `databases:
` + databases
	for _, d := range []string{"bak01", "bak02"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// verifiedSet is the manifest of a set taken at taken that went the whole
// chain, with a restore and CHECKDB of the given lengths.
func verifiedSet(t *testing.T, inst, db string, seq int64, taken time.Time, restore, checkdb time.Duration) *catalog.Manifest {
	t.Helper()
	m := catalog.New(inst, db, seq, taken)
	at := taken
	for _, s := range []catalog.State{catalog.StateCopied, catalog.StateRestored, catalog.StateChecked, catalog.StateVerified} {
		at = at.Add(time.Minute)
		switch s {
		case catalog.StateRestored:
			if err := m.SetTiming(catalog.StepRestore, at, at.Add(restore)); err != nil {
				t.Fatal(err)
			}
			at = at.Add(restore)
		case catalog.StateChecked:
			if err := m.SetTiming(catalog.StepCheckDB, at, at.Add(checkdb)); err != nil {
				t.Fatal(err)
			}
			at = at.Add(checkdb)
		}
		if err := m.Advance(s, at); err != nil {
			t.Fatal(err)
		}
	}
	m.Proof = &catalog.Proof{VerifyInstance: "verify", VerifyDatabase: db + "_verify", BackupSetGUID: "g", RestoredAt: at, CheckedAt: at}
	return m
}

func failedSet(t *testing.T, inst, db string, seq int64, taken time.Time, step catalog.Step, ev catalog.Evidence) *catalog.Manifest {
	t.Helper()
	m := catalog.New(inst, db, seq, taken)
	if err := m.Fail(step, ev, "DBCC CHECKDB found 2 allocation errors", taken.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	return m
}

// save writes m with catalog.Save into each server directory.
func save(t *testing.T, m *catalog.Manifest, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := catalog.Save(context.Background(), dirFS(t, d), nil, m); err != nil {
			t.Fatal(err)
		}
	}
}

// dirFS is a local directory as the worker writes it: the catalog over
// the local storage backend.
func dirFS(t *testing.T, dir string) catalog.StorageFS {
	t.Helper()
	st, err := local.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return catalog.StorageFS{Storage: st}
}

// reportOf is what status.Load says about one database verified at taken,
// every server read.
func reportOf(t *testing.T, inst, db string, taken time.Time) status.Report {
	t.Helper()
	return status.Report{
		Databases: []status.Database{{Instance: inst, Database: db, Configured: true, LastVerified: &status.Verified{TakenAt: taken}}},
		Servers:   []status.Server{{Name: "bak01"}},
	}
}

// The last verified timestamp is the instant the backup finished, not the
// source's wall clock: a source at UTC+2 reports 2 h more.
func TestLastVerifiedIsTheInstant(t *testing.T) {
	dir := t.TempDir()
	cfg := siteConfig(t, dir, `  - name: Sales
    instance: sql01
    backup_servers: [bak01, bak02]
`)
	taken := time.Now().Add(-3 * time.Hour).UTC().Truncate(time.Second)
	m := verifiedSet(t, "sql01", "Sales", 10, taken, time.Minute, time.Minute)
	m.Header = &catalog.Header{FirstLSN: "1", LastLSN: "2", BackupFinish: taken.Add(2 * time.Hour)} // the source's wall clock
	m.Header.SetUTCOffset(120)
	save(t, m, filepath.Join(dir, "bak01"))
	e := newEndpoint(t)
	e.Product().Refresh(context.Background(), cfg, nil)
	if v := scrapeHandler(t, e).value(t, LastVerified, labels("instance", "sql01", "database", "Sales")); v != float64(taken.Unix()) {
		t.Errorf("%s = %v, want %d (the instant), not the source's wall clock %d", LastVerified, v, taken.Unix(), taken.Add(2*time.Hour).Unix())
	}
}

// TestWatchNamesBrokenManifestsOnce: a file named like a manifest that is
// not one (a sparse 64 GiB file, a torn write) is named in the worker's
// log, once, and never read whole; the gauges come from the others.
func TestWatchNamesBrokenManifestsOnce(t *testing.T) {
	dir := t.TempDir()
	bak01 := filepath.Join(dir, "bak01")
	cfg := siteConfig(t, dir, `  - name: Sales
    instance: sql01
    backup_servers: [bak01, bak02]
`)
	t1 := time.Now().Add(-2 * time.Hour).UTC().Truncate(time.Second)
	save(t, verifiedSet(t, "sql01", "Sales", 1, t1, time.Minute, time.Minute), bak01)
	huge := "sql01@Sales~8de4e0ea_00000002.manifest.json"
	if err := os.WriteFile(filepath.Join(bak01, huge), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(bak01, huge), 64<<30); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.InfoLevel)
	e := newEndpoint(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.Product().Watch(ctx, cfg, 50*time.Millisecond, nil, zap.New(core))
	}()
	sales := labels("instance", "sql01", "database", "Sales")
	waitFor(t, func() bool { return valueOr(scrapeHandler(t, e), LastVerified, sales) == float64(t1.Unix()) })
	time.Sleep(200 * time.Millisecond) // a few more reads
	cancel()
	<-done
	var named int
	for _, l := range logs.All() {
		if l.ContextMap()["file"] == huge && strings.Contains(fmt.Sprint(l.ContextMap()["error"]), "too large") {
			named++
		}
	}
	if named != 1 {
		t.Errorf("%d log lines name %s as too large, want 1; logs: %v", named, huge, logs.All())
	}
}

// A planted fresh "verified" manifest (unsigned) does not move the last
// verified timestamp: the gauge keeps the real set's, so the RPO alert
// (time() - last verified > rpo) fires, and the planted set is counted as
// unauthenticated.
func TestPlantedVerifiedManifestKeepsTheAlert(t *testing.T) {
	dir := t.TempDir()
	bak01 := filepath.Join(dir, "bak01")
	cfg := siteConfig(t, dir, `  - name: Sales
    instance: sql01
    backup_servers: [bak01, bak02]
    rpo: 26h
`)
	key := filepath.Join(dir, "manifest.key")
	if err := os.WriteFile(key, []byte("0123456789abcdef0123456789abcdef-metrics-test\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.ManifestKeys = []config.ManifestKey{{ID: "k1", File: key}}
	keys, err := cfg.ManifestKeyRing()
	if err != nil {
		t.Fatal(err)
	}
	realTaken := time.Now().Add(-30 * time.Hour).UTC().Truncate(time.Second)
	if err := os.MkdirAll(bak01, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := catalog.Save(context.Background(), dirFS(t, bak01), keys, verifiedSet(t, "sql01", "Sales", 10, realTaken, time.Minute, time.Minute)); err != nil {
		t.Fatal(err)
	}
	save(t, verifiedSet(t, "sql01", "Sales", 11, time.Now().Add(-time.Hour).UTC(), time.Minute, time.Minute), bak01) // planted
	e := newEndpoint(t)
	e.Product().Refresh(context.Background(), cfg, nil)
	s := scrapeHandler(t, e)
	sales := labels("instance", "sql01", "database", "Sales")
	if v := s.value(t, LastVerified, sales); v != float64(realTaken.Unix()) {
		t.Errorf("%s = %v, want the real set's %d (30h ago, beyond the rpo)", LastVerified, v, realTaken.Unix())
	}
	if v := s.value(t, Unauthentic, sales); v != 1 {
		t.Errorf("%s = %v, want 1", Unauthentic, v)
	}
}
