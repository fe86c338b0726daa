package chaos

import (
	"context"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// What a run does before its start: the faults that happen before the
// cycle (a rollback of the source, damage to an old set) and the faults
// armed to strike during it.

// before applies the faults that happen before the cycle starts.
func (s *Sim) before(ctx context.Context, r *run) error {
	p := r.plan
	switch p.Fault {
	case FaultRollback:
		if p.Target.Instance == AGroup {
			// A database of an availability group is restored over only
			// after it left the group (ALTER AVAILABILITY GROUP ... REMOVE
			// DATABASE), which the simulation does not model.
			r.note("%s is an availability database: not restored over", p.Target)
			break
		}
		began := time.Now()
		at, err := s.rollback(ctx, p)
		if err != nil {
			return err
		}
		if at != "" {
			s.C.rolledBack(p.Target, began, time.Now())
			r.injected, r.at = true, at
		} else {
			r.note("no verified set of %s to restore the source from", p.Target)
		}
	case FaultFlipOld:
		at, err := s.flipOld(p)
		if err != nil {
			return err
		}
		if at != "" {
			r.injected, r.at = true, at
		} else {
			r.note("no unverified set with stripes on %s to damage", p.Server)
		}
	case FaultForeignLog, FaultRecoveryFlip, FaultRestoreLog, FaultLogDelete:
		return s.logFault(ctx, r)
	}
	return nil
}

// arm applies the faults that wait for the cycle in the fleet: a share
// without room, a crash or a lost connection armed at a percent of a
// statement.
func (s *Sim) arm(r *run) error {
	p := r.plan
	switch p.Fault {
	case FaultShareFullSQL:
		used, err := dirBytes(s.F.ShareDir(p.Server))
		if err != nil {
			return err
		}
		if r.source == "" {
			r.note("no replica backs %s up: no share quota", p.Target)
			return nil
		}
		s.F.Instances[r.source].SetShareQuota(UNC(p.Server), used+256<<10)
		r.injected, r.at = true, "before-start ("+p.Server+" quota)"
	case FaultShareFullSMB:
		if err := s.F.SetShareFull(p.Server, true); err != nil {
			return err
		}
		r.injected, r.at = true, "before-start ("+p.Server+" max disk size)"
	}
	if armed(p) {
		r.armedOp, r.armedOn = sqlsim.OpBackup, r.source
		switch p.Step {
		case activities.StepRestore:
			r.armedOp, r.armedOn = sqlsim.OpRestore, Verify01
		case activities.StepCheckDB:
			r.armedOp, r.armedOn = sqlsim.OpCheckDB, Verify01
		}
		if r.armedOn == "" {
			r.note("no replica backs %s up: nothing armed", p.Target)
			return nil
		}
		in := s.F.Instances[r.armedOn]
		if p.Fault == FaultSQLCrash {
			return in.CrashAt(r.armedOp, p.Percent)
		}
		r.dropsBefore = dropped(in)
		return in.DropConnectionAt(r.armedOp, p.Percent)
	}
	return nil
}

// dropped counts the armed lost connections an instance has fired (the
// statement itself runs on, as on SQL Server, until its next write).
func dropped(in *sqlsim.Instance) int {
	return in.LostConnections()
}

// rollback restores the source database from one of its verified sets
// (RESTORE ... WITH REPLACE from that set's stripes): its sequence table
// goes back to that set's number.
func (s *Sim) rollback(ctx context.Context, p Plan) (string, error) {
	files, _ := s.C.scan()
	var cands []manifestFile
	seen := map[setID]bool{}
	for _, mf := range files {
		if mf.M.State != catalog.StateVerified || mf.ID.Instance != p.Target.Instance || mf.ID.Database != p.Target.Database || seen[mf.ID] {
			continue
		}
		if ok, _ := s.C.intactOn(files, mf.Server, mf); !ok {
			continue
		}
		// No SQL Server restores a backup of a newer major version (3169):
		// a DBA restores the source from a set its build reads.
		if h := mf.M.Header; h != nil && major(h.SoftwareVersion) > major(s.F.estate.BuildOf(p.Target.Instance)) {
			continue
		}
		seen[mf.ID] = true
		cands = append(cands, mf)
	}
	if len(cands) == 0 {
		return "", nil
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].ID.Sequence < cands[j].ID.Sequence })
	mf := cands[p.Pick%uint64(len(cands))]
	disks := make([]string, len(mf.M.Stripes))
	for i, st := range mf.M.Stripes {
		disks[i] = UNC(mf.Server) + `\` + st.Name
	}
	stmt, err := tsql.RestoreDatabase(tsql.RestoreOptions{Database: p.Target.Database, Disks: disks, Replace: true, Stats: 10})
	if err != nil {
		return "", err
	}
	if err := s.F.exec(ctx, p.Target.Instance, stmt); err != nil {
		return "", fmt.Errorf("chaos: restore %s from %s on %s: %w", p.Target, mf.ID, mf.Server, err)
	}
	return fmt.Sprintf("before-start (%s restored from seq %d on %s)", p.Target, mf.ID.Sequence, mf.Server), nil
}

// flipOld flips one byte of one stripe of a set that no manifest calls
// verified and that never was verified.
func (s *Sim) flipOld(p Plan) (string, error) {
	files, _ := s.C.scan()
	verified := map[setID]bool{}
	for id := range s.C.verified {
		verified[id] = true
	}
	for _, mf := range files {
		if mf.M.State == catalog.StateVerified {
			verified[mf.ID] = true
		}
	}
	type cand struct{ path, name, what string }
	var cands []cand
	for _, mf := range files {
		if mf.Server != p.Server || verified[mf.ID] || mf.M.State == catalog.StateVerified {
			continue
		}
		for _, st := range mf.M.Stripes {
			if path, ok := stripePath(s.F.ShareDir(p.Server), st.Name); ok {
				if fi, err := os.Stat(path); err == nil && fi.Size() > 0 {
					cands = append(cands, cand{path, st.Name, fmt.Sprintf("%s (%s) stripe %s", mf.ID, mf.M.State, st.Name)})
				}
			}
		}
	}
	if len(cands) == 0 {
		return "", nil
	}
	c := cands[p.Pick%uint64(len(cands))]
	fi, err := os.Stat(c.path)
	if err != nil {
		return "", err
	}
	off := int64(p.Offset % uint64(fi.Size()))
	if err := sqlsim.FlipByte(c.path, off); err != nil {
		return "", err
	}
	s.C.Damaged(c.name)
	return fmt.Sprintf("before-start (%s on %s, byte %d)", c.what, p.Server, off), nil
}

// sourceOf is the instance the BACKUP of p.Target runs on: its instance, or
// for the group's database the first replica (in the configuration's
// order) sys.fn_hadr_backup_is_preferred_replica names, as the product asks
// them; "" when none does.
func (s *Sim) sourceOf(ctx context.Context, p Plan) string {
	if p.Target.Instance != AGroup {
		return p.Target.Instance
	}
	for _, name := range agReplicas {
		db, err := s.F.DB(name)
		if err != nil {
			continue
		}
		qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		var preferred bool
		err = db.QueryRowContext(qctx, "SELECT sys.fn_hadr_backup_is_preferred_replica(@p1)", p.Target.Database).Scan(&preferred)
		cancel()
		db.Close()
		if err == nil && preferred {
			return name
		}
	}
	return ""
}
