package activities

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/hostcheck"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// probeValid is how long a probe SQL Server saw stands for its instance,
// server and paths in this worker: a mount lost in between is found by the
// next probe, and the files of a BACKUP written meanwhile are checked by
// finishedBackup.
const probeValid = 10 * time.Minute

// probeCache remembers when each (instance, server, paths) last passed.
type probeCache struct {
	mu   sync.Mutex
	seen map[string]time.Time
}

func (c *probeCache) fresh(key string, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.seen[key]
	return ok && now.Sub(t) < probeValid
}

func (c *probeCache) pass(key string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[string]time.Time{}
	}
	c.seen[key] = now
}

// checkBackupPaths makes sure, before a BACKUP writes anything, that the
// source instance can use its paths to the server (no UNC paths on SQL
// Server on Linux) and that they lead where the worker's location does (an
// unmounted mount point is a local directory: the BACKUP would fill the
// SQL host's disk). See hostcheck.Probe.
func (a *Activities) checkBackupPaths(ctx context.Context, sqlDB *mssql.DB, st storage.Storage, inst *config.SQLInstance,
	srv *config.BackupServer, log *zap.Logger) error {
	paths := srv.PathsFor(inst.Name)
	key := inst.Name + "\x00" + srv.Name + "\x00" + strings.Join(paths, "\x00")
	now := a.Cycle.now()
	if a.probes.fresh(key, now) {
		return nil
	}
	if f, ok := hostFacts(ctx, sqlDB, inst.Name, log); ok {
		if err := checkHostPaths(inst.Name, f, srv); err != nil {
			return err
		}
	}
	err := hostcheck.Probe(ctx, st, paths, func(ctx context.Context, path string) error {
		q, err := tsql.RestoreHeaderOnly([]string{path})
		if err != nil {
			return err
		}
		_, err = sqlDB.HeaderOnly(ctx, q)
		return err
	})
	switch {
	case errors.Is(err, hostcheck.ErrNotSeen):
		pk := srv.PathsKey(inst.Name)
		return nonRetryable(ErrInvalidConfig, fmt.Errorf(
			"backup server %s: %w. %s of %s (%s) and location %s must be the same directory: if a path is a mount point on "+
				"%s's host, it is not mounted (an empty local directory, where the BACKUP would fill the SQL host's disk): "+
				"mount it; otherwise fix %s or location. No BACKUP was started",
			srv.Name, err, pk, inst.Name, strings.Join(paths, ", "), srv.Location, inst.Name, pk))
	case err != nil:
		// Not conclusive (the share unreachable, ...): the BACKUP meets it
		// and says what it is.
		log.Warn("the probe of the backup paths was not conclusive", zap.String("server", srv.Name), zap.Error(err))
		return nil
	}
	a.probes.pass(key, now)
	return nil
}
