package sqlsim

import (
	"time"
)

// A RESTORE DATABASE has two phases that report no progress. Before the
// first page is copied, SQL Server creates the database files and writes
// zeros over them: always the log, and the data files too unless instant
// file initialization is enabled
// (https://learn.microsoft.com/en-us/sql/relational-databases/databases/database-instant-file-initialization:
// "data files can be initialized instantaneously ... without filling that
// space with zeros ... Log files cannot be initialized instantaneously";
// restoring a backup is one of the operations that initialize files). After the last page ("100 percent processed.") comes recovery,
// redoing and undoing the log, before the closing messages and 3014. Both
// take time proportional to the bytes involved; sys.dm_exec_requests keeps
// percent_complete at 0 during the first and at 100 during the second,
// and STATS prints nothing. The emulator spends the bytes at the stream rate
// of SetThrottle (none when unthrottled).

// restorePhaseBytes is what a RESTORE zeroes before the copy and what its
// recovery reads after it (the log).
func restorePhaseBytes(plan []dbFile, instant bool) (initBytes, logBytes int64) {
	for _, f := range plan {
		b := f.Pages * PageSize
		if f.Log {
			logBytes += b
			initBytes += b
		} else if !instant {
			initBytes += b
		}
	}
	return initBytes, logBytes
}

// silentPhase spends bytes at the stream rate without reporting progress;
// an attention, KILL or crash ends it.
func (x *execCtx) silentPhase(bytes int64) error {
	x.in.mu.Lock()
	rate := x.in.faults.streamRate
	x.in.mu.Unlock()
	if rate <= 0 || bytes <= 0 {
		return nil
	}
	t := time.NewTimer(time.Duration(float64(bytes) / float64(rate) * float64(time.Second)))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-x.ctx.Done():
		return x.ctx.Err()
	}
}
