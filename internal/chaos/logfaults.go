package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// dbaDisk is where a DBA's own log backups go on the source when they do
// not go to a backup server's share: a disk no worker reaches.
const dbaDisk = `D:\dba`

// restoreLogWait bounds how long FaultRestoreLog waits for the standby's
// next RESTORE to reach its percent (a few log backups).
const restoreLogWait = 6 * LogEvery

// logFault injects one of the log chain's faults before the run's cycle
// starts (LogTarget's chain runs all along).
func (s *Sim) logFault(ctx context.Context, r *run) error {
	p := r.plan
	src := s.F.Instances[LogTarget.Instance]
	switch p.Fault {
	case FaultForeignLog:
		// A DBA takes a log backup of their own: to a share the worker
		// reaches (it may adopt it) or to a disk it does not (the chain
		// has a hole until the next full).
		name := fmt.Sprintf("%s_dba_log_run%d.trn", LogTarget.Database, p.Run)
		disk := dbaDisk + `\` + name
		if p.Pick%2 == 0 {
			disk = UNC(p.Server) + `\` + name
		}
		q, err := tsql.QuoteIdent(LogTarget.Database)
		if err != nil {
			return err
		}
		stmt := fmt.Sprintf("BACKUP LOG %s TO DISK = %s WITH NAME = N'DBA manual log backup'", q, tsql.QuoteString(disk))
		if err := s.F.exec(ctx, LogTarget.Instance, stmt); err != nil {
			// SIMPLE, no full yet: SQL Server refuses, as it would the DBA.
			r.note("DBA's BACKUP LOG of %s to %s: %v", LogTarget, disk, err)
			return nil
		}
		r.injected, r.at = true, fmt.Sprintf("before-start (DBA's BACKUP LOG of %s to %s)", LogTarget, disk)
	case FaultRecoveryFlip:
		if err := src.SetRecoveryModel(LogTarget.Database, "SIMPLE"); err != nil {
			return fmt.Errorf("chaos: %s to SIMPLE: %w", LogTarget, err)
		}
		r.injected, r.at = true, fmt.Sprintf("before-start (%s SIMPLE for %s)", LogTarget, p.Heal.Round(time.Millisecond))
		r.later(p.Heal, "recovery model FULL", func() error { return s.F.Instances[LogTarget.Instance].SetRecoveryModel(LogTarget.Database, "FULL") })
	case FaultRestoreLog:
		// Before the cycle starts, the next RESTORE on verify01 is the
		// standby proof's RESTORE LOG (or its seeding).
		v := s.F.Instances[Verify01]
		if err := v.CrashAt(sqlsim.OpRestore, p.Percent); err != nil {
			return err
		}
		deadline := time.Now().Add(restoreLogWait)
		for s.F.InstanceUp(Verify01) && time.Now().Before(deadline) && ctx.Err() == nil {
			time.Sleep(tick)
		}
		if s.F.InstanceUp(Verify01) {
			v.Disarm(sqlsim.OpRestore)
			r.note("no RESTORE on %s reached %.0f%% within %s", Verify01, p.Percent, restoreLogWait)
			return nil
		}
		what := "RESTORE"
		for _, st := range slices.Backward(v.Statements()) {
			if st.Outcome == "crashed" {
				what = fmt.Sprintf("%s of %s", st.Kind, st.Database)
				break
			}
		}
		r.injected, r.at = true, fmt.Sprintf("before-start (%s crashed at %.0f%% of %s)", Verify01, p.Percent, what)
		r.later(p.Heal, "restart "+Verify01, func() error { return s.F.RestartInstance(Verify01) })
	case FaultLogDelete:
		parts, _, err := s.C.chainParts(ctx, p.Server)
		if err != nil {
			return err
		}
		var files []string
		for _, rec := range parts {
			for _, l := range rec.Logs {
				for _, f := range l.Files {
					if _, err := os.Stat(filepath.Join(s.F.ShareDir(p.Server), f.Name)); err == nil {
						files = append(files, f.Name)
					}
				}
			}
		}
		if len(files) == 0 {
			r.note("no log backup file of %s on %s to delete", LogTarget, p.Server)
			return nil
		}
		// The newer half: a file the chain still needs, mostly.
		name := files[len(files)/2+int(p.Pick%uint64(len(files)-len(files)/2))]
		if err := os.Remove(filepath.Join(s.F.ShareDir(p.Server), name)); err != nil {
			return err
		}
		s.C.deletedLog(p.Server, name)
		r.injected, r.at = true, fmt.Sprintf("before-start (log file %s deleted on %s)", name, p.Server)
	}
	return nil
}

// chainParts reads LogTarget's chain records on server (each part's
// record, trusted ones only) and lists its log files.
func (c *Checker) chainParts(ctx context.Context, server string) ([]*catalog.ChainRecord, catalog.ChainListing, error) {
	st, err := openShare(ctx, c.f.ShareDir(server))
	if err != nil {
		return nil, catalog.ChainListing{}, err
	}
	l, err := catalog.ListChains(ctx, catalog.StorageFS{Storage: st}, c.f.keys, catalog.Of(LogTarget.Instance, LogTarget.Database))
	if err != nil {
		return nil, l, fmt.Errorf("chaos: chain records on %s: %w", server, err)
	}
	var out []*catalog.ChainRecord
	for _, r := range l.Records {
		if r.Trusted() {
			out = append(out, r)
		}
	}
	return out, l, nil
}
