package calibrate

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/backupcycle/backupcycle/activities/activitytest"
	"github.com/backupcycle/backupcycle/internal/sitetest"
	"github.com/backupcycle/backupcycle/internal/storage/local"
)

// The calibration cleanup of Sales removes Sales's leftovers only: not the
// calibration files, nor the report, of a database Sales_<anything>.
func TestCalibrationCleanupLeavesDatabaseNamedLikeIt(t *testing.T) {
	f := activitytest.NewOf(t, sitetest.Options{Database: "Sales", NoSQL: true}, New)
	dir := f.Site.Dirs["bak01"]
	mine := filepath.Join(dir, "calibration~sql01@Sales_tok1_p0_1of1.bak")
	theirs := []string{
		"calibration~sql01@Sales_x_tok2_p0_1of2.bak",
		"calibration~sql01@Sales_x.json",
		"calibration~sql01@Sales_tok1_p0_1of1.bak.txt",
	}
	for _, n := range append(theirs, filepath.Base(mine)) {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	st, err := local.Open(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	removed, err := removeCalibrationFiles(t.Context(), st, "sql01", "Sales", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0] != filepath.Base(mine) {
		t.Errorf("removed %q, want only %s", removed, filepath.Base(mine))
	}
	for _, n := range theirs {
		if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
			t.Errorf("%s: %v (not a calibration file of Sales)", n, err)
		}
	}
}
