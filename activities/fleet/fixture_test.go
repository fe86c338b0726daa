package fleet

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	_ "github.com/microsoft/go-mssqldb"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/sitetest"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
)

// The fleet's activities against the emulated site (package sitetest):
// the source sql01 over real TDS, or (NoSQL) the backup servers alone with
// a fixed clock; the cycle's activities registered beside them.

type fixture struct {
	t    *testing.T
	site *sitetest.Site
	src  *sqlsim.Instance
	cfg  *config.Config
	base *activities.Activities
	acts *Activities
	env  *testsuite.TestActivityEnvironment
	now  time.Time
}

func newFixture(t *testing.T, o sitetest.Options) *fixture {
	t.Helper()
	site := sitetest.New(t, o)
	f := &fixture{t: t, site: site, src: site.Source, cfg: site.Config}
	f.base = activities.New(nil)
	f.base.Cycle = activities.CycleDeps{Config: f.cfg, Poll: 20 * time.Millisecond}
	if o.NoSQL {
		// No instance listens at the configured address; the clock is
		// the test's.
		if os.Getenv(sitetest.PasswordEnv) != sitetest.Password {
			t.Setenv(sitetest.PasswordEnv, sitetest.Password)
		}
		f.now = time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)
		f.base.Cycle.Now = func() time.Time { return f.now }
	}
	f.acts = New(f.base)
	var ts testsuite.WorkflowTestSuite
	ts.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	f.env = ts.NewTestActivityEnvironment()
	f.env.RegisterActivity(f.base)
	f.env.RegisterActivity(f.acts)
	return f
}

// run executes one activity and decodes its result into out (may be nil).
func (f *fixture) run(fn, in, out any) error {
	f.t.Helper()
	v, err := f.env.ExecuteActivity(fn, in)
	if err == nil && out != nil && v != nil && v.HasValue() {
		if err := v.Get(out); err != nil {
			f.t.Fatal(err)
		}
	}
	return err
}

func (f *fixture) must(fn, in, out any) {
	f.t.Helper()
	if err := f.run(fn, in, out); err != nil {
		f.t.Fatalf("%T(%+v): %v", in, in, err)
	}
}

// reconfigure rewrites the fixture's configuration with edit.
func (f *fixture) reconfigure(edit func(string) string) {
	f.t.Helper()
	data, err := os.ReadFile(f.cfg.File)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(f.cfg.File, []byte(edit(string(data))), 0o600); err != nil {
		f.t.Fatal(err)
	}
	cfg, err := config.Load(f.cfg.File)
	if err != nil {
		f.t.Fatal(err)
	}
	f.cfg, f.base.Cycle.Config = cfg, cfg
}

func appErrorOf(t *testing.T, err error) *temporal.ApplicationError {
	t.Helper()
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) {
		t.Fatalf("error %v (%T) is not a temporal.ApplicationError", err, err)
	}
	return ae
}
