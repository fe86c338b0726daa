package activities

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/storage"
)

// MarkVerified moves the set's manifest to verified, with the timings, on
// every server holding it.
func (a *Activities) MarkVerified(ctx context.Context, in MarkInput) error {
	defer a.Cycle.keepAlive(ctx)()
	db, err := a.Cycle.database(in.Instance, in.Database, in.Entry)
	if err != nil {
		return err
	}
	now := a.Cycle.now()
	vm, err := a.updateManifest(ctx, db, in.Sequence, in.Servers, in.Servers, func(m *catalog.Manifest) error {
		if m == nil {
			return storageError(strings.Join(in.Servers, ", "), fmt.Errorf("manifest of seq %d missing: %w", in.Sequence, storage.ErrNotFound))
		}
		// Verified means restored from these very files and CHECKDB'd:
		// CheckDB records that proof (restore-history GUID = the set's).
		if m.Header == nil || m.Proof == nil || !sameGUID(m.Proof.BackupSetGUID, m.Header.BackupSetGUID) {
			return nonRetryable(ErrRestoreMismatch, fmt.Errorf(
				"set %d of %s has no proof that its own backup was restored and CHECKDB'd (proof %+v): it is not marked verified",
				in.Sequence, db.ID(), m.Proof))
		}
		if in.Timings.Sanity > 0 {
			_ = m.SetTiming(catalog.StepSanity, now.Add(-in.Timings.Sanity), now)
		}
		for _, s := range in.Servers {
			m.AddServer(s)
		}
		return advanceOrKeep(m, catalog.StateVerified, now)
	})
	if err != nil {
		return err
	}
	a.loggerFor(ctx).Info("set verified", zap.String("db", db.Name), zap.Int64("seq", in.Sequence), zap.Strings("servers", in.Servers))
	if vm != nil {
		// Time to recover as `starter status` measures it: restore + CHECKDB.
		ttr := vm.Timings[catalog.StepRestore].DurationSeconds + vm.Timings[catalog.StepCheckDB].DurationSeconds
		a.recorder().Verified(db.Instance, db.Name, vm.TakenAt(), time.Duration(ttr*float64(time.Second)))
	}
	return nil
}
