package sqlsim

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// hostPair is a source instance with a database backed up to its share,
// and a second instance (the verification instance, shaped by mod) that
// reads that share as \\src\backup.
type hostPair struct {
	src, dst *testEnv
	stripe   string // the backup as dst names it
}

func newHostPair(t *testing.T, spec DatabaseSpec, srcMod, dstMod func(*Config)) *hostPair {
	t.Helper()
	if srcMod == nil {
		srcMod = func(*Config) {}
	}
	if dstMod == nil {
		dstMod = func(*Config) {}
	}
	p := &hostPair{src: newEnv(t, srcMod), dst: newEnv(t, dstMod)}
	p.src.create(t, spec)
	mustRun(t, p.src.db, fmt.Sprintf(`BACKUP DATABASE [%s] TO DISK = '\\bak01\backup\h.bak' WITH INIT, FORMAT, COMPRESSION`, spec.Name))
	if err := p.dst.in.AddShare(`\\src\backup`, p.src.shareDir); err != nil {
		t.Fatal(err)
	}
	p.stripe = `\\src\backup\h.bak`
	return p
}

// restore is the RESTORE of the pair's backup into dir (as dst sees it).
func (p *hostPair) restore(name, dir string) string {
	return fmt.Sprintf(`RESTORE DATABASE [%s] FROM DISK = '%s' WITH REPLACE, MOVE 'H' TO '%s\h.mdf', MOVE 'H_log' TO '%s\h.ldf'`,
		name, p.stripe, dir, dir)
}

func resultErrors(r *result) string {
	var s []string
	for _, e := range r.errs {
		s = append(s, fmt.Sprintf("%d %s", e.Number, e.Message))
	}
	return strings.Join(s, " | ")
}

// sys.dm_os_host_info says which operating system the instance runs on; it
// exists from SQL Server 2017.
func TestHostInfo(t *testing.T) {
	for _, tc := range []struct {
		platform string
		major    int
		want     string
	}{{"", 16, PlatformWindows}, {"linux", 15, PlatformLinux}, {"Linux", 16, PlatformLinux}} {
		e := newEnv(t, func(c *Config) { c.Platform, c.MajorVersion = tc.platform, tc.major })
		r := mustRun(t, e.db, "SELECT host_platform, host_distribution FROM sys.dm_os_host_info")
		if len(r.rows) != 1 || r.rows[0][0] != tc.want {
			t.Errorf("%q on %d: %v, want %s", tc.platform, tc.major, r.rows, tc.want)
		}
	}
	old := newEnv(t, func(c *Config) { c.MajorVersion = 13 })
	mustFail(t, old.db, 208, "SELECT host_platform FROM sys.dm_os_host_info")
	if _, err := New(Config{DataDir: t.TempDir(), Platform: "Linux", MajorVersion: 13}); err == nil {
		t.Error("SQL Server 2016 on Linux was accepted")
	}
}

// sys.configurations shows each option's value in use; SetConfiguration
// changes it as sp_configure and RECONFIGURE would.
func TestConfigurations(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Configuration = map[string]int64{OptionFilestreamAccessLevel: 2} })
	q := "SELECT CAST(value_in_use AS int) FROM sys.configurations WHERE name = @p1"
	if r := mustRun(t, e.db, q, OptionFilestreamAccessLevel); len(r.rows) != 1 || r.rows[0][0] != int64(2) {
		t.Errorf("filestream access level: %v", r.rows)
	}
	if r := mustRun(t, e.db, q, OptionContainedAuthentication); len(r.rows) != 1 || r.rows[0][0] != int64(0) {
		t.Errorf("contained database authentication: %v", r.rows)
	}
	if err := e.in.SetConfiguration(OptionContainedAuthentication, 1); err != nil {
		t.Fatal(err)
	}
	if r := mustRun(t, e.db, q, OptionContainedAuthentication); len(r.rows) != 1 || r.rows[0][0] != int64(1) {
		t.Errorf("after SetConfiguration: %v", r.rows)
	}
	if err := e.in.SetConfiguration("max server memory (MB)", 1); err == nil {
		t.Error("an option the emulator does not know was accepted")
	}
}

// Express holds at most 10 GB of data per database: a RESTORE of a larger
// one fails with 1827. The size is the files' allocated size (FILELISTONLY
// Size), not what the backup holds: a database of 11 GiB mostly free backs
// up small and still does not fit.
func TestExpressRestoreLimit(t *testing.T) {
	p := newHostPair(t, DatabaseSpec{Name: "H", Size: 1 << 20, FreeSize: 11 << 30}, nil,
		func(c *Config) { c.Edition = "Express" })
	r := mustRun(t, p.dst.db, "RESTORE FILELISTONLY FROM DISK = '"+p.stripe+"'")
	if size, _ := r.rows[0][4].([]byte); string(size) != fmt.Sprint((1<<20)+(11<<30)+bootPages*PageSize) {
		t.Errorf("FILELISTONLY Size %s, want the allocated size", size)
	}
	if fi, err := os.Stat(filepath.Join(p.src.shareDir, "h.bak")); err != nil || fi.Size() > 64<<20 {
		t.Errorf("backup of a mostly free database: %v, %d bytes", err, fi.Size())
	}
	r = mustFail(t, p.dst.db, 3013, p.restore("H", `R:\restore`))
	if r.errNums()[0] != 1827 || !strings.Contains(r.errs[0].Message, "10240 MB") {
		t.Errorf("restore on Express: %s", resultErrors(r))
	}
	// On Developer it restores.
	dev := newEnv(t)
	if err := dev.in.AddShare(`\\src\backup`, p.src.shareDir); err != nil {
		t.Fatal(err)
	}
	mustRun(t, dev.db, p.restore("H", `R:\restore`))
	r = mustRun(t, dev.db, "SELECT size FROM sys.master_files WHERE database_id = DB_ID('H') AND file_id = 1")
	if r.rows[0][0] != int64((1<<20+11<<30)/PageSize+bootPages) {
		t.Errorf("restored file size %v pages", r.rows[0][0])
	}
}

// FILESTREAM: a backup with a FILESTREAM container restores only where
// FILESTREAM is enabled (5591 otherwise), never on Linux; a contained
// database only where contained database authentication is 1 (12824).
func TestRestoreNeedsFeatures(t *testing.T) {
	p := newHostPair(t, DatabaseSpec{Name: "H", Filestream: true, Contained: true}, nil, nil)
	r := mustRun(t, p.dst.db, "RESTORE FILELISTONLY FROM DISK = '"+p.stripe+"'")
	var types []string
	for _, row := range r.rows {
		types = append(types, fmt.Sprint(row[2]))
	}
	if strings.Join(types, "") != "DLS" {
		t.Errorf("FILELISTONLY types %v, want D L S", types)
	}
	r = mustRun(t, p.dst.db, "RESTORE HEADERONLY FROM DISK = '"+p.stripe+"'")
	if c := r.rows[0][indexOf(r.cols, "Containment")]; c != int64(1) {
		t.Errorf("HEADERONLY Containment %v", c)
	}
	restore := fmt.Sprintf(`RESTORE DATABASE [H] FROM DISK = '%s' WITH MOVE 'H' TO 'R:\restore\h.mdf', MOVE 'H_log' TO 'R:\restore\h.ldf', MOVE 'H_fs' TO 'R:\restore\h_fs'`, p.stripe)
	r = mustFail(t, p.dst.db, 3013, restore)
	if r.errNums()[0] != 5591 {
		t.Errorf("FILESTREAM disabled: %s", resultErrors(r))
	}
	if err := p.dst.in.SetConfiguration(OptionFilestreamAccessLevel, 2); err != nil {
		t.Fatal(err)
	}
	r = mustFail(t, p.dst.db, 3013, restore)
	if r.errNums()[0] != 12824 {
		t.Errorf("contained database authentication off: %s", resultErrors(r))
	}
	if err := p.dst.in.SetConfiguration(OptionContainedAuthentication, 1); err != nil {
		t.Fatal(err)
	}
	mustRun(t, p.dst.db, restore)
	r = mustRun(t, p.dst.db, "SELECT containment, containment_desc FROM sys.databases WHERE name = 'H'")
	if r.rows[0][0] != int64(1) || r.rows[0][1] != "PARTIAL" {
		t.Errorf("restored containment %v", r.rows)
	}
	r = mustRun(t, p.dst.db, "SELECT type, type_desc FROM sys.master_files WHERE database_id = DB_ID('H') ORDER BY file_id")
	if len(r.rows) != 3 || r.rows[2][0] != int64(2) || r.rows[2][1] != "FILESTREAM" {
		t.Errorf("restored files %v", r.rows)
	}

	lin := newEnv(t, func(c *Config) {
		c.Platform, c.MajorVersion = PlatformLinux, 16
		c.Configuration = map[string]int64{OptionFilestreamAccessLevel: 2, OptionContainedAuthentication: 1}
	})
	if err := lin.in.AddShare(`/mnt/src`, p.src.shareDir); err != nil {
		t.Fatal(err)
	}
	r = mustFail(t, lin.db, 3013, strings.ReplaceAll(strings.ReplaceAll(restore, p.stripe, "/mnt/src/h.bak"), `R:\restore\`, "R:/restore/"))
	if r.errNums()[0] != 5591 {
		t.Errorf("FILESTREAM on Linux: %s", resultErrors(r))
	}
}

func indexOf(cols []string, name string) int {
	for i, c := range cols {
		if c == name {
			return i
		}
	}
	return -1
}

// A backup compressed with QAT_DEFLATE (the server's backup compression
// algorithm 2 with the accelerator loaded) restores only where the Intel
// QAT drivers are: elsewhere the RESTORE fails.
func TestQATCompressedBackup(t *testing.T) {
	qat := func(c *Config) {
		c.QAT = true
		c.Configuration = map[string]int64{OptionHardwareOffload: 1, OptionBackupCompressionAlg: 2}
	}
	p := newHostPair(t, DatabaseSpec{Name: "H"}, qat, nil)
	r := mustRun(t, p.dst.db, "RESTORE HEADERONLY FROM DISK = '"+p.stripe+"'")
	if alg := r.rows[0][indexOf(r.cols, "CompressionAlgorithm")]; alg != "QAT_DEFLATE" {
		t.Fatalf("CompressionAlgorithm %v", alg)
	}
	r = mustRun(t, p.dst.db, "SELECT mode_desc, mode_reason_desc FROM sys.dm_server_accelerator_status")
	if r.rows[0][0] != "NONE" {
		t.Errorf("accelerator without drivers: %v", r.rows)
	}
	mustFail(t, p.dst.db, 3013, p.restore("H", `R:\restore`))
	mustFail(t, p.dst.db, 3013, "RESTORE VERIFYONLY FROM DISK = '"+p.stripe+"'")
	with := newEnv(t, qat)
	if err := with.in.AddShare(`\\src\backup`, p.src.shareDir); err != nil {
		t.Fatal(err)
	}
	mustRun(t, with.db, p.restore("H", `R:\restore`))
	r = mustRun(t, with.db, "SELECT mode_desc FROM sys.dm_server_accelerator_status")
	if r.rows[0][0] != "HARDWARE" {
		t.Errorf("accelerator with drivers: %v", r.rows)
	}
	mustFail(t, newEnv(t, func(c *Config) { c.MajorVersion = 15 }).db, 208, "SELECT mode_desc FROM sys.dm_server_accelerator_status")
}

// A RESTORE that does not fit the free space of its volume fails before it
// writes anything (3257 with the sizes); sys.dm_os_volume_stats reports the
// volume's size and free space per database file.
func TestRestoreFreeSpace(t *testing.T) {
	p := newHostPair(t, DatabaseSpec{Name: "H", Size: 1 << 20, FreeSize: 64 << 20}, nil, nil)
	p.dst.in.SetShareQuota(`R:\restore`, 32<<20)
	r := mustFail(t, p.dst.db, 3013, p.restore("H", `R:\restore`))
	if nums := r.errNums(); len(nums) != 3 || nums[0] != 3257 || nums[1] != 3119 ||
		!strings.Contains(r.errs[0].Message, `R:\restore\`) || !strings.Contains(r.errs[0].Message, fmt.Sprint(32<<20)) {
		t.Errorf("restore over the free space: %s", resultErrors(r))
	}
	if entries, _ := os.ReadDir(p.dst.restoreDir); len(entries) != 0 {
		t.Errorf("files left in the restore directory: %v", entries)
	}
	p.dst.in.SetShareQuota(`R:\restore`, 128<<20)
	mustRun(t, p.dst.db, p.restore("H", `R:\restore`))
	r = mustRun(t, p.dst.db, `SELECT f.physical_name, v.volume_mount_point, v.total_bytes, v.available_bytes
		FROM sys.master_files AS f CROSS APPLY sys.dm_os_volume_stats(f.database_id, f.file_id) AS v WHERE f.database_id = DB_ID('H')`)
	if len(r.rows) != 2 {
		t.Fatalf("volume stats %v", r.rows)
	}
	used := int64(1<<20+64<<20+bootPages*PageSize) + 64*PageSize // data + log files
	if r.rows[0][1] != `R:\restore\` || r.rows[0][2] != int64(128<<20) || r.rows[0][3] != int64(128<<20)-used {
		t.Errorf("volume of the restored data file: %v (want %d available)", r.rows[0], int64(128<<20)-used)
	}
	// A REPLACE reuses the space of the copy it overwrites.
	mustRun(t, p.dst.db, p.restore("H", `R:\restore`))
}

// Directories that do not exist: a RESTORE fails planning with 5133 and
// 3156 (operating system error 3 on Windows, 2 on Linux); a BACKUP on Linux
// to a missing directory or to a UNC path (which SQL Server on Linux reads
// as a local path) with operating system error 2.
func TestMissingDirectories(t *testing.T) {
	p := newHostPair(t, DatabaseSpec{Name: "H"}, nil, nil)
	r := mustFail(t, p.dst.db, 3013, p.restore("H", `R:\restore\nodir`))
	if nums := r.errNums(); nums[0] != 5133 || nums[1] != 3156 || !strings.Contains(r.errs[0].Message, "error 3(") {
		t.Errorf("restore into a missing directory: %s", resultErrors(r))
	}
	r = mustRun(t, p.dst.db, `SELECT file_exists, file_is_a_directory, parent_directory_exists FROM sys.dm_os_file_exists('R:\restore\nodir')`)
	if r.rows[0][0] != false || r.rows[0][1] != false || r.rows[0][2] != true {
		t.Errorf("missing directory: %v", r.rows)
	}
	r = mustRun(t, p.dst.db, `SELECT file_exists, file_is_a_directory FROM sys.dm_os_file_exists('R:\restore')`)
	if r.rows[0][0] != false || r.rows[0][1] != true {
		t.Errorf("existing directory: %v", r.rows)
	}

	lin := newEnv(t, func(c *Config) { c.Platform, c.MajorVersion = PlatformLinux, 15 })
	lin.create(t, DatabaseSpec{Name: "L"})
	if err := lin.in.AddShare(`/mnt/bak01`, lin.shareDir); err != nil {
		t.Fatal(err)
	}
	r = mustFail(t, lin.db, 3013, `BACKUP DATABASE [L] TO DISK = '/mnt/bak01/nodir/l.bak' WITH INIT, FORMAT`)
	if r.errNums()[0] != 3201 || !strings.Contains(r.errs[0].Message, "error 2(") {
		t.Errorf("BACKUP on Linux to a missing directory: %s", resultErrors(r))
	}
	r = mustFail(t, lin.db, 3013, `BACKUP DATABASE [L] TO DISK = '\\bak01\backup\l.bak' WITH INIT, FORMAT`)
	if r.errNums()[0] != 3201 || !strings.Contains(r.errs[0].Message, "'//bak01/backup/l.bak'") || !strings.Contains(r.errs[0].Message, "error 2(") {
		t.Errorf("BACKUP on Linux to a UNC path: %s", resultErrors(r))
	}
	mustRun(t, lin.db, `BACKUP DATABASE [L] TO DISK = '/mnt/bak01/l.bak' WITH INIT, FORMAT`)
	r = mustFail(t, lin.db, 3013, `RESTORE DATABASE [L2] FROM DISK = '/mnt/bak01/l.bak' WITH MOVE 'L' TO '/mnt/bak01/nodir/l.mdf', MOVE 'L_log' TO '/mnt/bak01/l.ldf'`)
	if r.errNums()[0] != 5133 || !strings.Contains(r.errs[0].Message, "error 2(") {
		t.Errorf("RESTORE on Linux into a missing directory: %s", resultErrors(r))
	}
}

// A file on a share that cannot grow any more (NTFS's limit on a heavily
// fragmented file) fails the BACKUP's write with operating system error 665.
func TestShareFileLimit(t *testing.T) {
	e := newEnv(t)
	e.create(t, DatabaseSpec{Name: "F", Size: 4 << 20})
	e.in.SetShareFileLimit(`\\bak01\backup`, 1<<20)
	r := mustFail(t, e.db, 3013, `BACKUP DATABASE [F] TO DISK = '\\bak01\backup\f.bak' WITH INIT, FORMAT`)
	if r.errNums()[0] != 3202 || !strings.Contains(r.errs[0].Message, "665(") {
		t.Errorf("BACKUP past the file limit: %s", resultErrors(r))
	}
	e.in.SetShareFileLimit(`\\bak01\backup`, 0)
	mustRun(t, e.db, `BACKUP DATABASE [F] TO DISK = '\\bak01\backup\f.bak' WITH INIT, FORMAT`)
}

// Express refuses to create a database over its limit too.
func TestExpressCreateLimit(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Edition = "Express" })
	if err := e.in.CreateDatabase(DatabaseSpec{Name: "Big", Size: 1 << 20, FreeSize: 11 << 30}); err == nil || !strings.Contains(err.Error(), "10240 MB") {
		t.Errorf("11 GiB on Express: %v", err)
	}
	e.create(t, DatabaseSpec{Name: "Small", Size: 1 << 20, FreeSize: 9 << 30})
}
