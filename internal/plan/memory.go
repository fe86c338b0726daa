package plan

import (
	"fmt"
	"time"

	"github.com/backupcycle/backupcycle/internal/tsql"
)

// Defaults SQL Server uses when BUFFERCOUNT / MAXTRANSFERSIZE are not given
// for a backup to disk ("How It Works: How does SQL Server Backup and Restore
// select transfer sizes", CSS SQL Server Engineers, 2008; the trace flag 3213
// output shows 1024 KB and 6 buffers for one file of a one-volume database).
const (
	DefaultMaxTransferSize = 1 << 20
	suggestedIODepthDisk   = 3
)

// DefaultBufferCount is SQL Server's BUFFERCOUNT when none is given:
//
//	backupDevices x GetSuggestedIoDepth + backupDevices + 2 x databaseVolumes
//
// with GetSuggestedIoDepth = 3 for disk devices; databaseVolumes is the number
// of volumes holding the database's files (at least 1).
func DefaultBufferCount(backupDevices, databaseVolumes int) int {
	if databaseVolumes < 1 {
		databaseVolumes = 1
	}
	return backupDevices*suggestedIODepthDisk + backupDevices + 2*databaseVolumes
}

// Tuning is the configured BACKUP tuning of one database; 0 means "let SQL
// Server choose".
type Tuning struct {
	Stripes         int
	BufferCount     int
	MaxTransferSize int // bytes
	BlockSize       int // bytes
}

// BackupMemory is the buffer memory one BACKUP takes (seed 004, "Optimizing
// Memory": Total Memory used = BufferCount x MaxTransferSize), with SQL
// Server's defaults for unset values. BUFFERCOUNT is the total over all
// backup devices (BACKUP (Transact-SQL): "the total number of I/O buffers to
// be used for the backup operation"), so more stripes raise the memory only
// through the default BUFFERCOUNT, which grows with the device count.
func BackupMemory(t Tuning, databaseVolumes int) int64 {
	bc := t.BufferCount
	if bc == 0 {
		bc = DefaultBufferCount(max(t.Stripes, 1), databaseVolumes)
	}
	mts := t.MaxTransferSize
	if mts == 0 {
		mts = DefaultMaxTransferSize
	}
	return int64(bc) * int64(mts)
}

// CheckTuning validates a database's BACKUP tuning: the SQL Server limits
// (stripes 1..64, MAXTRANSFERSIZE a multiple of 64 KiB up to 4 MiB, BLOCKSIZE
// a power of two from 512 to 65536) and the memory guard: BackupMemory must
// not exceed budgetBytes (0 = no budget). Too much buffer memory does not fail
// cleanly on the server: the BACKUP dies with "There is insufficient system
// memory in resource pool 'default'" (seed 004), so it is refused up front.
// Errors name the offending value and a value that works.
func CheckTuning(t Tuning, databaseVolumes int, budgetBytes int64) error {
	if t.Stripes < 0 || t.Stripes > tsql.MaxStripes {
		return fmt.Errorf("plan: stripes = %d is out of range; SQL Server writes 1 to %d backup files", t.Stripes, tsql.MaxStripes)
	}
	if err := tsql.CheckTuning(t.BufferCount, t.MaxTransferSize, t.BlockSize); err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	if budgetBytes <= 0 {
		return nil
	}
	mem := BackupMemory(t, databaseVolumes)
	if mem <= budgetBytes {
		return nil
	}
	mts := t.MaxTransferSize
	if mts == 0 {
		mts = DefaultMaxTransferSize
	}
	fitBC := budgetBytes / int64(mts)
	fix := fmt.Sprintf("lower buffercount to at most %d", fitBC)
	if fitBC < 1 {
		fix = "lower maxtransfersize"
	}
	bcText := fmt.Sprint(t.BufferCount)
	if t.BufferCount == 0 {
		bcText = fmt.Sprintf("%d (SQL Server's default for %d stripes)", DefaultBufferCount(max(t.Stripes, 1), databaseVolumes), max(t.Stripes, 1))
	}
	return fmt.Errorf("plan: BACKUP buffer memory BUFFERCOUNT %s x MAXTRANSFERSIZE %d = %s exceeds the memory budget of %s; %s, lower maxtransfersize, or raise the budget",
		bcText, mts, FormatBytes(mem), FormatBytes(budgetBytes), fix)
}

// RoundDuration keeps durations readable in messages: 1m23s, 4.56s, 120ms.
func RoundDuration(d time.Duration) time.Duration {
	switch {
	case d >= time.Minute:
		return d.Round(time.Second)
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}

// FormatBytes renders a byte count in binary units (for messages).
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
