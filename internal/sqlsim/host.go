package sqlsim

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/backupcycle/backupcycle/internal/sqlsim/tds"
)

// The host an instance runs on and what it can host: its operating system
// (sys.dm_os_host_info), its configuration options (sys.configurations),
// its accelerators (sys.dm_server_accelerator_status), the free space of
// its volumes (sys.dm_os_volume_stats), which paths exist
// (sys.dm_os_file_exists), and what a RESTORE refuses because of them.

// Platforms of Config.Platform, as sys.dm_os_host_info.host_platform
// names them.
const (
	PlatformWindows = "Windows"
	PlatformLinux   = "Linux"
)

// Configuration options the emulator knows (sys.configurations), with
// their defaults out of the box and the first version that has them:
//   - "filestream access level" 0: FILESTREAM disabled
//     (https://learn.microsoft.com/en-us/sql/database-engine/configure-windows/filestream-access-level-server-configuration-option);
//   - "contained database authentication" 0
//     (https://learn.microsoft.com/en-us/sql/database-engine/configure-windows/contained-database-authentication-server-configuration-option);
//   - "backup compression default" 0;
//   - "backup compression algorithm" 1 (MS_XPRESS; 2 is QAT_DEFLATE),
//     SQL Server 2022 on Windows only
//     (https://learn.microsoft.com/en-us/sql/database-engine/configure-windows/view-or-configure-the-backup-compression-algorithm-server-configuration-option);
//   - "hardware offload enabled" 0, SQL Server 2022
//     (https://learn.microsoft.com/en-us/sql/relational-databases/integrated-acceleration/use-integrated-acceleration-and-offloading).
var configOptions = []struct {
	id       int64
	name     string
	def, max int64
	major    int
}{
	{1562, "backup compression algorithm", 1, 3, 16},
	{1579, "backup compression default", 0, 1, 13},
	{16387, "contained database authentication", 0, 1, 13},
	{1580, "filestream access level", 0, 2, 13},
	{1601, "hardware offload enabled", 0, 1, 16},
}

// Option names for Config.Configuration and SetConfiguration.
const (
	OptionFilestreamAccessLevel   = "filestream access level"
	OptionContainedAuthentication = "contained database authentication"
	OptionBackupCompressionAlg    = "backup compression algorithm"
	OptionHardwareOffload         = "hardware offload enabled"
)

// Backup compression algorithms of "backup compression algorithm" and
// RESTORE HEADERONLY's CompressionAlgorithm.
const (
	compressionMSXpress = 1
	compressionQAT      = 2
)

// checkHostConfig validates and defaults Platform, Configuration and QAT.
func checkHostConfig(cfg *Config) error {
	switch strings.ToLower(cfg.Platform) {
	case "", "windows":
		cfg.Platform = PlatformWindows
	case "linux":
		cfg.Platform = PlatformLinux
		// SQL Server on Linux starts with 2017 (14.x), and Intel QAT is
		// "currently not supported" there (sys.dm_server_accelerator_status,
		// NONE_HARDWARE_OFFLOAD_LINUX_NOT_SUPPORTED).
		if cfg.MajorVersion < 14 {
			return fmt.Errorf("sqlsim: SQL Server %d does not run on Linux; use MajorVersion 14 or later", cfg.MajorVersion)
		}
		if cfg.QAT {
			return fmt.Errorf("sqlsim: Config.QAT: Intel QAT is not supported on Linux")
		}
	default:
		return fmt.Errorf("sqlsim: Config.Platform %q is unknown; use Windows or Linux", cfg.Platform)
	}
	if cfg.QAT && cfg.MajorVersion < 16 {
		return fmt.Errorf("sqlsim: Config.QAT: integrated acceleration starts with SQL Server 2022 (MajorVersion 16)")
	}
	conf := map[string]int64{}
	for name, v := range cfg.Configuration {
		if err := checkOption(cfg, name, v); err != nil {
			return err
		}
		conf[strings.ToLower(name)] = v
	}
	cfg.Configuration = conf
	return nil
}

func checkOption(cfg *Config, name string, v int64) error {
	for _, o := range configOptions {
		if strings.EqualFold(o.name, name) {
			if cfg.MajorVersion < o.major {
				return fmt.Errorf("sqlsim: configuration option %q starts with SQL Server major version %d", name, o.major)
			}
			if v < 0 || v > o.max {
				return fmt.Errorf("sqlsim: configuration option %q: %d is outside 0..%d", name, v, o.max)
			}
			return nil
		}
	}
	return fmt.Errorf("sqlsim: configuration option %q is not emulated", name)
}

// SetConfiguration sets a configuration option's value in use, as
// sp_configure followed by RECONFIGURE (and a restart, for the options
// that need one) would.
func (in *Instance) SetConfiguration(name string, v int64) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if err := checkOption(&in.cfg, name, v); err != nil {
		return err
	}
	in.cfg.Configuration[strings.ToLower(name)] = v
	return nil
}

// option is a configuration option's value in use.
func (in *Instance) option(name string) int64 {
	in.mu.Lock()
	defer in.mu.Unlock()
	if v, ok := in.cfg.Configuration[name]; ok {
		return v
	}
	for _, o := range configOptions {
		if o.name == name {
			return o.def
		}
	}
	return 0
}

func (in *Instance) linux() bool { return in.cfg.Platform == PlatformLinux }

// osMissing is the operating system error SQL Server quotes for a path
// whose directory does not exist: 3 (ERROR_PATH_NOT_FOUND) on Windows; SQL
// Server on Linux reports ENOENT as 2 (ERROR_FILE_NOT_FOUND) whether the
// file or its directory is missing (the Windows codes it maps errno to:
// https://learn.microsoft.com/en-us/windows/win32/debug/system-error-codes--0-499-).
func (in *Instance) osMissing() string {
	if in.linux() {
		return osFileNotFound
	}
	return osPathNotFound
}

// linuxPath is a path as SQL Server on Linux sees it: it has no UNC paths
// and takes a backslash for a directory separator, so \\host\share\x.bak
// becomes //host/share/x.bak, a directory that does not exist
// (https://learn.microsoft.com/en-us/sql/linux/sql-server-linux-backup-and-restore-database:
// backups go to a local path or a mounted share).
func linuxPath(p string) string { return strings.ReplaceAll(p, `\`, "/") }

// serverStateDenied is the error of a DMV read without VIEW SERVER STATE
// (SQL Server 2022: VIEW SERVER PERFORMANCE STATE): 300 then 297; nil when
// the login holds it.
func (x *execCtx) serverStateDenied() error {
	if x.in.canSeeAllRequests(x.sessionLogin()) {
		return nil
	}
	perm := "VIEW SERVER STATE"
	if x.in.cfg.MajorVersion >= 16 {
		perm = "VIEW SERVER PERFORMANCE STATE"
	}
	return tds.Errors{
		sqlErr(300, 14, "%s permission was denied on object 'server', database 'master'.", perm),
		sqlErr(297, 16, "The user does not have permission to perform this action."),
	}
}

// hostView answers the host views; ok is false for other names.
func (x *execCtx) hostView(name, qual string) (rel *relation, ok bool, err error) {
	switch name {
	case "dm_os_host_info":
		// SQL Server 2017 and later; on 2019 and earlier public may read
		// it, on 2022 it needs VIEW SERVER PERFORMANCE STATE
		// (https://learn.microsoft.com/en-us/sql/relational-databases/system-dynamic-management-views/sys-dm-os-host-info-transact-sql).
		if x.in.cfg.MajorVersion < 14 {
			return nil, true, errInvalidObject("sys.dm_os_host_info")
		}
		if x.in.cfg.MajorVersion >= 16 {
			if err := x.serverStateDenied(); err != nil {
				return nil, true, err
			}
		}
		rel = &relation{cols: []relCol{col(qual, "host_platform", tds.TypeNVarChar, 256), col(qual, "host_distribution", tds.TypeNVarChar, 256),
			col(qual, "host_release", tds.TypeNVarChar, 256), col(qual, "host_service_pack_level", tds.TypeNVarChar, 256),
			col(qual, "host_sku", tds.TypeInt, 0), col(qual, "os_language_version", tds.TypeInt, 0)}}
		if x.in.linux() {
			rel.rows = [][]any{{PlatformLinux, "Ubuntu", "22.04", "", nil, int64(1033)}}
		} else {
			rel.rows = [][]any{{PlatformWindows, "Windows Server 2022 Standard", "10.0", "", int64(7), int64(1033)}}
		}
		return rel, true, nil
	case "configurations":
		// Readable by public
		// (https://learn.microsoft.com/en-us/sql/relational-databases/system-catalog-views/sys-configurations-transact-sql#permissions).
		rel = &relation{cols: []relCol{col(qual, "configuration_id", tds.TypeInt, 0), col(qual, "name", tds.TypeNVarChar, 35),
			col(qual, "value", tds.TypeInt, 0), col(qual, "minimum", tds.TypeInt, 0), col(qual, "maximum", tds.TypeInt, 0),
			col(qual, "value_in_use", tds.TypeInt, 0), col(qual, "is_dynamic", tds.TypeBit, 0), col(qual, "is_advanced", tds.TypeBit, 0)}}
		for _, o := range configOptions {
			if x.in.cfg.MajorVersion < o.major {
				continue
			}
			v := x.in.option(o.name)
			rel.rows = append(rel.rows, []any{o.id, o.name, v, int64(0), o.max, v, true, o.name != OptionContainedAuthentication})
		}
		return rel, true, nil
	case "dm_server_accelerator_status":
		// SQL Server 2022 and later
		// (https://learn.microsoft.com/en-us/sql/relational-databases/system-dynamic-management-views/sys-dm-server-accelerator-status-transact-sql).
		if x.in.cfg.MajorVersion < 16 {
			return nil, true, errInvalidObject("sys.dm_server_accelerator_status")
		}
		if err := x.serverStateDenied(); err != nil {
			return nil, true, err
		}
		mode, reason := "HARDWARE", "HARDWARE_MODE_ACCELERATOR_FOUND"
		switch {
		case x.in.linux():
			mode, reason = "NONE", "NONE_HARDWARE_OFFLOAD_LINUX_NOT_SUPPORTED"
		case !x.in.cfg.QAT || x.in.option(OptionHardwareOffload) == 0:
			mode, reason = "NONE", "NONE_HARDWARE_OFFLOAD_NOT_ENABLED"
		}
		rel = &relation{cols: []relCol{col(qual, "accelerator", tds.TypeNVarChar, 60), col(qual, "accelerator_desc", tds.TypeNVarChar, 60),
			col(qual, "mode_desc", tds.TypeNVarChar, 60), col(qual, "mode_reason_desc", tds.TypeNVarChar, 60)}}
		rel.rows = [][]any{{"QAT", "Intel(R) QuickAssist Technology", mode, reason}}
		return rel, true, nil
	}
	return nil, false, nil
}

// qatAvailable: QAT_DEFLATE backups can be written and read here: "To back
// up or restore databases with Intel QAT accelerated compression, you must
// install Intel QAT drivers" (Integrated offloading and acceleration,
// https://learn.microsoft.com/en-us/sql/relational-databases/integrated-acceleration/overview).
func (in *Instance) qatAvailable() bool {
	return in.cfg.QAT && !in.linux() && in.cfg.MajorVersion >= 16 && in.option(OptionHardwareOffload) == 1
}

// qatRefused is the failure of a RESTORE (or VERIFYONLY) of a QAT_DEFLATE
// backup on an instance that cannot decompress it. Learn documents that
// restoring one needs the Intel QAT drivers (see qatAvailable), not the
// error: the emulator refuses the media as one it cannot process, 3241,
// which is what a cycle must never take for damage (it checks the
// compression algorithm before its RESTORE).
func (x *execCtx) qatRefused(op string, stripes []*stripe) error {
	if stripes[0].hdr.CompressionAlgorithm != compressionQAT || x.in.qatAvailable() {
		return nil
	}
	return opError(op, errIncorrectlyFormed(stripes[0].path))
}

// compressionAlgorithm is what BACKUP WITH COMPRESSION uses: the server's
// "backup compression algorithm" (2022), QAT_DEFLATE only where the
// accelerator is loaded.
func (in *Instance) compressionAlgorithm() int {
	if in.cfg.MajorVersion >= 16 && in.option(OptionBackupCompressionAlg) == compressionQAT && in.qatAvailable() {
		return compressionQAT
	}
	return compressionMSXpress
}

// tableFunction answers FROM sys.dm_os_file_exists(path): one row saying
// whether the file exists, whether it is a directory and whether its
// parent directory exists, as the SQL Server service account sees it.
// SQL Server 2017 and later (enabled on Linux from 2017, "SQL Server 2017
// release notes", CTP 2.0); the function is undocumented, and public may
// call it, like xp_fileexist.
func (x *execCtx) tableFunction(f *fromClause) (*relation, error) {
	name := strings.ToLower(f.name.last())
	if name != "dm_os_file_exists" || x.in.cfg.MajorVersion < 14 {
		return nil, errInvalidObject(f.name.String())
	}
	if len(f.args) != 1 {
		return nil, sqlErr(216, 16, "Parameters were not supplied for the function '%s'.", f.name.String())
	}
	v, err := (&env{x: x}).eval(f.args[0])
	if err != nil {
		return nil, err
	}
	qual := strings.ToLower(name)
	if f.alias != "" {
		qual = strings.ToLower(f.alias)
	}
	rel := &relation{cols: []relCol{col(qual, "file_exists", tds.TypeBit, 0), col(qual, "file_is_a_directory", tds.TypeBit, 0),
		col(qual, "parent_directory_exists", tds.TypeBit, 0)}}
	exists, dir, parent := x.in.pathState(toString(v))
	rel.rows = [][]any{{exists, dir, parent}}
	return rel, nil
}

// pathState is whether p exists as a file or a directory, and whether its
// parent directory exists.
func (in *Instance) pathState(p string) (file, dir, parent bool) {
	t, oserr := in.mapPath(strings.TrimRight(p, `\/`))
	if t.null || oserr != "" || t.local == "" {
		return false, false, false
	}
	if pst, err := os.Stat(filepath.Dir(t.local)); err == nil && pst.IsDir() {
		parent = true
	}
	st, err := os.Stat(t.local)
	if err != nil {
		return false, false, parent
	}
	return !st.IsDir(), st.IsDir(), parent
}

// volumeOf is the volume a local path lies on: the share (or drive) it
// was mapped from, with its quota, or the local file system.
type volumeOf struct {
	mount            string // volume_mount_point; "" = NULL (Linux)
	total, available int64
	share            string // normalised share prefix; "" for the local file system
}

// volume describes the volume of a path as SQL Server sees it. A share
// with a quota (SetShareQuota) is a volume of that size; any other path is
// on the file system of the emulator's own directory.
func (in *Instance) volume(p string) volumeOf {
	t, _ := in.resolve(p)
	var v volumeOf
	in.mu.Lock()
	quota, hasQuota := int64(0), false
	if t.share != nil {
		v.share = t.share.prefix
		quota, hasQuota = in.faults.quota[t.share.prefix]
		v.mount = strings.TrimRight(t.share.raw, `\/`) + `\`
	}
	in.mu.Unlock()
	switch {
	case hasQuota:
		v.total = quota
		v.available = max(quota-dirUsage(in.shareDir(t.share)), 0)
	default:
		dir := in.cfg.DataDir
		if t.share != nil {
			dir = t.share.dir
		}
		v.total, v.available = diskSpace(dir)
		if t.share == nil {
			v.mount = `C:\`
		}
	}
	// "Returns null on Linux" for the mount point
	// (https://learn.microsoft.com/en-us/sql/relational-databases/system-dynamic-management-views/sys-dm-os-volume-stats-transact-sql).
	if in.linux() {
		v.mount = ""
	}
	return v
}

func (in *Instance) shareDir(s *shareMap) string {
	if s == nil {
		return in.cfg.DataDir
	}
	return s.dir
}

// applyVolumeStats joins each row with sys.dm_os_volume_stats(database_id,
// file_id): the volume holding that database file, its size and free
// space. It needs VIEW SERVER STATE (2022: VIEW SERVER PERFORMANCE STATE)
// (https://learn.microsoft.com/en-us/sql/relational-databases/system-dynamic-management-views/sys-dm-os-volume-stats-transact-sql#permissions).
func (x *execCtx) applyVolumeStats(rel *relation, f *fromClause) (*relation, error) {
	if err := x.serverStateDenied(); err != nil {
		return nil, err
	}
	qual := strings.ToLower(f.applyAlias)
	out := &relation{cols: append(append([]relCol(nil), rel.cols...),
		col(qual, "database_id", tds.TypeInt, 0), col(qual, "file_id", tds.TypeInt, 0),
		col(qual, "volume_mount_point", tds.TypeNVarChar, 512), col(qual, "total_bytes", tds.TypeBigInt, 0),
		col(qual, "available_bytes", tds.TypeBigInt, 0))}
	for _, row := range rel.rows {
		e := &env{x: x, rel: rel, row: row}
		dv, err := e.eval(f.applyArgs[0])
		if err != nil {
			return nil, err
		}
		fv, err := e.eval(f.applyArgs[1])
		if err != nil {
			return nil, err
		}
		dbID, ok1 := dv.(int64)
		fileID, ok2 := fv.(int64)
		if !ok1 || !ok2 {
			continue
		}
		d := x.in.dbByID(int(dbID))
		if d == nil {
			continue
		}
		var phys string
		for _, df := range x.in.filesOf(d) {
			if int64(df.FileID) == fileID {
				phys = df.Physical
			}
		}
		if phys == "" {
			continue // CROSS APPLY drops rows the function returns nothing for
		}
		v := x.in.volume(phys)
		var mount any = v.mount
		if v.mount == "" {
			mount = nil
		}
		out.rows = append(out.rows, append(append([]any(nil), row...), dbID, fileID, mount, v.total, v.available))
	}
	return out, nil
}

// filesOf are a database's files; tempdb's are its data and log files in
// the instance's data directory (8 MiB and 2 MiB, SQL Server's initial
// sizes), which the emulator does not write.
func (in *Instance) filesOf(d *database) []dbFile {
	if d.ID != 2 {
		return d.Files
	}
	dir := filepath.Join(in.cfg.DataDir, "data")
	return []dbFile{
		{FileID: 1, Logical: "tempdev", Path: filepath.Join(dir, "tempdb.mdf"), Physical: filepath.Join(dir, "tempdb.mdf"), Pages: 1024},
		{FileID: 2, Logical: "templog", Path: filepath.Join(dir, "templog.ldf"), Physical: filepath.Join(dir, "templog.ldf"), Pages: 256, Log: true},
	}
}

// restoreRefusals are the refusals of a RESTORE DATABASE that come from
// what the instance can host, before any file is planned: the media's
// compression, features the database uses, the edition's size limit.
func (x *execCtx) restoreRefusals(op string, stripes []*stripe) error {
	in := x.in
	h := stripes[0].hdr
	if err := x.qatRefused(op, stripes); err != nil {
		return err
	}
	var data int64
	for _, f := range h.Files {
		if f.Filestream && (in.linux() || in.option(OptionFilestreamAccessLevel) == 0) {
			// 5591 "FILESTREAM feature is disabled."
			// (https://learn.microsoft.com/en-us/sql/relational-databases/errors-events/database-engine-events-and-errors-5000-to-5999);
			// SQL Server on Linux has no FILESTREAM ("SQL Server on Linux
			// release notes", unsupported features).
			return opError(op, sqlErr(5591, 16, "FILESTREAM feature is disabled."))
		}
		if !f.Log && !f.Filestream {
			data += f.bytes()
		}
	}
	if h.Containment != 0 && in.option(OptionContainedAuthentication) == 0 {
		// 12824 (https://learn.microsoft.com/en-us/sql/relational-databases/errors-events/database-engine-events-and-errors-12000-to-13999).
		return opError(op, sqlErr(12824, 16, "The sp_configure value 'contained database authentication' must be set to 1 in order to restore a contained database.  You may need to use RECONFIGURE to set the value_in_use."))
	}
	if e := x.editionLimit(data); e != nil {
		return opError(op, e)
	}
	return nil
}

// restoreSpace checks the free space of the volumes a RESTORE's files go
// to, per volume, before anything is written: 3257 "There is insufficient
// free space on disk volume '%ls' to create the database. The database
// requires %I64u additional free bytes, while only %I64u bytes are
// available." then 3119
// (https://learn.microsoft.com/en-us/sql/relational-databases/errors-events/database-engine-events-and-errors-3000-to-3999).
// Files of the database REPLACE overwrites give their space back.
func (x *execCtx) restoreSpace(op string, plan []dbFile, existing *database) error {
	in := x.in
	need := map[string]int64{}
	vols := map[string]volumeOf{}
	for _, f := range plan {
		v := in.volume(f.Physical)
		key := v.share + "\x00" + v.mount
		vols[key] = v
		need[key] += f.bytes()
	}
	if existing != nil {
		for _, f := range existing.Files {
			v := in.volume(f.Physical)
			key := v.share + "\x00" + v.mount
			if _, ok := need[key]; ok {
				need[key] -= f.bytes()
			}
		}
	}
	keys := make([]string, 0, len(need))
	for k := range need {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := vols[k]
		if need[k] > v.available {
			name := v.mount
			if name == "" {
				name = filepath.Dir(firstOn(plan, in, k))
			}
			return opError(op, sqlErr(3257, 16, "There is insufficient free space on disk volume '%s' to create the database. The database requires %d additional free bytes, while only %d bytes are available.", name, need[k], v.available),
				sqlErr(3119, 16, "Problems were identified while planning for the RESTORE statement. Previous messages provide details."))
		}
	}
	return nil
}

// firstOn is the SQL Server path of the first planned file on volume key.
func firstOn(plan []dbFile, in *Instance, key string) string {
	for _, f := range plan {
		v := in.volume(f.Physical)
		if v.share+"\x00"+v.mount == key {
			return linuxPath(f.Physical)
		}
	}
	return ""
}

// expressMaxBytes is Express's "Maximum relational database size: 10 GB"
// ("Editions and supported features of SQL Server 2022", Scale limits),
// counted over the data files (neither the log nor FILESTREAM data count): CREATE DATABASE,
// ALTER DATABASE and RESTORE beyond it fail with 1827 "CREATE DATABASE or
// ALTER DATABASE failed because the resulting cumulative database size
// would exceed your licensed limit of %I64d MB per %S_MSG."
// (https://learn.microsoft.com/en-us/sql/relational-databases/errors-events/database-engine-events-and-errors-1000-to-1999).
const expressMaxBytes = 10240 << 20

// dataBytes is what counts against the edition's limit: the data files'
// allocated size, without the log and FILESTREAM.
func dataBytes(files []dbFile) int64 {
	var n int64
	for _, f := range files {
		if !f.Log && !f.Filestream {
			n += f.bytes()
		}
	}
	return n
}

func (x *execCtx) editionLimit(data int64) *tds.Error {
	if x.in.engineEdition() != 4 {
		return nil
	}
	if data > expressMaxBytes {
		return sqlErr(1827, 16, "CREATE DATABASE or ALTER DATABASE failed because the resulting cumulative database size would exceed your licensed limit of %d MB per database.", expressMaxBytes>>20)
	}
	return nil
}

// takeSpace charges a file created on a volume with a quota against it;
// false when the volume is full (another RESTORE took the space after
// this one's check).
func (in *Instance) takeSpace(f dbFile) bool {
	v := in.volume(f.Physical)
	if v.share == "" {
		return true
	}
	in.mu.Lock()
	_, quota := in.faults.quota[v.share]
	in.mu.Unlock()
	return !quota || f.bytes() <= v.available
}
