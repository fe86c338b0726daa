package logs

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/logchain"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// A restore of the source (RESTORE ... WITH RECOVERY) starts a new recovery
// path that reuses the LSNs of the old one (logchain.Fork): a chain goes
// on only with backups of its own path, which msdb and the backup headers
// name by recovery fork.

// chainFork is the recovery fork the chain stands on: the one the backup
// set at its end (the last log written, else its base full) ended on, as
// msdb records it. "" when msdb has no row for it (its history deleted):
// then LSNs alone decide, as they did before forks were read.
func (a *Activities) chainFork(ctx context.Context, sqlDB *mssql.DB, rec *catalog.ChainRecord, log *zap.Logger) (string, error) {
	_, set := chainEnd(rec)
	if set == "" {
		return "", nil
	}
	q, args, err := tsql.BackupSetFork(set)
	if err != nil {
		log.Warn("the chain's last backup set has no GUID to look up: its recovery fork is not known", zap.Error(err))
		return "", nil
	}
	f, found, err := sqlDB.BackupSetFork(ctx, q, args...)
	if err != nil {
		return "", activities.SQLError(err)
	}
	if !found {
		log.Warn("msdb has no row for the chain's last backup set: its recovery fork is not known", zap.String("backup_set_guid", set))
		return "", nil
	}
	return f.Last, nil
}

// path is the recovery path msdb or a header names.
func path(f mssql.RecoveryFork) logchain.Fork {
	return logchain.Fork{First: f.First, Last: f.Last, Point: logchain.LSN(f.Point)}
}

// offPath says why log n, on recovery path f, is no log of a chain that
// stands at LSN end on fork ("" when it is): the database was restored to
// an earlier point since the chain's last backup, so the chain's logs past
// that point are on the path it left (a restore through them fails with
// 4330), and this log begins a path of its own.
func offPath(n int64, f mssql.RecoveryFork, fork, end string) string {
	p := path(f)
	if p.Continues(fork, logchain.LSN(end)) {
		return ""
	}
	at := "on recovery fork " + p.Last
	if p.First != p.Last {
		at = fmt.Sprintf("on recovery fork %s, which left fork %s at LSN %s", p.Last, p.First, p.Point)
	}
	return fmt.Sprintf("log %d is %s, but the chain stood at LSN %s on fork %s: the database was restored (RESTORE ... WITH RECOVERY) "+
		"to another point since the chain's last backup; the log is not in this chain, and a full backup starts the next one", n, at, end, fork)
}
