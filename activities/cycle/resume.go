package cycle

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/storage/copier"
)

// ResumeInput asks to take over set Sequence of a database, left unfinished
// by an earlier run (an outage stopped it: it is not failed).
type ResumeInput struct {
	Database string   `json:"database"`
	Instance string   `json:"instance"`
	Entry    string   `json:"entry,omitempty"` // Plan.Entry
	Sequence int64    `json:"seq"`
	Servers  []string `json:"servers"` // where to look: the rotation and copy targets
}

// Where a resumed set continues.
const (
	ResumeFromCopy    = "copy"    // written on its primary only: copy, restore, check
	ResumeFromRestore = "restore" // copied: restore, check (this run proves it itself)
)

// ResumeOutput is the set a resumed cycle finishes.
type ResumeOutput struct {
	Sequence int64               `json:"seq"`
	Primary  string              `json:"primary"`
	Holders  []string            `json:"holders"` // the primary, then the remote copy (when copied)
	State    string              `json:"state"`   // ResumeFromCopy or ResumeFromRestore
	Manifest string              `json:"manifest"`
	Stripes  []activities.Stripe `json:"stripes"`
	// Base is a differential's base set (its manifest's), 0 for a full:
	// the differential is restored on top of it.
	Base int64 `json:"base,omitempty"`
}

// ResumeSet finds the set's manifests, refuses a set that is verified,
// failed, cancelled or never finished its BACKUP, and adopts the set for
// this run (WorkflowID/RunID on every server holding it), so that only this
// run writes it from now on. Whatever state it reached, this run restores
// and checks it itself before calling it verified.
func (a *Activities) ResumeSet(ctx context.Context, in ResumeInput) (ResumeOutput, error) {
	defer a.Cycle.KeepAlive(ctx)()
	d := &a.Cycle
	db, err := d.DatabaseEntry(in.Instance, in.Database, in.Entry)
	if err != nil {
		return ResumeOutput{}, err
	}
	if err := d.DatabaseServerList(db, "ResumeSet's servers", in.Servers); err != nil {
		return ResumeOutput{}, err
	}
	sets, closeAll := a.openSets(ctx, db, in.Sequence, in.Servers)
	defer closeAll()
	var best *catalog.Manifest
	for _, o := range sets {
		if o.m == nil {
			continue
		}
		if !o.m.Trusted() {
			// Its state, stripes and hashes are anybody's: a worker takes
			// over only a set a worker wrote.
			return ResumeOutput{}, activities.NonRetryable(activities.ErrInvalidConfig, fmt.Errorf(
				"set %d of %s on %s is not resumed: its manifest %s is not authenticated: %s; start a new cycle",
				in.Sequence, db.ID(), o.server, o.m.FileName(), o.m.Auth.Why()))
		}
		switch o.m.State {
		case catalog.StateVerified, catalog.StateFailed, catalog.StateCancelled, catalog.StatePending:
			return ResumeOutput{}, activities.NonRetryable(activities.ErrInvalidConfig, fmt.Errorf(
				"set %d of %s is %s on %s: only a set an outage left written, copied, restored or checked is resumed; start a new cycle",
				in.Sequence, db.ID(), o.m.State, o.server))
		}
		if best == nil || o.m.State.Rank() > best.State.Rank() {
			best = o.m
		}
	}
	if best == nil {
		return ResumeOutput{}, activities.NonRetryable(activities.ErrInvalidConfig, fmt.Errorf(
			"set %d of %s: no manifest on %v (or none reachable): check the number with `starter status`", in.Sequence, db.ID(), in.Servers))
	}
	wid, rid := activities.RunOf(ctx)
	out := ResumeOutput{Sequence: in.Sequence, Primary: best.PrimaryServer, Manifest: best.FileName(), State: ResumeFromRestore}
	if best.IsDifferential() {
		out.Base = best.Differential.Sequence
	}
	if best.State == catalog.StateWritten {
		out.State = ResumeFromCopy
	}
	out.Holders = []string{best.PrimaryServer}
	for _, s := range best.Servers {
		if s != best.PrimaryServer {
			out.Holders = append(out.Holders, s)
		}
	}
	for _, s := range best.Stripes {
		out.Stripes = append(out.Stripes, activities.Stripe{Name: s.Name, Size: s.Size, SHA256: s.SHA256})
	}
	for _, o := range sets {
		if o.m == nil {
			continue
		}
		o.m.WorkflowID, o.m.RunID = wid, rid
		if err := d.SaveManifest(ctx, o.st, o.m); err != nil {
			return ResumeOutput{}, activities.StorageError(o.server, err)
		}
	}
	if out.State == ResumeFromRestore {
		if err := a.checkHolders(ctx, db, in, best, sets); err != nil {
			return ResumeOutput{}, err
		}
	}
	activities.Logger(a.Activities, ctx).Info("set adopted to resume it", zap.String("db", db.Name), zap.String("instance", db.Instance),
		zap.Int64("seq", in.Sequence), zap.String("state", string(best.State)), zap.Strings("holders", out.Holders))
	return out, nil
}

// checkHolders hashes the stripes of a copied set on every server holding
// it against the SHA-256 its copy recorded. The set lay without an owner
// since its run stopped: a byte that rotted on one holder in the meantime
// would go unseen (the restore reads the remote copy only) and the set would
// be called verified on a server that no longer holds it. A holder that
// cannot be read is an outage (retried); a stripe that differs is evidence:
// the set is failed with hash_mismatch on every holder and not resumed.
func (a *Activities) checkHolders(ctx context.Context, db *config.Database, in ResumeInput, m *catalog.Manifest, sets []openSet) error {
	var total, done int64
	for _, s := range m.Stripes {
		total += s.Size * int64(len(m.Servers))
	}
	rep := activities.NewReporter(a.Activities, ctx, activities.StepResume, in.Sequence)
	for _, server := range m.Servers {
		i := slices.IndexFunc(sets, func(o openSet) bool { return o.server == server && o.m != nil })
		if i < 0 {
			return activities.StorageError(server, fmt.Errorf("set %d of %s is held by %s, which could not be read to check its stripes: %w",
				in.Sequence, db.ID(), server, storage.ErrConnection))
		}
		for _, s := range m.Stripes {
			base := done
			sum, err := copier.Hash(ctx, sets[i].st, s.Name, s.Size, func(n int64) {
				rep.SetPercent(100 * float64(base+n) / float64(max(total, 1)))
			})
			why := ""
			switch {
			case errors.Is(err, storage.ErrCorrupt) || errors.Is(err, storage.ErrNotFound) || errors.Is(err, fs.ErrNotExist):
				why = err.Error()
			case err != nil:
				return activities.StorageError(server, err)
			case !strings.EqualFold(hex.EncodeToString(sum), s.SHA256):
				why = fmt.Sprintf("stripe %s hashes %x, its copy recorded %s", s.Name, sum, s.SHA256)
			}
			if why != "" {
				cause := fmt.Errorf("set %d of %s is not resumed: on %s %s; it is failed, the next cycle takes a new set",
					in.Sequence, db.ID(), server, why)
				if merr := a.MarkFailed(ctx, activities.MarkInput{Database: in.Database, Instance: in.Instance, Entry: in.Entry,
					Sequence: in.Sequence, Servers: m.Servers, Step: activities.StepResume, ErrorType: activities.ErrHashMismatch,
					Reason: cause.Error(), Evidence: string(catalog.EvidenceHashMismatch)}); merr != nil {
					activities.Logger(a.Activities, ctx).Error("damaged set not marked failed", zap.String("db", db.Name), zap.Int64("seq", in.Sequence), zap.Error(merr))
				}
				return activities.NonRetryable(activities.ErrHashMismatch, cause)
			}
			done += s.Size
		}
	}
	return nil
}
