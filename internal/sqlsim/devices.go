package sqlsim

import (
	"path/filepath"
	"strings"
	"sync"
)

// deviceTable tracks the backup files that running statements hold open.
// SQL Server opens the files of a BACKUP for exclusive writing, so a second
// BACKUP, or a RESTORE, that names one of them while the first runs cannot
// open it: 3201 "Cannot open backup device '...'. Operating system error
// 32(The process cannot access the file because it is being used by another
// process.)" (Windows ERROR_SHARING_VIOLATION,
// https://learn.microsoft.com/en-us/windows/win32/debug/system-error-codes--0-499-;
// 3201 in https://learn.microsoft.com/en-us/sql/relational-databases/errors-events/database-engine-events-and-errors-3000-to-3999).
// RESTOREs read with sharing, so several may read one file at a time.
type deviceTable struct {
	mu   sync.Mutex
	open map[string]*deviceUse
}

type deviceUse struct{ writers, readers int }

func deviceKey(local string) string { return strings.ToLower(filepath.Clean(local)) }

// acquire opens the local files for writing (BACKUP) or reading (RESTORE).
// It returns the index of the first file another statement holds in a
// conflicting mode (-1 when all were acquired) and, on success, the func
// that releases them.
func (t *deviceTable) acquire(locals []string, write bool) (busy int, release func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.open == nil {
		t.open = map[string]*deviceUse{}
	}
	for i, l := range locals {
		u := t.open[deviceKey(l)]
		if u != nil && (u.writers > 0 || (write && u.readers > 0)) {
			return i, nil
		}
	}
	for _, l := range locals {
		k := deviceKey(l)
		u := t.open[k]
		if u == nil {
			u = &deviceUse{}
			t.open[k] = u
		}
		if write {
			u.writers++
		} else {
			u.readers++
		}
	}
	var once sync.Once
	return -1, func() {
		once.Do(func() {
			t.mu.Lock()
			defer t.mu.Unlock()
			for _, l := range locals {
				k := deviceKey(l)
				u := t.open[k]
				if u == nil {
					continue
				}
				if write {
					u.writers--
				} else {
					u.readers--
				}
				if u.writers <= 0 && u.readers <= 0 {
					delete(t.open, k)
				}
			}
		})
	}
}
