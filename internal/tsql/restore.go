package tsql

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
)

// RestoreFileListOnly builds RESTORE FILELISTONLY FROM DISK = N'...', ...:
// the database files (LogicalName, PhysicalName, Type, FileId, ...) of the set.
func RestoreFileListOnly(disks []string) (string, error) {
	from, err := diskList(disks)
	if err != nil {
		return "", fmt.Errorf("RESTORE FILELISTONLY: %w", err)
	}
	return "RESTORE FILELISTONLY FROM " + from, nil
}

// RestoreHeaderOnly builds RESTORE HEADERONLY FROM DISK = N'...', ...: the
// backup set facts (BackupSetGUID, FirstLSN, LastLSN, dates, sizes).
func RestoreHeaderOnly(disks []string) (string, error) {
	from, err := diskList(disks)
	if err != nil {
		return "", fmt.Errorf("RESTORE HEADERONLY: %w", err)
	}
	return "RESTORE HEADERONLY FROM " + from, nil
}

// RestoreVerifyOnly builds RESTORE VERIFYONLY FROM DISK = ... [WITH CHECKSUM].
// It checks that the set is complete and readable; it is not a substitute for
// restoring and running CHECKDB (seed 000, "When Is a Backup Valid?").
func RestoreVerifyOnly(disks []string, checksum bool) (string, error) {
	from, err := diskList(disks)
	if err != nil {
		return "", fmt.Errorf("RESTORE VERIFYONLY: %w", err)
	}
	stmt := "RESTORE VERIFYONLY FROM " + from
	if checksum {
		stmt += " WITH CHECKSUM"
	}
	return stmt, nil
}

// Move relocates one logical database file during RESTORE (WITH MOVE).
type Move struct {
	LogicalName  string
	PhysicalName string // full path on the restoring instance
}

// RestoreOptions describe one RESTORE DATABASE statement.
type RestoreOptions struct {
	Database string   // name of the database to create/replace (unquoted)
	Disks    []string // every stripe of the set, any order
	Moves    []Move   // one per file of the set (see Moves)
	Checksum bool     // CHECKSUM: verify page and backup checksums, fail on a mismatch
	Replace  bool     // REPLACE: overwrite an existing database of that name
	// NoRecovery leaves the database RESTORING (for applying logs); the zero
	// value restores WITH RECOVERY, which is what verification needs.
	NoRecovery bool
	// StandbyFile, when set, leaves the database read-only between log
	// restores (STANDBY = N'undo file', as the restoring instance sees
	// it) instead of RECOVERY or NORECOVERY: a standby copy that takes the
	// log backups as they come ("RESTORE Statements - Arguments", STANDBY).
	StandbyFile string
	Stats       int // STATS = n; 0 omits
	// BufferCount and MaxTransferSize are RESTORE's data transfer options
	// (BUFFERCOUNT, MAXTRANSFERSIZE in bytes; 0 omits each): a restore
	// reads the set as fast as its BACKUP wrote it with the same tuning
	// ("RESTORE Statements - Arguments", Data Transfer Options).
	BufferCount     int
	MaxTransferSize int
	// NewBroker: NEW_BROKER, a Service Broker identifier of the copy's own;
	// its source's conversations are removed without end-dialog messages,
	// so nothing queued in the source is delivered from the copy ("RESTORE
	// Statements - Arguments", service_broker_WITH options:
	// https://learn.microsoft.com/en-us/sql/t-sql/statements/restore-statements-arguments-transact-sql;
	// "Service Broker backup and restore": when restoring a copy of a
	// database to a different location, change this identifier).
	NewBroker bool
}

// RestoreDatabase builds
//
//	RESTORE DATABASE [db] FROM DISK = N'...', ...
//	WITH MOVE N'logical' TO N'physical', ..., CHECKSUM, REPLACE,
//	{RECOVERY | NORECOVERY | STANDBY = N'...'}, NEW_BROKER,
//	BUFFERCOUNT = n, MAXTRANSFERSIZE = n, STATS = n
//
// (seed 000, "Restoring the Database to Test the Backup").
func RestoreDatabase(o RestoreOptions) (string, error) {
	db, err := QuoteIdent(o.Database)
	if err != nil {
		return "", fmt.Errorf("RESTORE DATABASE: %w", err)
	}
	from, err := diskList(o.Disks)
	if err != nil {
		return "", fmt.Errorf("RESTORE DATABASE %s: %w", db, err)
	}
	if err := checkStats(o.Stats); err != nil {
		return "", fmt.Errorf("RESTORE DATABASE %s: %w", db, err)
	}
	if err := CheckTuning(o.BufferCount, o.MaxTransferSize, 0); err != nil {
		return "", fmt.Errorf("RESTORE DATABASE %s: %w", db, err)
	}
	var with []string
	logical := make(map[string]bool, len(o.Moves))
	physical := make(map[string]bool, len(o.Moves))
	for _, m := range o.Moves {
		if err := CheckIdent(m.LogicalName); err != nil {
			return "", fmt.Errorf("RESTORE DATABASE %s: MOVE logical file name: %w", db, err)
		}
		if m.PhysicalName == "" {
			return "", fmt.Errorf("RESTORE DATABASE %s: %w: MOVE %q has no target path", db, ErrInvalidOption, m.LogicalName)
		}
		if logical[m.LogicalName] {
			return "", fmt.Errorf("RESTORE DATABASE %s: %w: logical file %q is moved twice", db, ErrInvalidOption, m.LogicalName)
		}
		key := strings.ToLower(m.PhysicalName) // Windows paths are case-insensitive
		if physical[key] {
			return "", fmt.Errorf("RESTORE DATABASE %s: %w: two files would be restored to %q", db, ErrInvalidOption, m.PhysicalName)
		}
		logical[m.LogicalName], physical[key] = true, true
		to, err := Literal(m.PhysicalName)
		if err != nil {
			return "", fmt.Errorf("RESTORE DATABASE %s: MOVE %q: %w", db, m.LogicalName, err)
		}
		with = append(with, "MOVE "+QuoteString(m.LogicalName)+" TO "+to)
	}
	if o.Checksum {
		with = append(with, "CHECKSUM")
	}
	if o.Replace {
		with = append(with, "REPLACE")
	}
	switch {
	case o.StandbyFile != "" && o.NoRecovery:
		return "", fmt.Errorf("RESTORE DATABASE %s: %w: STANDBY and NORECOVERY exclude each other", db, ErrInvalidOption)
	case o.StandbyFile != "":
		rec, err := recoveryClause(LogStandby, o.StandbyFile)
		if err != nil {
			return "", fmt.Errorf("RESTORE DATABASE %s: %w", db, err)
		}
		with = append(with, rec)
	case o.NoRecovery:
		with = append(with, "NORECOVERY")
	default:
		with = append(with, "RECOVERY")
	}
	if o.NewBroker {
		with = append(with, "NEW_BROKER")
	}
	if o.BufferCount > 0 {
		with = append(with, fmt.Sprintf("BUFFERCOUNT = %d", o.BufferCount))
	}
	if o.MaxTransferSize > 0 {
		with = append(with, fmt.Sprintf("MAXTRANSFERSIZE = %d", o.MaxTransferSize))
	}
	if o.Stats > 0 {
		with = append(with, fmt.Sprintf("STATS = %d", o.Stats))
	}
	return "RESTORE DATABASE " + db + " FROM " + from + " WITH " + strings.Join(with, ", "), nil
}

// FileListRow is the part of a RESTORE FILELISTONLY row needed to relocate a
// file. Type is D (data), L (log), F (full-text catalog) or S (FILESTREAM /
// memory-optimized container, a directory).
type FileListRow struct {
	LogicalName  string
	PhysicalName string
	Type         string
	FileID       int64
}

// MaxPhysicalPath is the longest path a restored file may get: MaxPath
// (MAX_PATH less its NUL; sys.master_files.physical_name is nvarchar(260)).
const MaxPhysicalPath = MaxPath

// MaxMoveFileName bounds the file name of a restored file, like a SQL
// Server name (128 characters), and MaxFileNameLen bytes.
const MaxMoveFileName = MaxIdentLen

// MinMoveRoom is the room (in characters) a restore directory must leave
// in MaxPhysicalPath for the shortest name Moves makes:
// `<at least 1 character>~<8 hex>_<FileId, up to 10 digits><extension, up to 16>`.
const MinMoveRoom = 40

// maxMoveExt is the longest extension Moves keeps in a shortened name.
const maxMoveExt = 16

// CheckRestoreDir is a LimitError when dir (restore_data_dir or
// restore_log_dir, as the verification instance sees it) leaves less than
// MinMoveRoom characters for the names of restored files.
func CheckRestoreDir(what, dir string) *LimitError {
	n := utf16Len(JoinPath(dir, ""))
	if n+MinMoveRoom > MaxPhysicalPath {
		return &LimitError{What: what, Name: dir, Len: n, Limit: MaxPhysicalPath - MinMoveRoom, Unit: "characters"}
	}
	return nil
}

// Moves relocates every file of a backup set into the restore directories of
// the verification instance: log files (Type L) into logDir, everything else
// into dataDir. Each target is named <restoreNamePart(verifyDB)>_<FileId>_<base>,
// where <base> is the last element of the original PhysicalName (so the
// extension is kept: .mdf, .ndf, .ldf). FileId is unique within a database,
// so two files with the same base name (same name in different source
// directories) never collide, and two verification databases never share a
// file. A name longer than MaxMoveFileName, MaxFileNameLen bytes, or than
// the room its directory leaves in MaxPhysicalPath, is shortened to
// `<its start>~<8 hex of its SHA-256>_<FileId><extension>`: still unique
// (FileId, and the hash of the full name), still recognisable. Rows are
// returned in FileId order. The logical names are the source database's
// (RESTORE cannot rename them) and must be valid SQL Server names.
func Moves(verifyDB string, rows []FileListRow, dataDir, logDir string) ([]Move, error) {
	if err := CheckIdent(verifyDB); err != nil {
		return nil, fmt.Errorf("restore file layout: verification database: %w", err)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("restore file layout for %q: RESTORE FILELISTONLY returned no files; the backup set is empty or unreadable", verifyDB)
	}
	if dataDir == "" || logDir == "" {
		return nil, fmt.Errorf("restore file layout for %q: the restore data and log directories must both be configured", verifyDB)
	}
	sorted := append([]FileListRow(nil), rows...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].FileID < sorted[j].FileID })
	prefix := restoreNamePart(verifyDB)
	ids := make(map[int64]bool, len(rows))
	out := make([]Move, 0, len(rows))
	for _, r := range sorted {
		if ids[r.FileID] {
			return nil, fmt.Errorf("restore file layout for %q: FileId %d appears twice in FILELISTONLY", verifyDB, r.FileID)
		}
		ids[r.FileID] = true
		if err := CheckIdent(r.LogicalName); err != nil {
			return nil, fmt.Errorf("restore file layout for %q: FILELISTONLY logical name of FileId %d: %w", verifyDB, r.FileID, err)
		}
		dir := dataDir
		switch strings.ToUpper(r.Type) {
		case "L":
			dir = logDir
		case "D", "F", "S":
		default:
			return nil, fmt.Errorf("restore file layout for %q: file %q has unknown type %q (want D, L, F or S)", verifyDB, r.LogicalName, r.Type)
		}
		if e := CheckRestoreDir("restore directory", dir); e != nil {
			return nil, fmt.Errorf("restore file layout for %q: %w: it leaves no room for the restored files' names; use a shorter restore_data_dir/restore_log_dir", verifyDB, e)
		}
		base := restoreNamePart(baseName(r.PhysicalName))
		if base == "" {
			base = restoreNamePart(r.LogicalName)
		}
		room := min(MaxMoveFileName, MaxPhysicalPath-utf16Len(JoinPath(dir, "")))
		target := JoinPath(dir, moveFileName(prefix, r.FileID, base, room))
		if e := CheckPath("target path", target); e != nil {
			return nil, fmt.Errorf("restore file layout for %q: %w; use a shorter restore directory", verifyDB, e)
		}
		out = append(out, Move{LogicalName: r.LogicalName, PhysicalName: target})
	}
	return out, nil
}

// moveFileName is <prefix>_<id>_<base> when it fits in room characters and
// MaxFileNameLen bytes, else its shortened form (see Moves).
func moveFileName(prefix string, id int64, base string, room int) string {
	full := fmt.Sprintf("%s_%d_%s", prefix, id, base)
	if utf16Len(full) <= room && len(full) <= MaxFileNameLen {
		return full
	}
	ext := ""
	if i := strings.LastIndexByte(base, '.'); i > 0 && len(base)-i <= maxMoveExt {
		ext = base[i:]
	}
	sum := sha256.Sum256([]byte(full))
	tail := fmt.Sprintf("~%s_%d%s", hex.EncodeToString(sum[:4]), id, ext)
	return cutUnits(full, room-utf16Len(tail), MaxFileNameLen-len(tail)) + tail
}
