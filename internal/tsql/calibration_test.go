package tsql

import (
	"strings"
	"testing"
)

func TestCalibrationNamesAreNeverASet(t *testing.T) {
	for _, db := range []string{"Sales", "Sales_00000001", "a@b_c", "Ünïcode ]'x"} {
		l, err := CalibrationLayout([]string{`\\bak01\backup`, `\\bak01-nic2\backup`}, "sql01", db, "01a2b3c4d5e6", 3, 4)
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range l {
			if _, ok := ParseStripeFileName(s.Name); ok {
				t.Errorf("%s parses as a stripe of a set", s.Name)
			}
			if strings.HasPrefix(s.Name, DBPrefix("sql01", db)) {
				t.Errorf("%s starts like the sets of %s", s.Name, db)
			}
			if !strings.HasPrefix(s.Name, CalibrationRunPrefix("sql01", db, "01a2b3c4d5e6")) ||
				!strings.HasPrefix(s.Name, CalibrationFilePrefix("sql01", db)) {
				t.Errorf("%s lacks its prefixes", s.Name)
			}
			if want := []string{`\\bak01\backup`, `\\bak01-nic2\backup`}[i%2]; s.Dir != want {
				t.Errorf("stripe %d on %s, want %s (round robin over the NIC paths)", i+1, s.Dir, want)
			}
		}
		if _, ok := ParseManifestFileName(CalibrationReportName("sql01", db)); ok {
			t.Errorf("the calibration report of %s parses as a manifest", db)
		}
	}
	// Another database's calibrations never share the prefix.
	if strings.HasPrefix(CalibrationFilePrefix("sql01", "Sales2"), CalibrationFilePrefix("sql01", "Sales")) {
		t.Error("Sales2's calibration files start like Sales's")
	}
}

func TestCalibrationMarkers(t *testing.T) {
	m, err := CalibrationMarker("01a2b3c4d5e6")
	if err != nil || m != "NAME = N'backupcycle calibration 01a2b3c4d5e6'" {
		t.Errorf("marker %q %v", m, err)
	}
	stmt, err := BackupDatabase(BackupOptions{Database: "Sales", Disks: []string{"NUL"}, CopyOnly: true, Name: CalibrationSetName("01a2b3c4d5e6")})
	if err != nil || !strings.Contains(stmt, m) {
		t.Errorf("the statement %q does not contain its marker %q (%v)", stmt, m, err)
	}
	anyB, err := AnyBackupMarker("Sa]les")
	if err != nil || anyB != "BACKUP DATABASE [Sa]]les] TO " || !strings.HasPrefix(strings.ReplaceAll(stmt, "[Sales]", "[Sa]]les]"), anyB) {
		t.Errorf("AnyBackupMarker %q %v", anyB, err)
	}
	for _, bad := range []string{"", "a/b", "a b", strings.Repeat("x", 33), "x'"} {
		if _, err := CalibrationMarker(bad); err == nil {
			t.Errorf("token %q accepted", bad)
		}
		if _, err := CalibrationLayout([]string{`\\b\s`}, "i", "d", bad, 1, 1); err == nil {
			t.Errorf("token %q accepted in file names", bad)
		}
	}
}

// The longest names fit: a 128-character database name of 4-byte
// characters on a 64-character instance, at point 999 of 64 files.
func TestCalibrationNamesAtTheLimits(t *testing.T) {
	inst, db := strings.Repeat("i", 64), strings.Repeat("𝔇", 128)
	l, err := CalibrationLayout([]string{`\\bak01\b`}, inst, db, strings.Repeat("a", 12), 999, 64)
	if err != nil {
		t.Fatalf("longest names: %v", err)
	}
	if n := len(l[63].Name); n > MaxFileNameLen {
		t.Errorf("%d bytes", n)
	}
	// Two long names sharing their start keep apart.
	other := strings.Repeat("𝔇", 127) + "x"
	if CalibrationFilePrefix(inst, db) == CalibrationFilePrefix(inst, other) ||
		strings.HasPrefix(CalibrationFilePrefix(inst, other), CalibrationFilePrefix(inst, db)) {
		t.Error("two long database names share their calibration prefix")
	}
	// A path over 259 characters says so.
	if _, err := CalibrationLayout([]string{`\\bak01\` + strings.Repeat("d", 200)}, inst, "Sales", "t", 1, 1); err == nil ||
		!strings.Contains(err.Error(), "unc_paths") {
		t.Errorf("long path: %v", err)
	}
}

// Every calibration file parses back to its owner, token and point, and is
// told apart from those of a database whose name merely starts the same way
// (the prefix calibration~sql01@Sales_ also starts Sales_x's files).
func TestCalibrationFileOwner(t *testing.T) {
	long := strings.Repeat("Ü", 120)
	dbs := []string{"Sales", "Sales_x", "Sales_01a2b3c4d5e6", "a@b_c", long, long + "_2"}
	for _, db := range dbs {
		l, err := CalibrationLayout([]string{`\\bak01\backup`}, "sql01", db, "01a2b3c4d5e6", 12, 3)
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range l {
			p, ok := ParseCalibrationFileName(s.Name)
			if !ok || p.Token != "01a2b3c4d5e6" || p.Point != 12 || p.Index != i+1 || p.Count != 3 {
				t.Fatalf("%s parses as %+v %v", s.Name, p, ok)
			}
			for _, other := range dbs {
				for _, tok := range []string{"", "01a2b3c4d5e6", "x"} {
					want := other == db && tok != "x"
					if got := IsCalibrationFileOf(s.Name, "sql01", other, tok); got != want {
						t.Errorf("IsCalibrationFileOf(%s, %q, token %q) = %v, want %v", s.Name, other, tok, got, want)
					}
				}
			}
			if IsCalibrationFileOf(s.Name, "sql02", db, "") {
				t.Errorf("%s counted as sql02's", s.Name)
			}
		}
	}
	for _, bad := range []string{"calibration~sql01@Sales.json", "calibration~sql01@Sales_tok_p1_1of2.bak.partial",
		"calibration~sql01@Sales_tok_p1_3of2.bak", "calibration~sql01@Sales_to.k_p1_1of2.bak", "calibration~_tok_p1_1of1.bak",
		"sql01@Sales_00000001_1of1.bak", "calibration~sql01@Sales_tok_px_1of2.bak"} {
		if p, ok := ParseCalibrationFileName(bad); ok {
			t.Errorf("%s parses as %+v", bad, p)
		}
	}
}
