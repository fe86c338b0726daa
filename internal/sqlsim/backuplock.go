package sqlsim

import (
	"context"
	"strings"
	"sync"
)

// backupLocks serialises the data backups of each database: SQL Server runs
// one at a time, and a second BACKUP DATABASE of the same database waits for
// the first, shown in sys.dm_exec_requests with wait_type LCK_M_U ("Only one
// data backup can occur at a time", "wait_type = LCK_M_U" on
// "BULKOP_BACKUP_DB", https://support.microsoft.com/help/2979636). A log
// backup is not emulated.
type backupLocks struct {
	mu   sync.Mutex
	held map[string]chan struct{} // lower-case database name -> closed on release
}

// lockDataBackup waits until no other data backup of db runs, then holds
// the database's backup lock until release. It gives up with the
// statement's context (an attention, a dropped client) or a crash.
func (x *execCtx) lockDataBackup(db string) (release func(), err error) {
	l := &x.in.backups
	key := strings.ToLower(db)
	waiting := false
	defer func() {
		if waiting {
			x.in.mu.Lock()
			x.req.waitType = ""
			x.in.mu.Unlock()
		}
	}()
	for {
		l.mu.Lock()
		if l.held == nil {
			l.held = map[string]chan struct{}{}
		}
		ch, busy := l.held[key]
		if !busy {
			done := make(chan struct{})
			l.held[key] = done
			l.mu.Unlock()
			return func() {
				l.mu.Lock()
				delete(l.held, key)
				l.mu.Unlock()
				close(done)
			}, nil
		}
		l.mu.Unlock()
		if !waiting {
			waiting = true
			x.in.mu.Lock()
			x.req.waitType = "LCK_M_U"
			x.in.mu.Unlock()
		}
		select {
		case <-ch:
		case <-x.ctx.Done():
			return nil, x.ctx.Err()
		case <-x.crashed:
			return nil, context.Canceled
		}
	}
}
