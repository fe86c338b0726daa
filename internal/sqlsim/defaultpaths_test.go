package sqlsim

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// SERVERPROPERTY('InstanceDefaultDataPath') and ('InstanceDefaultLogPath')
// name the directory a database is created in, with a trailing separator;
// a RESTORE with MOVE into it and the data transfer options restores there,
// and the options out of range (3250) or beyond memory (701) are refused
// before anything is read.
func TestDefaultPathsAndRestoreTransferOptions(t *testing.T) {
	src := newEnv(t)
	src.create(t, DatabaseSpec{Name: "Sales", Size: 2 << 20})
	target := src.peer(t, "sql02")
	r := mustRun(t, target.db, "SELECT SERVERPROPERTY('InstanceDefaultDataPath'), SERVERPROPERTY('InstanceDefaultLogPath')")
	data, _ := r.rows[0][0].(string)
	logDir, _ := r.rows[0][1].(string)
	if !strings.HasSuffix(data, string(os.PathSeparator)) || data != logDir {
		t.Fatalf("default paths %q and %q, want one directory ending in a separator", data, logDir)
	}
	if st, err := os.Stat(data); err != nil || !st.IsDir() {
		t.Fatalf("default data path %q: %v", data, err)
	}
	set := []string{`\\bak01\backup\Sales_full_1of1.bak`}
	mustRun(t, src.db, "BACKUP DATABASE [Sales] TO "+disks(set)+" WITH INIT, FORMAT, BUFFERCOUNT = 8, MAXTRANSFERSIZE = 2097152")
	from := disks(set)
	// Every file into the default directories, as a restore to a new home
	// does.
	var moves []string
	for i, f := range mustRun(t, target.db, "RESTORE FILELISTONLY FROM "+from).rows {
		dir := data
		if f[2] == "L" {
			dir = logDir
		}
		moves = append(moves, fmt.Sprintf("MOVE N'%s' TO N'%s'", f[0], filepath.Join(dir, fmt.Sprintf("Sales_r_%d", i))))
	}
	with := strings.Join(moves, ", ")
	wantErrs(t, target.db, []int32{3250, 3013}, "RESTORE DATABASE [Sales_r] FROM "+from+" WITH "+with+", MAXTRANSFERSIZE = 100000")
	wantErrs(t, target.db, []int32{3250, 3013}, "RESTORE DATABASE [Sales_r] FROM "+from+" WITH "+with+", BUFFERCOUNT = 0")
	wantErrs(t, target.db, []int32{701, 3013}, "RESTORE DATABASE [Sales_r] FROM "+from+" WITH "+with+", BUFFERCOUNT = 4096, MAXTRANSFERSIZE = 4194304")
	mustRun(t, target.db, "RESTORE DATABASE [Sales_r] FROM "+from+" WITH "+with+", CHECKSUM, NORECOVERY, BUFFERCOUNT = 8, MAXTRANSFERSIZE = 2097152")
	mustRun(t, target.db, "RESTORE DATABASE [Sales_r] WITH RECOVERY")
	if r := mustRun(t, target.db, "SELECT state_desc FROM sys.databases WHERE name = N'Sales_r'"); len(r.rows) != 1 || r.rows[0][0] != "ONLINE" {
		t.Fatalf("restored copy: %v", r.rows)
	}
	if _, err := os.Stat(filepath.Join(data, "Sales_r_0")); err != nil {
		t.Fatalf("the first file is not in the default data path: %v", err)
	}
}
