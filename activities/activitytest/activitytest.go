// Package activitytest runs a workflow's activities (the packages under
// activities/) against the emulated site (package sitetest) in Temporal's
// test activity environment, beside the cycle's activities they share
// their dependencies with: the fixture of those packages' tests.
package activitytest

import (
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	// The site's instances are reached over real TDS.
	_ "github.com/microsoft/go-mssqldb"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/activities/cycle"
	"github.com/backupcycle/backupcycle/internal/sitetest"
)

// Fixture is a site and the activities wired to it.
type Fixture struct {
	T    testing.TB
	Site *sitetest.Site
	// Base carries the dependencies (Base.Cycle.Config is the site's
	// configuration); the cycle's activities over it are registered.
	Base *activities.Activities
	Env  *testsuite.TestActivityEnvironment
	// Now is the activities' clock on a site without SQL Server
	// (sitetest.Options.NoSQL): a fixed instant. Zero: the wall clock.
	Now time.Time
}

// New starts a site of shape o and registers the cycle's activities over
// it (NewOf: a package's activities besides).
func New(t testing.TB, o sitetest.Options) *Fixture {
	t.Helper()
	site := sitetest.New(t, o)
	f := &Fixture{T: t, Site: site, Base: activities.New(nil)}
	f.Base.Cycle = activities.CycleDeps{Config: site.Config, Poll: 20 * time.Millisecond}
	if o.NoSQL {
		// No instance listens at the configured address (the password
		// is still looked up); the clock is the test's.
		if os.Getenv(sitetest.PasswordEnv) != sitetest.Password {
			t.Setenv(sitetest.PasswordEnv, sitetest.Password)
		}
		f.Now = time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)
		f.Base.Cycle.Now = func() time.Time { return f.Now }
	}
	var ts testsuite.WorkflowTestSuite
	ts.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	f.Env = ts.NewTestActivityEnvironment()
	f.Env.RegisterActivity(cycle.New(f.Base))
	return f
}

// Of is a Fixture with a package's activities registered beside the
// cycle's.
type Of[A any] struct {
	*Fixture
	Acts A
}

// NewOf is New with the activities newActs makes over Base registered
// (a package's New).
func NewOf[A any](t testing.TB, o sitetest.Options, newActs func(*activities.Activities) A) *Of[A] {
	t.Helper()
	f := &Of[A]{Fixture: New(t, o)}
	f.Acts = newActs(f.Base)
	f.Env.RegisterActivity(f.Acts)
	return f
}

// Run executes one activity and decodes its result into out (may be nil).
func (f *Fixture) Run(fn, in, out any) error {
	f.T.Helper()
	v, err := f.Env.ExecuteActivity(fn, in)
	if err == nil && out != nil && v != nil && v.HasValue() {
		if err := v.Get(out); err != nil {
			f.T.Fatal(err)
		}
	}
	return err
}

// Must is Run, failing the test on an error.
func (f *Fixture) Must(fn, in, out any) {
	f.T.Helper()
	if err := f.Run(fn, in, out); err != nil {
		f.T.Fatalf("%T(%+v): %v", in, in, err)
	}
}

// Reconfigure rewrites the site's configuration with edit; the activities
// run with the new one.
func (f *Fixture) Reconfigure(edit func(yaml string) string) {
	f.T.Helper()
	f.Site.Reconfigure(edit)
	f.Base.Cycle.Config = f.Site.Config
}
