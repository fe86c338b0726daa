package sqlsim

import (
	"fmt"
	"os"
	"strings"
)

// Fault injection for tests and the demo: crashes at a chosen point,
// damaged pages and stripes, slow and full or unreachable shares.

type faultState struct {
	unreachable map[string]bool
	quota       map[string]int64
	shareLimit  map[string]*limiter
	streamRate  int64
	crashAt     map[string]float64 // op -> percent, one-shot
}

func (f *faultState) init() {
	f.unreachable = map[string]bool{}
	f.quota = map[string]int64{}
	f.shareLimit = map[string]*limiter{}
	f.crashAt = map[string]float64{}
}

// Operations CrashAt understands.
const (
	OpBackup  = "BACKUP"
	OpRestore = "RESTORE"
	OpCheckDB = "DBCC"
)

// CrashAt arms a one-shot crash: when the next operation op (OpBackup,
// OpRestore, OpCheckDB) reaches percent, the instance crashes as by Crash.
func (in *Instance) CrashAt(op string, percent float64) error {
	op = strings.ToUpper(op)
	switch op {
	case OpBackup, OpRestore, OpCheckDB:
	default:
		return fmt.Errorf("sqlsim: CrashAt: unknown operation %q; use %q, %q or %q", op, OpBackup, OpRestore, OpCheckDB)
	}
	if percent < 0 || percent > 100 {
		return fmt.Errorf("sqlsim: CrashAt: percent %v must be between 0 and 100", percent)
	}
	in.mu.Lock()
	in.faults.crashAt[op] = percent
	in.mu.Unlock()
	return nil
}

// crashDue reports (and disarms) an armed crash for op at percent p.
func (in *Instance) crashDue(op string, p float64) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	at, ok := in.faults.crashAt[op]
	if !ok || p < at {
		return false
	}
	delete(in.faults.crashAt, op)
	return true
}

// crashNow marks the instance crashed at once (in-flight work sees it on
// its next step) and finishes the crash in the background, since the
// caller is itself an operation Crash waits for.
func (in *Instance) crashNow() {
	srv := in.markCrashed("sqlsim crashed at the armed point (fault injection)")
	if srv == nil {
		return
	}
	go func() {
		srv.DropConnections()
		srv.Close()
	}()
}

// SetThrottle limits every backup/restore stream (one stripe file) to
// bytesPerSec; 0 removes the limit.
func (in *Instance) SetThrottle(bytesPerSec int64) {
	in.mu.Lock()
	in.faults.streamRate = bytesPerSec
	in.mu.Unlock()
}

// SetShareThrottle limits the total bytes/s of all streams to one share
// (its NIC); 0 removes the limit.
func (in *Instance) SetShareThrottle(prefix string, bytesPerSec int64) {
	in.mu.Lock()
	defer in.mu.Unlock()
	p := normPrefix(prefix)
	l := in.faults.shareLimit[p]
	if l == nil {
		l = &limiter{}
		in.faults.shareLimit[p] = l
	}
	l.setRate(bytesPerSec)
}

// SetShareUnreachable makes paths under prefix fail like an unreachable
// host (error 3201, operating system error 53).
func (in *Instance) SetShareUnreachable(prefix string, unreachable bool) {
	in.mu.Lock()
	in.faults.unreachable[normPrefix(prefix)] = unreachable
	in.mu.Unlock()
}

// SetShareQuota caps the bytes the share's directory may hold; a BACKUP
// that would exceed it fails with 3202 "... 112(There is not enough space
// on the disk.)". 0 removes the cap.
func (in *Instance) SetShareQuota(prefix string, bytes int64) {
	in.mu.Lock()
	if bytes <= 0 {
		delete(in.faults.quota, normPrefix(prefix))
	} else {
		in.faults.quota[normPrefix(prefix)] = bytes
	}
	in.mu.Unlock()
}

// CorruptPage flips one byte in the body of page (fileID:pageID) of a
// database, so its checksum no longer matches (CHECKDB reports it, BACKUP
// WITH CHECKSUM refuses it).
func (in *Instance) CorruptPage(db string, fileID int, pageID uint32) error {
	d := in.lookupDB(db)
	if d == nil || d.system {
		return fmt.Errorf("sqlsim: CorruptPage: database %q not found on %s", db, in.cfg.Name)
	}
	for _, f := range d.Files {
		if f.FileID == fileID {
			if int64(pageID) >= f.Pages {
				return fmt.Errorf("sqlsim: CorruptPage: file %d of %q has %d pages, page %d does not exist", fileID, db, f.Pages, pageID)
			}
			return FlipByte(f.Path, int64(pageID)*PageSize+pageHeaderSize+1234)
		}
	}
	return fmt.Errorf("sqlsim: CorruptPage: database %q has no file id %d", db, fileID)
}

// FlipByte inverts the bits of the byte at offset in a local file (a
// stripe or a database file).
func FlipByte(path string, offset int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("sqlsim: flip byte: %w", err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, offset); err != nil {
		return fmt.Errorf("sqlsim: flip byte at %d of %s: %w", offset, path, err)
	}
	b[0] ^= 0xFF
	if _, err := f.WriteAt(b, offset); err != nil {
		return fmt.Errorf("sqlsim: flip byte at %d of %s: %w", offset, path, err)
	}
	return nil
}
