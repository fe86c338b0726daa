package workerhost

import (
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// /metrics bound to an address other hosts can reach, without a web
// configuration, is served (it carries no secret) with a warning at start
// that says who can read it and how to close it; bound to loopback, it is
// not worth one.
func TestMetricsOnEveryInterfaceWarns(t *testing.T) {
	for _, tc := range []struct {
		addr string
		warn bool
	}{{":0", true}, {"0.0.0.0:0", true}, {"127.0.0.1:0", false}, {"localhost:0", false}} {
		core, logs := observer.New(zapcore.WarnLevel)
		e, url, err := StartMetrics(tc.addr, "", zap.New(core))
		if err != nil {
			t.Fatal(err)
		}
		CloseMetrics(e, zap.NewNop())
		var warned []string
		for _, l := range logs.All() {
			warned = append(warned, l.Message)
		}
		got := strings.Join(warned, "\n")
		if tc.warn != strings.Contains(got, "without TLS or authentication") {
			t.Errorf("--metrics-addr %s (%s): warnings %q, want a warning: %v", tc.addr, url, got, tc.warn)
		}
		if tc.warn && !strings.Contains(got, "--metrics-web-config") {
			t.Errorf("--metrics-addr %s: warning %q does not name the fix", tc.addr, got)
		}
	}
}

// --metrics-web-config only makes sense with --metrics-addr.
func TestCheckFlagsWebConfig(t *testing.T) {
	if err := CheckFlags("", "web.yml", ""); err == nil || !strings.Contains(err.Error(), "--metrics-web-config needs --metrics-addr") {
		t.Errorf("CheckFlags without --metrics-addr: %v", err)
	}
	if err := CheckFlags("127.0.0.1:9090", "web.yml", ""); err != nil {
		t.Errorf("CheckFlags: %v", err)
	}
}
