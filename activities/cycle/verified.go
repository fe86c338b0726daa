package cycle

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/storage"
)

// MarkVerified moves the set's manifest to verified, with the timings, on
// every server holding it: only with the proofs that the set's own backup
// was restored and CHECKDB'd and, for a database with sanity checks, that
// they held on that very restore. A completion of the SanityChecks task
// reported by anyone else proves nothing.
func (a *Activities) MarkVerified(ctx context.Context, in activities.MarkInput) error {
	defer a.Cycle.KeepAlive(ctx)()
	db, err := a.Cycle.DatabaseEntry(in.Instance, in.Database, in.Entry)
	if err != nil {
		return err
	}
	if err := a.Cycle.DatabaseServerList(db, "MarkVerified's servers", in.Servers); err != nil {
		return err
	}
	now := a.Cycle.Clock()
	vm, err := activities.UpdateManifest(a.Activities, ctx, db, in.Sequence, in.Servers, in.Servers, func(m *catalog.Manifest) error {
		if m == nil {
			return activities.StorageError(strings.Join(in.Servers, ", "), fmt.Errorf("manifest of seq %d missing: %w", in.Sequence, storage.ErrNotFound))
		}
		// Verified means restored from these very files and CHECKDB'd:
		// CheckDB records that proof (restore-history GUID = the set's).
		if m.Header == nil || m.Proof == nil || !activities.SameGUID(m.Proof.BackupSetGUID, m.Header.BackupSetGUID) {
			return activities.NonRetryable(activities.ErrRestoreMismatch, fmt.Errorf(
				"set %d of %s has no proof that its own backup was restored and CHECKDB'd (proof %+v): it is not marked verified",
				in.Sequence, db.ID(), m.Proof))
		}
		if err := sanityProven(m, db, in.Sequence); err != nil {
			return err
		}
		// Verified is written only where the set's files are: the
		// servers its manifest says hold it.
		for _, s := range in.Servers {
			if !slices.Contains(m.Servers, s) {
				return activities.NonRetryable(activities.ErrInvalidConfig, fmt.Errorf(
					"set %d of %s is held by %v, not by %s: it is marked verified only where its files are", in.Sequence, db.ID(), m.Servers, s))
			}
		}
		if in.Timings.Sanity > 0 {
			_ = m.SetTiming(catalog.StepSanity, now.Add(-in.Timings.Sanity), now)
		}
		for _, s := range in.Servers {
			m.AddServer(s)
		}
		return activities.AdvanceOrKeep(m, catalog.StateVerified, now)
	})
	if err != nil {
		return err
	}
	activities.Logger(a.Activities, ctx).Info("set verified", zap.String("db", db.Name), zap.Int64("seq", in.Sequence), zap.Strings("servers", in.Servers))
	if vm != nil {
		// Time to recover as `starter status` measures it: restore + CHECKDB.
		ttr := vm.Timings[catalog.StepRestore].DurationSeconds + vm.Timings[catalog.StepCheckDB].DurationSeconds
		activities.Recorder(a.Activities).Verified(db.Instance, db.Name, vm.TakenAt(), time.Duration(ttr*float64(time.Second)))
	}
	return nil
}

// sanityProven checks the sanity proof SanityChecks records (catalog.
// SanityProof): for a database with sanity checks, every check configured
// held on the restore the CHECKDB proof names (same restore-history id,
// instance, database and backup set). Without it the set is not verified
// and stays checked (NoSanityProof, no evidence).
func sanityProven(m *catalog.Manifest, db *config.Database, seq int64) error {
	if len(db.SanityChecks) == 0 {
		return nil
	}
	p, sp := m.Proof, m.SanityProof
	missing := ""
	switch {
	case sp == nil:
		missing = "none was recorded"
	case !sp.Passed:
		missing = "the recorded checks did not pass"
	case sp.RestoreHistoryID != p.RestoreHistoryID || sp.VerifyInstance != p.VerifyInstance ||
		sp.VerifyDatabase != p.VerifyDatabase || !activities.SameGUID(sp.BackupSetGUID, p.BackupSetGUID):
		missing = fmt.Sprintf("it is of another restore (restore_history_id %d of %s on %s, CHECKDB's is %d of %s on %s)",
			sp.RestoreHistoryID, sp.VerifyDatabase, sp.VerifyInstance, p.RestoreHistoryID, p.VerifyDatabase, p.VerifyInstance)
	default:
		for _, c := range db.SanityChecks {
			if !slices.Contains(sp.Checks, c.Name) {
				missing = fmt.Sprintf("check %q is not among those that ran (%s)", c.Name, strings.Join(sp.Checks, ", "))
				break
			}
		}
	}
	if missing == "" {
		return nil
	}
	return activities.NonRetryable(activities.ErrNoSanityProof, fmt.Errorf(
		"set %d of %s has no proof that its sanity checks held on the copy CHECKDB checked (%s): it is not marked verified and stays checked; "+
			"finish it with `starter run --database %s --resume %d`", seq, db.ID(), missing, db.Name, seq))
}
