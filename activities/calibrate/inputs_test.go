package calibrate

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/activities/activitytest"
	"github.com/backupcycle/backupcycle/internal/calibrate"
	"github.com/backupcycle/backupcycle/internal/sitetest"
)

// wantRefused checks that err is the non-retryable ApplicationError of
// type typ an input outside the configuration gets, naming what it named.
func wantRefused(t *testing.T, what string, err error, typ string, names ...string) {
	t.Helper()
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Type() != typ || !ae.NonRetryable() {
		t.Errorf("%s: %v, want a non-retryable %s", what, err, typ)
		return
	}
	for _, n := range names {
		if !strings.Contains(err.Error(), n) {
			t.Errorf("%s: %v does not name %q", what, err, n)
		}
	}
}

// TestCalibrationInputsKeepToTheDatabasesServers: whoever schedules a
// calibration's activity (a Web UI start, anyone polling the task queue)
// cannot make it touch a backup server the database does not use, even
// one the configuration knows: nothing is read or written on it.
func TestCalibrationInputsKeepToTheDatabasesServers(t *testing.T) {
	f := activitytest.NewOf(t, sitetest.Options{Database: "Sales", NoSQL: true}, New)
	other := filepath.Join(t.TempDir(), "bak03")
	if err := os.MkdirAll(other, 0o755); err != nil {
		t.Fatal(err)
	}
	f.Reconfigure(sitetest.WithServer("bak03", other))
	for _, tc := range []struct {
		name string
		fn   any
		in   any
	}{
		{"PlanCalibration", f.Acts.PlanCalibration, CalibrateInput{Database: "Sales", Server: "bak03"}},
		{"CalibratePoint", f.Acts.CalibratePoint, CalibratePointInput{Database: "Sales", Instance: "sql01", Server: "bak03",
			Token: "abc", Index: 1, Point: calibrate.Point{Stripes: 1}}},
		{"CleanCalibration", f.Acts.CleanCalibration, CleanCalibrationInput{Database: "Sales", Instance: "sql01", Server: "bak03"}},
		{"SaveCalibration", f.Acts.SaveCalibration, calibrate.Report{Instance: "sql01", Database: "Sales", Server: "bak03"}},
	} {
		_, err := f.Env.ExecuteActivity(tc.fn, tc.in)
		wantRefused(t, tc.name, err, activities.ErrInvalidConfig, "bak03")
	}
	entries, err := os.ReadDir(other)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("bak03 holds %s: an activity wrote to a server the database does not use", e.Name())
	}
}

// TestCalibrationInputsWiderThanTheConfigurationAreRefused: a calibration
// grid or point beyond what calibrate.DefaultGrid and the memory budget
// allow, and a report for a database the configuration does not have, are
// refused before anything runs.
func TestCalibrationInputsWiderThanTheConfigurationAreRefused(t *testing.T) {
	f := activitytest.NewOf(t, sitetest.Options{Database: "Sales", NoSQL: true, Extra: "    memory_budget: 256MiB\n"}, New)
	for _, tc := range []struct {
		name string
		fn   any
		in   any
		want []string
	}{
		{"PlanCalibration stripes", f.Acts.PlanCalibration, CalibrateInput{Database: "Sales",
			Grid: &calibrate.Grid{Stripes: []int{1, 64}, MaxTransferSizes: []int{1 << 20}, BuffersPerStripe: []int{8}}}, []string{"64"}},
		{"PlanCalibration buffers", f.Acts.PlanCalibration, CalibrateInput{Database: "Sales",
			Grid: &calibrate.Grid{Stripes: []int{1}, MaxTransferSizes: []int{1 << 20}, BuffersPerStripe: []int{8, 100000}}}, []string{"100000"}},
		{"CalibratePoint stripes", f.Acts.CalibratePoint, CalibratePointInput{Database: "Sales", Instance: "sql01", Server: "bak01",
			Token: "abc", Index: 1, Point: calibrate.Point{Stripes: 64}}, []string{"64"}},
		{"SaveCalibration", f.Acts.SaveCalibration, calibrate.Report{Instance: "sql01", Database: "Nope", Server: "bak01"}, []string{"Nope"}},
	} {
		_, err := f.Env.ExecuteActivity(tc.fn, tc.in)
		wantRefused(t, tc.name, err, activities.ErrInvalidConfig, tc.want...)
	}
	// A point whose buffers pass the memory budget is never sent.
	_, err := f.Env.ExecuteActivity(f.Acts.CalibratePoint, CalibratePointInput{Database: "Sales", Instance: "sql01", Server: "bak01",
		Token: "abc", Index: 1, Point: calibrate.Point{Stripes: 2, BufferCount: 128, MaxTransferSize: 4 << 20}})
	wantRefused(t, "CalibratePoint over the memory budget", err, activities.ErrInsufficientMemory)
}
