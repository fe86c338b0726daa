package sqlsim

import "strings"

// CrashOnQuery arms a one-shot crash of the host: when the nth batch (from
// 1) from now whose text contains match arrives, the instance crashes as by
// Crash before it runs it, so its client sees the connection drop without a
// reply and the instance is gone until Start. What came before (a BACKUP
// that returned success) stays done: the host died right after it. An
// empty match disarms it.
func (in *Instance) CrashOnQuery(match string, nth int) {
	in.mu.Lock()
	in.faults.crashOn, in.faults.crashOnLeft = match, max(nth, 1)
	in.mu.Unlock()
}

// crashOnDue reports (and disarms) an armed CrashOnQuery due at a batch.
func (in *Instance) crashOnDue(sql string) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.faults.crashOn == "" || !strings.Contains(sql, in.faults.crashOn) {
		return false
	}
	if in.faults.crashOnLeft--; in.faults.crashOnLeft > 0 {
		return false
	}
	in.faults.crashOn = ""
	return true
}
