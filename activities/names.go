package activities

import "github.com/backupcycle/backupcycle/internal/config"

// checkNames checks every name a cycle of db derives (verification
// database, file names and paths of its sets, restored files) before any
// SQL runs. Loading the configuration checks its databases: entries; a
// database a selection picks (USER_DATABASES, a pattern) is named only by
// sys.databases, so its names are first seen here. A name over its limit
// would fail the cycle after its BACKUP and copy, leaving a failed set and
// a used sequence number every night: not retryable, InvalidConfig.
func (d *CycleDeps) checkNames(db *config.Database) error {
	cfg := d.config()
	if cfg == nil {
		return errNotWired
	}
	if err := cfg.CheckNames(db); err != nil {
		return nonRetryable(ErrInvalidConfig, err)
	}
	return nil
}
