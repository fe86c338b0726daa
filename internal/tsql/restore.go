package tsql

import (
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
	Stats      int // STATS = n; 0 omits
}

// RestoreDatabase builds
//
//	RESTORE DATABASE [db] FROM DISK = N'...', ...
//	WITH MOVE N'logical' TO N'physical', ..., CHECKSUM, REPLACE, RECOVERY, STATS = n
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
	if o.NoRecovery {
		with = append(with, "NORECOVERY")
	} else {
		with = append(with, "RECOVERY")
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

// MaxPhysicalPath is the longest physical_name SQL Server stores (nvarchar(260)).
const MaxPhysicalPath = 260

// Moves relocates every file of a backup set into the restore directories of
// the verification instance: log files (Type L) into logDir, everything else
// into dataDir. Each target is named <FileNamePart(verifyDB)>_<FileId>_<base>,
// where <base> is the last element of the original PhysicalName (so the
// extension is kept: .mdf, .ndf, .ldf). FileId is unique within a database,
// so two files with the same base name (same name in different source
// directories) never collide, and two verification databases never share a
// file. Rows are returned in FileId order.
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
	prefix := FileNamePart(verifyDB)
	ids := make(map[int64]bool, len(rows))
	out := make([]Move, 0, len(rows))
	for _, r := range sorted {
		if ids[r.FileID] {
			return nil, fmt.Errorf("restore file layout for %q: FileId %d appears twice in FILELISTONLY", verifyDB, r.FileID)
		}
		ids[r.FileID] = true
		dir := dataDir
		switch strings.ToUpper(r.Type) {
		case "L":
			dir = logDir
		case "D", "F", "S":
		default:
			return nil, fmt.Errorf("restore file layout for %q: file %q has unknown type %q (want D, L, F or S)", verifyDB, r.LogicalName, r.Type)
		}
		base := FileNamePart(baseName(r.PhysicalName))
		if base == "" {
			base = FileNamePart(r.LogicalName)
		}
		target := JoinPath(dir, fmt.Sprintf("%s_%d_%s", prefix, r.FileID, base))
		if n := utf16Len(target); n > MaxPhysicalPath {
			return nil, fmt.Errorf("restore file layout for %q: target path %q is %d characters, SQL Server allows %d; use a shorter restore directory or verification database name", verifyDB, target, n, MaxPhysicalPath)
		}
		out = append(out, Move{LogicalName: r.LogicalName, PhysicalName: target})
	}
	return out, nil
}
