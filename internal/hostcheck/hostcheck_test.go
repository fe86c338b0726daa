package hostcheck

import (
	"strings"
	"testing"

	"github.com/backupcycle/backupcycle/internal/tsql"
)

const gib = int64(1) << 30

// The volume of a directory: the one of a file directly in it, else
// (Windows) the longest mount point above it; on Linux, where SQL Server
// reports no mount point, only a file in the directory tells.
func TestVolumeOf(t *testing.T) {
	files := []FileVolume{
		{Database: "master", Path: `C:\data\master.mdf`, Mount: `C:\`, Total: 100 * gib, Available: 50 * gib},
		{Database: "Kept", Path: `D:\restore\data\kept.mdf`, Mount: `D:\restore\`, Total: 10 * gib, Available: 2 * gib},
		{Database: "Kept", Path: `D:\restore\log\kept.ldf`, Mount: `D:\restore\`, Total: 10 * gib, Available: 2 * gib},
		{Database: "L", Path: "/var/opt/mssql/restore/data/l.mdf", Total: 20 * gib, Available: 5 * gib},
	}
	for _, tc := range []struct {
		dir, name string
		avail     int64
		ok        bool
	}{
		{`D:\restore\data`, `D:\restore\`, 2 * gib, true},
		{`d:\RESTORE\other\`, `D:\restore\`, 2 * gib, true}, // under the mount point, case and separators aside
		{`C:\somewhere`, `C:\`, 50 * gib, true},
		{`E:\restore`, "", 0, false},
		{"/var/opt/mssql/restore/data/", "/var/opt/mssql/restore/data/", 5 * gib, true},
		{"/var/opt/mssql/restore/log", "", 0, false},
	} {
		v, ok := VolumeOf(tc.dir, files)
		if ok != tc.ok || v.Name != tc.name || v.Available != tc.avail {
			t.Errorf("%s: %+v %v, want %s with %d available", tc.dir, v, ok, tc.name, tc.avail)
		}
	}
	if v, _ := VolumeOf(`D:\restore\data`, files); len(v.Files) != 2 {
		t.Errorf("files on D:\\restore\\: %v", v.Files)
	}
}

// A data and a log directory on one volume add up; the copy a REPLACE
// overwrites gives its space back; what else holds the volume is named.
func TestSpace(t *testing.T) {
	files := []FileVolume{
		{Database: "Sales_verify", Path: `D:\r\data\s.mdf`, Mount: `D:\`, Total: 10 * gib, Available: 3 * gib, Bytes: 2 * gib},
		{Database: "Old_verify", State: "RESTORING", Path: `D:\r\data\o.mdf`, Mount: `D:\`, Total: 10 * gib, Available: 3 * gib, Bytes: 4 * gib},
	}
	dirs := []DirNeed{{Key: "restore_data_dir", Dir: `D:\r\data`, Bytes: 3 * gib, What: "data"},
		{Key: "restore_log_dir", Dir: `D:\r\log`, Bytes: gib, What: "log"}}
	fs := Space("v", dirs, files, "")
	if len(fs) != 1 || !fs[0].Problem || !fs[0].Full || !strings.Contains(fs[0].Detail, "4.0 GiB needed") ||
		!strings.Contains(fs[0].Detail, "Old_verify (being restored) 4.0 GiB") {
		t.Errorf("without replacing: %+v", fs)
	}
	if fs := Space("v", dirs, files, "Sales_verify"); len(fs) != 1 || fs[0].Problem || !strings.Contains(fs[0].Detail, "gives back 2.0 GiB") {
		t.Errorf("replacing Sales_verify (3 GiB free + 2 GiB back >= 4 GiB): %+v", fs)
	}
	if fs := Space("v", []DirNeed{{Key: "restore_data_dir", Dir: `E:\x`, Bytes: gib}}, files, ""); len(fs) != 1 || fs[0].Problem || fs[0].Warn {
		t.Errorf("an unknown volume is not judged: %+v", fs)
	}
}

// What a database uses against what the instance offers.
func TestFeatures(t *testing.T) {
	express := Facts{Major: 16, EngineEdition: tsql.EngineEditionExpress, Edition: "Express Edition", Platform: Windows,
		Options: map[string]int64{}, QAT: "NONE"}
	big := Need{Database: "sql01/Sales", DataBytes: 11 * gib, LogBytes: 20 * gib, Filestream: true, Contained: true, QAT: true}
	got := map[string]bool{}
	for _, f := range Features("v", express, big) {
		got[f.Check] = f.Problem
	}
	if !got["edition"] || !got["FILESTREAM"] || !got["contained databases"] || !got["QAT"] {
		t.Errorf("Express without the features: %v", got)
	}
	// The log does not count against Express's 10 GB.
	if f := Features("v", express, Need{DataBytes: 9 * gib, LogBytes: 20 * gib})[0]; f.Problem {
		t.Errorf("9 GiB of data on Express: %+v", f)
	}
	ready := Facts{Major: 16, EngineEdition: tsql.EngineEditionEnterprise, Platform: Windows, QAT: "SOFTWARE",
		Options: map[string]int64{tsql.OptionFilestreamAccessLevel: 2, tsql.OptionContainedAuthentication: 1}}
	if f, ok := FirstProblem(Features("v", ready, big)); ok {
		t.Errorf("an instance with everything: %+v", f)
	}
	ready.Platform = Linux
	if f, ok := FirstProblem(Features("v", ready, big)); !ok || f.Check != "FILESTREAM" || !strings.Contains(f.Detail, "Linux") {
		t.Errorf("FILESTREAM on Linux: %+v", f)
	}
}

// UNC paths are refused on Linux only; an unknown platform is a warning.
func TestPaths(t *testing.T) {
	unc := []string{`\\bak01\backup`}
	if f := Paths("v", Facts{Platform: Windows}, "bak01", "unc_paths", unc); f.Problem || f.Warn {
		t.Errorf("Windows: %+v", f)
	}
	if f := Paths("v", Facts{Platform: Linux}, "bak01", "unc_paths", unc); !f.Problem || !strings.Contains(f.Fix, "sql_paths: {v: [/mnt/bak01]}") {
		t.Errorf("Linux: %+v", f)
	}
	if f := Paths("v", Facts{Platform: Linux}, "bak01", "sql_paths.v", []string{"/mnt/bak01"}); f.Problem {
		t.Errorf("Linux with its own path: %+v", f)
	}
	if f := Paths("v", Facts{}, "bak01", "unc_paths", unc); f.Problem || !f.Warn {
		t.Errorf("platform unknown: %+v", f)
	}
}
