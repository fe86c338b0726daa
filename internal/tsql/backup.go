package tsql

import (
	"errors"
	"fmt"
	"strings"
)

// SQL Server limits of the BACKUP/RESTORE tuning options (BACKUP (Transact-SQL)).
const (
	TransferUnit       = 64 << 10 // MAXTRANSFERSIZE is a multiple of 64 KiB
	MaxMaxTransferSize = 4 << 20  // ... at most 4 MiB
	MinBlockSize       = 512      // BLOCKSIZE is a power of two from 512 ...
	MaxBlockSize       = 64 << 10 // ... to 65536
	MaxDescriptionLen  = 255      // DESCRIPTION is nvarchar(255)
)

// RESTORE HEADERONLY's BackupType of the sets the product takes ("RESTORE
// Statements - HEADERONLY (Transact-SQL)").
const (
	BackupTypeDatabase     = 1
	BackupTypeLog          = 2
	BackupTypeDifferential = 5
)

// ErrInvalidOption is wrapped by every rejected BACKUP/RESTORE option value.
var ErrInvalidOption = errors.New("invalid backup option")

// CheckTuning validates BUFFERCOUNT, MAXTRANSFERSIZE and BLOCKSIZE against
// SQL Server's limits; 0 means "not specified, let SQL Server choose".
func CheckTuning(bufferCount, maxTransferSize, blockSize int) error {
	if bufferCount < 0 {
		return fmt.Errorf("%w: BUFFERCOUNT %d is negative; use a positive count or 0 for SQL Server's default", ErrInvalidOption, bufferCount)
	}
	if maxTransferSize < 0 || maxTransferSize%TransferUnit != 0 || maxTransferSize > MaxMaxTransferSize {
		return fmt.Errorf("%w: MAXTRANSFERSIZE %d must be a multiple of 65536 (64 KiB) between 65536 and 4194304 (4 MiB), or 0 for the default; e.g. 4194304", ErrInvalidOption, maxTransferSize)
	}
	if blockSize != 0 && (blockSize < MinBlockSize || blockSize > MaxBlockSize || blockSize&(blockSize-1) != 0) {
		return fmt.Errorf("%w: BLOCKSIZE %d must be a power of two from 512 to 65536 (512, 1024, ..., 65536), or 0 for the default", ErrInvalidOption, blockSize)
	}
	return nil
}

// BackupOptions describe one BACKUP DATABASE statement. Zero values leave an
// option out (SQL Server's default applies).
type BackupOptions struct {
	Database string   // source database name (unquoted)
	Disks    []string // one DISK = per stripe, in stripe order (see Layout)
	Checksum bool     // WITH CHECKSUM: page checksums verified and a backup checksum written
	Init     bool     // INIT: overwrite backup sets on the media
	Format   bool     // FORMAT: write a new media header (new files; implies INIT semantics)
	// Compression: nil leaves the server default ('backup compression default'),
	// true adds COMPRESSION, false adds NO_COMPRESSION.
	Compression     *bool
	CopyOnly        bool   // COPY_ONLY: does not disturb the differential base
	Stats           int    // STATS = n: a progress message every n percent (1..100); 0 omits
	BufferCount     int    // BUFFERCOUNT; 0 omits
	MaxTransferSize int    // MAXTRANSFERSIZE in bytes; 0 omits
	BlockSize       int    // BLOCKSIZE in bytes; 0 omits
	Name            string // NAME = backup set name (<= 128 chars); "" omits
	Description     string // DESCRIPTION (<= 255 chars); "" omits
	// Differential: DIFFERENTIAL, the changes since the database's
	// differential base, its newest full backup that is not COPY_ONLY
	// ("Differential Backups (SQL Server)"). Never with CopyOnly: SQL
	// Server ignores COPY_ONLY beside DIFFERENTIAL (BACKUP (Transact-SQL),
	// COPY_ONLY), so asking for both is refused.
	Differential bool
	// Encryption, when set, encrypts the backup (ENCRYPTION (...)).
	Encryption *BackupEncryption
}

// BackupDatabase builds
//
//	BACKUP DATABASE [db] TO DISK = N'...', DISK = N'...'
//	WITH [DIFFERENTIAL,] CHECKSUM, INIT, FORMAT, COMPRESSION, COPY_ONLY, [ENCRYPTION (...),] BUFFERCOUNT = n,
//	MAXTRANSFERSIZE = n, BLOCKSIZE = n, NAME = N'...', DESCRIPTION = N'...', STATS = n
//
// (seed 000, "Handling File Storage Corruption" and "Using Multiple NICs").
func BackupDatabase(o BackupOptions) (string, error) {
	db, err := QuoteIdent(o.Database)
	if err != nil {
		return "", fmt.Errorf("BACKUP DATABASE: %w", err)
	}
	disks, err := diskList(o.Disks)
	if err != nil {
		return "", fmt.Errorf("BACKUP DATABASE %s: %w", db, err)
	}
	if err := CheckTuning(o.BufferCount, o.MaxTransferSize, o.BlockSize); err != nil {
		return "", fmt.Errorf("BACKUP DATABASE %s: %w", db, err)
	}
	if err := checkStats(o.Stats); err != nil {
		return "", fmt.Errorf("BACKUP DATABASE %s: %w", db, err)
	}
	if o.Differential && o.CopyOnly {
		return "", fmt.Errorf("BACKUP DATABASE %s: %w: DIFFERENTIAL with COPY_ONLY: SQL Server ignores COPY_ONLY for a differential", db, ErrInvalidOption)
	}
	var with []string
	if o.Differential {
		with = append(with, "DIFFERENTIAL")
	}
	if o.Checksum {
		with = append(with, "CHECKSUM")
	}
	if o.Init {
		with = append(with, "INIT")
	}
	if o.Format {
		with = append(with, "FORMAT")
	}
	if o.Compression != nil {
		if *o.Compression {
			with = append(with, "COMPRESSION")
		} else {
			with = append(with, "NO_COMPRESSION")
		}
	}
	if o.CopyOnly {
		with = append(with, "COPY_ONLY")
	}
	if o.Encryption != nil {
		c, err := o.Encryption.clause()
		if err != nil {
			return "", fmt.Errorf("BACKUP DATABASE %s: %w", db, err)
		}
		with = append(with, c)
	}
	if o.BufferCount > 0 {
		with = append(with, fmt.Sprintf("BUFFERCOUNT = %d", o.BufferCount))
	}
	if o.MaxTransferSize > 0 {
		with = append(with, fmt.Sprintf("MAXTRANSFERSIZE = %d", o.MaxTransferSize))
	}
	if o.BlockSize > 0 {
		with = append(with, fmt.Sprintf("BLOCKSIZE = %d", o.BlockSize))
	}
	if o.Name != "" {
		if err := CheckIdent(o.Name); err != nil {
			return "", fmt.Errorf("BACKUP DATABASE %s: backup set NAME: %w", db, err)
		}
		with = append(with, "NAME = "+QuoteString(o.Name))
	}
	if o.Description != "" {
		lit, err := Literal(o.Description)
		if err != nil {
			return "", fmt.Errorf("BACKUP DATABASE %s: DESCRIPTION: %w", db, err)
		}
		if n := utf16Len(o.Description); n > MaxDescriptionLen {
			return "", fmt.Errorf("BACKUP DATABASE %s: %w: DESCRIPTION is %d characters, at most %d are allowed", db, ErrInvalidOption, n, MaxDescriptionLen)
		}
		with = append(with, "DESCRIPTION = "+lit)
	}
	if o.Stats > 0 {
		with = append(with, fmt.Sprintf("STATS = %d", o.Stats))
	}
	stmt := "BACKUP DATABASE " + db + " TO " + disks
	if len(with) > 0 {
		stmt += " WITH " + strings.Join(with, ", ")
	}
	return stmt, nil
}

// diskList renders DISK = N'...', DISK = N'...' for 1..64 devices.
func diskList(disks []string) (string, error) {
	if len(disks) == 0 {
		return "", fmt.Errorf("%w: no backup files given; give at least one DISK path", ErrInvalidOption)
	}
	if len(disks) > MaxStripes {
		return "", fmt.Errorf("%w: %d backup files, SQL Server accepts at most %d; lower the stripe count", ErrInvalidOption, len(disks), MaxStripes)
	}
	seen := make(map[string]bool, len(disks))
	parts := make([]string, len(disks))
	for i, d := range disks {
		if strings.TrimSpace(d) == "" {
			return "", fmt.Errorf("%w: backup file %d has an empty path", ErrInvalidOption, i+1)
		}
		if seen[d] {
			return "", fmt.Errorf("%w: backup file %q is listed twice; every stripe needs its own file", ErrInvalidOption, d)
		}
		seen[d] = true
		lit, err := Literal(d)
		if err != nil {
			return "", fmt.Errorf("backup file %d: %w", i+1, err)
		}
		parts[i] = "DISK = " + lit
	}
	return strings.Join(parts, ", "), nil
}

func checkStats(n int) error {
	if n < 0 || n > 100 {
		return fmt.Errorf("%w: STATS = %d must be a percentage step from 1 to 100, or 0 to omit it", ErrInvalidOption, n)
	}
	return nil
}
