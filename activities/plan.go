package activities

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/plan"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// errNotWired is returned when the worker was started without a backup
// configuration.
var errNotWired = temporal.NewNonRetryableApplicationError(
	"backup cycle activities are not configured in this worker: start it with a backupcycle config (worker --config)",
	ErrInvalidConfig, errors.New("Activities.Cycle.Config is nil"))

// statsPercent is the STATS = n of BACKUP and RESTORE: a progress message
// every n percent.
const statsPercent = 5

// PlanCycle decides the cycle: the round-robin primary (from the caller or
// the manifests on the rotation's servers), the fail-over order, the stripe
// count and the memory guard.
func (a *Activities) PlanCycle(ctx context.Context, in PlanInput) (Plan, error) {
	defer a.Cycle.keepAlive(ctx)()
	d := &a.Cycle
	db, err := d.database(in.Instance, in.Database)
	if err != nil {
		return Plan{}, err
	}
	log := a.loggerFor(ctx).With(zap.String("db", db.Name))
	last, source := in.LastServer, "caller"
	unreachable := map[string]bool{}
	if last == "" {
		var all []*catalog.Manifest
		for _, name := range db.BackupServers {
			listing, err := a.listManifests(ctx, name, db)
			var appErr *temporal.ApplicationError
			if errors.As(err, &appErr) && appErr.NonRetryable() {
				// Wrong location or credentials: stop before any SQL runs.
				return Plan{}, err
			}
			if err != nil {
				// An unreachable server cannot tell what it holds; the
				// others still can, and the backup step fails over.
				log.Warn("backup server not readable while planning", zap.String("server", name), zap.Error(err))
				unreachable[name] = true
				continue
			}
			all = append(all, listing.Manifests...)
		}
		last, source = catalog.LastServer(db.Instance, db.Name, all), "manifests"
		if last == "" {
			source = "none"
		}
	}
	primary, err := plan.NextServer(db.BackupServers, last, unreachable)
	if errors.Is(err, plan.ErrNoServerReachable) {
		// Let the backup step find out and wait for a server.
		primary, err = plan.NextServer(db.BackupServers, last, nil)
	}
	if err != nil {
		return Plan{}, nonRetryable(ErrInvalidConfig, err)
	}
	i := slices.Index(db.BackupServers, primary)
	rotation := append(slices.Clone(db.BackupServers[i:]), db.BackupServers[:i]...)

	srv, err := d.server(primary)
	if err != nil {
		return Plan{}, err
	}
	stripes := int(db.Stripes)
	if db.Stripes == config.StripesAuto {
		stripes, err = plan.AutoStripes(0, len(srv.UNCPaths), 0)
	} else {
		err = plan.CheckBalance(stripes, len(srv.UNCPaths))
	}
	if err != nil {
		return Plan{}, nonRetryable(ErrInvalidConfig, fmt.Errorf("database %s: %w", db.ID(), err))
	}
	if err := tsql.CheckTuning(db.BufferCount, int(db.MaxTransferSize), int(db.BlockSize)); err != nil {
		return Plan{}, nonRetryable(ErrInvalidConfig, fmt.Errorf("database %s: %w", db.ID(), err))
	}
	tuning := plan.Tuning{Stripes: stripes, BufferCount: db.BufferCount, MaxTransferSize: int(db.MaxTransferSize), BlockSize: int(db.BlockSize)}
	if err := plan.CheckTuning(tuning, 1, int64(db.MemoryBudget)); err != nil {
		return Plan{}, nonRetryable(ErrInsufficientMemory, fmt.Errorf("database %s: %w", db.ID(), err))
	}

	p := Plan{
		Database: db.Name, Instance: db.Instance, Rotation: rotation, LastServer: last, LastServerSource: source,
		Stripes: stripes, Remote: db.CopyTarget(primary), Remotes: map[string]string{},
		KeepVerifyDB: db.KeepVerifyDB, MemoryBytes: plan.BackupMemory(tuning, 1),
		Limits: Limits{
			HostWait: db.SQLHostWait.GiveUpAfter, ServerWait: db.BackupServerWait.GiveUpAfter,
			WaitInitial: db.SQLHostWait.Initial, WaitMax: db.SQLHostWait.MaxInterval,
			CopyDeadline: db.CopyDeadline, CopyRetry: db.CopyWait.Initial, CopyRetryMax: db.CopyWait.MaxInterval,
			Heartbeat: d.HeartbeatTimeout,
		},
	}
	for _, s := range rotation {
		target := db.CopyTarget(s)
		if target == "" || target == s {
			return Plan{}, nonRetryable(ErrInvalidConfig, fmt.Errorf(
				"database %s: no remote copy target for backups on %s: set copy_to, or list a second backup server", db.ID(), s))
		}
		remote, err := d.server(target)
		if err != nil {
			return Plan{}, err
		}
		if remote.VerifyInstance == "" {
			return Plan{}, nonRetryable(ErrInvalidConfig, fmt.Errorf(
				"backup server %s receives the remote copy of %s but has no verify_instance to restore it: set verify_instance", target, db.ID()))
		}
		p.Remotes[s] = target
	}
	remote, _ := d.server(p.Remote)
	p.VerifyInstance = remote.VerifyInstance
	log.Info("cycle planned", zap.String("server", primary), zap.String("last_server", last),
		zap.String("last_server_source", source), zap.Int("stripes", stripes), zap.String("remote", p.Remote))
	return p, nil
}
