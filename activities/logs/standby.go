package logs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/logchain"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// ApplyLogsInput asks for the chain's copied log backups to be applied to
// the database's standby copy (log_proof: standby).
type ApplyLogsInput struct {
	Database string `json:"database"`
	Instance string `json:"instance,omitempty"`
	Chain    int64  `json:"chain,omitempty"` // 0: the newest chain on the copy target
}

// ApplyLogsOutput is where the standby copy stands.
type ApplyLogsOutput struct {
	Standby  string `json:"standby,omitempty"`  // its name
	Instance string `json:"instance,omitempty"` // the verification instance
	Chain    int64  `json:"chain,omitempty"`
	// Seeded: this call restored it from the full Sequence (a new copy,
	// or one re-seeded because its chain broke, it was gone or damaged, or
	// the log it needed next was deleted by retention).
	Seeded   bool    `json:"seeded,omitempty"`
	Sequence int64   `json:"sequence,omitempty"`
	Applied  []int64 `json:"applied,omitempty"` // logs applied by this call
	// Through is the newest log applied to the copy, ThroughStart when it
	// started (instant): the copy holds every transaction committed before.
	Through      int64     `json:"through,omitempty"`
	ThroughStart time.Time `json:"through_start,omitzero"`
	RedoLSN      string    `json:"redo_lsn,omitempty"`
	// Waiting says why the copy is not (yet) where the chain is: no
	// verified full of the chain yet, a log not copied yet, a hole.
	Waiting string `json:"waiting,omitempty"`
}

// standbyTarget is where a database's standby copy lives: the backup
// server the chain is copied to, its verification instance, the copy's
// name.
type standbyTarget struct {
	db     *config.Database
	srv    *config.BackupServer
	inst   *config.SQLInstance
	name   string
	remote storage.Storage
	keys   *catalog.Keys
}

func (a *Activities) standbyTarget(ctx context.Context, db *config.Database) (*standbyTarget, error) {
	d := &a.Base.Cycle
	to := db.CopyTarget(chainServer(db))
	srv, err := d.Server(to)
	if err != nil {
		return nil, err
	}
	inst, err := d.Instance(srv.VerifyInstance)
	if err != nil {
		return nil, err
	}
	keys, err := d.ManifestKeys()
	if err != nil {
		return nil, err
	}
	st, err := d.OpenServer(ctx, srv)
	if err != nil {
		return nil, err
	}
	return &standbyTarget{db: db, srv: srv, inst: inst, name: db.StandbyDatabaseName(), remote: st, keys: keys}, nil
}

// ApplyLogs keeps the database's standby copy on the verification instance
// of the chain's copy target. Without one (or when its chain broke, or it
// is gone or damaged) it seeds it from the newest verified full of the
// chain held there, WITH STANDBY, after the same own-copy guard the cycle
// uses (a database of that name the product did not restore is never
// replaced). Then it applies, in order, every copied log backup the copy
// needs (logchain NextToApply from its redo_start_lsn), each file's
// SHA-256 checked first, RESTORE LOG ... WITH STANDBY, and marks each log
// the copy has passed proven (standby) in the chain record, on the copy
// target first. A newer verified full does not re-seed it: the chain goes
// on; only when the log it needs next is gone because retention deleted
// it (behindKept) is it seeded again, from the newest verified full. A
// RESTORE LOG cut short leaves the copy where the previous log left it;
// the next call applies that log again.
func (a *Activities) ApplyLogs(ctx context.Context, in ApplyLogsInput) (ApplyLogsOutput, error) {
	d := &a.Base.Cycle
	db, err := d.Database(in.Instance, in.Database)
	if err != nil {
		return ApplyLogsOutput{}, err
	}
	if db.ProofMode() != config.LogProofStandby {
		return ApplyLogsOutput{}, nil
	}
	stopBeat := d.KeepAlive(ctx)
	defer stopBeat()
	t, err := a.standbyTarget(ctx, db)
	if err != nil {
		return ApplyLogsOutput{}, err
	}
	defer t.remote.Close()
	out := ApplyLogsOutput{Standby: t.name, Instance: t.inst.Name, Chain: in.Chain}
	log := activities.Logger(a.Base, ctx).With(zap.String("db", db.Name), zap.String("instance", db.Instance),
		zap.String("server", t.srv.Name), zap.String("step", StepApplyLogs), zap.String("standby", t.name))

	chain, err := a.remoteChain(ctx, t, in.Chain)
	if err != nil || chain == nil {
		if chain == nil && err == nil {
			out.Waiting = fmt.Sprintf("no log chain record on %s yet", t.srv.Name)
		}
		return out, err
	}
	in.Chain, out.Chain = chain.chain.ID, chain.chain.ID
	rec, err := loadProof(ctx, d, t)
	if err != nil {
		return out, err
	}
	sqlDB, err := d.ConnectSQL(ctx, t.inst, "master")
	if err != nil {
		return out, err
	}
	defer sqlDB.Close()

	// Where the copy stands, and whether it is still good to take logs.
	var seed *logchain.Full
	sb := rec.Standby
	if sb != nil && sb.Copy.On(t.inst.Name, t.name) && sb.Chain == in.Chain && sb.Copy.Confirmed() {
		rs, err := activities.RestoringState(ctx, sqlDB, t.name)
		if err != nil {
			return out, err
		}
		if rs.Found && (rs.State == "RESTORING" || rs.Standby) && rs.RedoLSN != "" {
			f := logchain.Full{Sequence: sb.Sequence, BackupSetGUID: sb.Copy.BackupSetGUID, LastLSN: logchain.LSN(sb.LastLSN),
				Finish: sb.FinishUTC, Verified: true}
			if _, gerr := activities.GuardOwnCopy(ctx, sqlDB, t.inst.Name, t.name, "used", true, &sb.Copy); gerr == nil {
				seed = &f
			} else {
				return out, gerr
			}
		} else {
			log.Warn("standby copy gone or not taking logs: seeding it again", zap.Bool("found", rs.Found), zap.String("state", rs.State),
				zap.Bool("standby", rs.Standby), zap.String("redo_lsn", rs.RedoLSN))
		}
	}
	if seed == nil {
		f, m, why := a.seedFull(ctx, t, chain.chain)
		if m == nil {
			out.Waiting = why
			return out, nil
		}
		if err := a.seedStandby(ctx, t, sqlDB, rec, in.Chain, m, log); err != nil {
			return out, err
		}
		if err := a.recordFull(ctx, t, in.Chain, m, sqlDB); err != nil {
			return out, err
		}
		seed, out.Seeded, out.Sequence = &f, true, m.Sequence
	}
	out.Sequence = rec.Standby.Sequence

	// Apply what the copy needs, in order.
	reseeded := false
	for {
		rs, err := activities.RestoringState(ctx, sqlDB, t.name)
		if err != nil {
			return out, err
		}
		out.RedoLSN = rs.RedoLSN
		if !rs.Found || rs.RedoLSN == "" {
			return out, activities.Retryable(activities.ErrSQLHostUnreachable, fmt.Errorf(
				"standby copy %s on %s is gone or no longer takes logs (state %q): it is seeded again on the next try", t.name, t.inst.Name, rs.State))
		}
		next, err := chain.chain.NextToApply(logchain.LSN(rs.RedoLSN))
		if err != nil {
			return out, activities.NonRetryable(activities.ErrInvalidConfig, err)
		}
		if next.Gap != nil {
			out.Waiting = "the chain has a hole where the standby copy stands: " + next.Gap.String()
			break
		}
		if next.UpToDate {
			break
		}
		l := next.Log
		if !slices.Contains(l.Servers, t.srv.Name) {
			out.Waiting = fmt.Sprintf("log %d is not copied to %s yet", l.Number, t.srv.Name)
			break
		}
		if !reseeded {
			f, m, err := a.behindKept(ctx, t, chain.chain, *l)
			if err != nil {
				return out, err
			}
			if m != nil {
				log.Info("the log the standby copy needs next was deleted by retention (it ends before every verified full kept): seeding it again",
					zap.Int64("chain", in.Chain), zap.Int64("log", l.Number), zap.Int64("seq", m.Sequence))
				if err := a.seedStandby(ctx, t, sqlDB, rec, in.Chain, m, log); err != nil {
					return out, err
				}
				if err := a.recordFull(ctx, t, in.Chain, m, sqlDB); err != nil {
					return out, err
				}
				seed, reseeded, out.Seeded, out.Sequence = &f, true, true, m.Sequence
				continue
			}
		}
		if err := a.restoreLog(ctx, t, sqlDB, chain.names, in.Chain, *l, log); err != nil {
			return out, err
		}
		out.Applied = append(out.Applied, l.Number)
	}

	// Every log the copy has passed since its full is proven.
	proven, err := a.markProven(ctx, t, in.Chain, *seed, logchain.LSN(out.RedoLSN), logchain.ProofStandby, t.name)
	if err != nil {
		return out, err
	}
	if len(proven) > 0 {
		last := proven[len(proven)-1]
		out.Through, out.ThroughStart = last.Number, last.Start
	} else if applied, _ := chain.chain.Restorable(*seed); len(applied) > 0 {
		for _, l := range applied {
			if !logchain.LSN(out.RedoLSN).Less(l.LastLSN) {
				out.Through, out.ThroughStart = l.Number, l.Start
			}
		}
	}
	rec.Standby.AppliedThrough, rec.Standby.RedoLSN, rec.Standby.AppliedAt = out.Through, out.RedoLSN, d.Clock().UTC()
	if err := saveProof(ctx, d, t, rec, standbyPart); err != nil {
		return out, err
	}
	if len(out.Applied) > 0 {
		log.Info("log backups applied to the standby copy", zap.Int64("chain", in.Chain), zap.Int64s("logs", out.Applied),
			zap.String("redo_lsn", out.RedoLSN))
		activities.Recorder(a.Base).StepDone(StepApplyLogs, db.Instance, db.Name, t.srv.Name, 0, 0)
	}
	return out, nil
}

// behindKept is the full to seed the standby copy from again when log l,
// the one it needs next, is gone from the copy target because retention
// deleted it. Retention deletes only logs that end at or before the
// oldest verified full it keeps (logchain.Retain), and every verified full
// the copy target still holds is one it keeps; so a log gone that ends at
// or before every verified full held there, all of them of this chain, is
// needed by no point retention keeps: the chain is whole, the standby just
// fell behind what is kept, and its file missing is no damage. It is
// seeded again from the newest verified full (seedFull), where the chain's
// health and point-in-time proofs count from. Retention does not keep logs
// for a lagging standby instead: keep_verified is what the DBA chose to
// keep, and a standby that stopped would pin the logs for ever. m is nil
// when l's files are all there, or when a verified full held there ends
// before l (or is of an earlier chain, which keeps this chain whole): then
// a missing file is a hole of the chain, and restoring l reports it.
func (a *Activities) behindKept(ctx context.Context, t *standbyTarget, c *logchain.Chain, l logchain.Log) (logchain.Full, *catalog.Manifest, error) {
	gone := false
	for _, f := range l.Files {
		_, err := t.remote.Stat(ctx, f.Name)
		if errors.Is(err, storage.ErrNotFound) {
			gone = true
			break
		}
		if err != nil {
			return logchain.Full{}, nil, activities.StorageError(t.srv.Name, err)
		}
	}
	if !gone {
		return logchain.Full{}, nil, nil
	}
	verified, err := a.verifiedOnTarget(ctx, t)
	if err != nil {
		return logchain.Full{}, nil, err
	}
	for _, m := range verified {
		f := logchain.Full{LastLSN: logchain.LSN(m.Header.LastLSN), Finish: m.Header.BackupFinishUTC}
		if !ofChain(f, c.Base()) || f.LastLSN.Less(l.LastLSN) {
			return logchain.Full{}, nil, nil
		}
	}
	f, m, _ := a.seedFull(ctx, t, c)
	if m == nil || f.LastLSN.Less(l.LastLSN) {
		return logchain.Full{}, nil, nil
	}
	return f, m, nil
}

// remoteChainOf is a chain as the copy target holds it, and its naming.
type remoteChainOf struct {
	chain *logchain.Chain
	names tsql.SetNames
	// offsets are the source's offsets from UTC of its log backups, by
	// number (catalog.LogOffsets).
	offsets map[int64]int
}

// remoteChain assembles chain id (0: the newest) from its records on the
// copy target, the fulls verified by the manifests there; nil when it has
// no record there.
func (a *Activities) remoteChain(ctx context.Context, t *standbyTarget, id int64) (*remoteChainOf, error) {
	fsys := catalog.StorageFS{Storage: t.remote}
	l, err := catalog.ListChains(ctx, fsys, t.keys, catalog.Of(t.db.Instance, t.db.Name))
	if err != nil {
		return nil, activities.StorageError(t.srv.Name, err)
	}
	var parts []*catalog.ChainRecord
	if id == 0 && len(l.Records) > 0 {
		id = l.Records[len(l.Records)-1].Chain
	}
	for _, r := range l.Records {
		if r.Chain == id {
			parts = append(parts, r)
		}
	}
	if len(parts) == 0 {
		return nil, nil
	}
	verified, err := a.verifiedOnTarget(ctx, t)
	if err != nil {
		return nil, err
	}
	guids := map[string]bool{}
	for g, m := range verified {
		guids[g], guids[m.Header.BackupSetGUID] = true, true
	}
	c, err := catalog.AssembleChain(parts, guids)
	if err != nil {
		return nil, activities.NonRetryable(activities.ErrInvalidConfig, fmt.Errorf("log chain %d of %s on %s: %w", id, t.db.ID(), t.srv.Name, err))
	}
	return &remoteChainOf{chain: &c, names: parts[0].Names(), offsets: catalog.LogOffsets(parts)}, nil
}

// verifiedOnTarget are the verified full sets held on the copy target (a
// differential seeds nothing: it restores only on top of its base), by
// backup set GUID (upper case): its remote copies of sets the rotation sent to the
// chain's server, and the sets the rotation sent to it (their primary copy
// is at the same site, hashed as the verified remote copy was). Leaving
// those out left a chain whose full went to the copy target unproven until
// the rotation next sent a set to the chain's server.
func (a *Activities) verifiedOnTarget(ctx context.Context, t *standbyTarget) (map[string]*catalog.Manifest, error) {
	l, err := activities.ListManifests(a.Base, ctx, t.srv.Name, t.db)
	if err != nil {
		return nil, err
	}
	out := map[string]*catalog.Manifest{}
	for _, m := range l.Manifests {
		if m.Trusted() && m.State == catalog.StateVerified && !m.IsDifferential() && m.Header != nil && m.Header.BackupSetGUID != "" &&
			slices.Contains(m.Servers, t.srv.Name) {
			out[strings.ToUpper(m.Header.BackupSetGUID)] = m
		}
	}
	return out, nil
}

// seedFull is the full to seed the standby copy from: the newest verified
// set on the copy target that belongs to the chain (ofChain) and from
// which the chain's logs restore without a hole; nil with why there is
// none.
func (a *Activities) seedFull(ctx context.Context, t *standbyTarget, c *logchain.Chain) (logchain.Full, *catalog.Manifest, string) {
	verified, err := a.verifiedOnTarget(ctx, t)
	if err != nil {
		return logchain.Full{}, nil, "the manifests on " + t.srv.Name + " could not be read: " + err.Error()
	}
	var best *catalog.Manifest
	var bestFull logchain.Full
	for _, m := range verified {
		h := m.Header
		f := logchain.Full{Sequence: m.Sequence, BackupSetGUID: h.BackupSetGUID, FirstLSN: logchain.LSN(h.FirstLSN),
			LastLSN: logchain.LSN(h.LastLSN), DatabaseBackupLSN: logchain.LSN(h.DatabaseBackupLSN), Finish: h.BackupFinishUTC, Verified: true}
		if !ofChain(f, c.Base()) {
			continue
		}
		if _, _, gap := c.FirstAfter(f); gap != nil {
			continue
		}
		if best == nil || bestFull.LastLSN.Less(f.LastLSN) {
			best, bestFull = m, f
		}
	}
	if best == nil {
		return logchain.Full{}, nil, fmt.Sprintf("no verified full backup of chain %d on %s yet: the standby copy is seeded from the first one", c.ID, t.srv.Name)
	}
	return bestFull, best, ""
}

// seedStandby restores set m into the standby copy WITH STANDBY, its
// own-copy record written first.
func (a *Activities) seedStandby(ctx context.Context, t *standbyTarget, sqlDB *mssql.DB, rec *catalog.LogProofRecord, chain int64,
	m *catalog.Manifest, log *zap.Logger) error {
	var recs []*catalog.VerifyCopy
	if rec.Standby != nil {
		recs = append(recs, &rec.Standby.Copy)
	}
	// STANDBY: the copy is readable between log restores, and its undo
	// file says where each RESTORE LOG resumes ("RESTORE Statements -
	// Arguments", STANDBY). No NEW_BROKER: a copy that stays read-only
	// delivers no Service Broker message.
	log.Info("standby copy seeding", zap.Int64("seq", m.Sequence), zap.Int64("chain", chain))
	return a.restoreCopy(ctx, t, sqlDB, rec, t.name, m, tsql.RestoreOptions{StandbyFile: standbyFile(t)}, standbyPart,
		func(v *catalog.VerifyCopy) *catalog.VerifyCopy {
			rec.Standby = &catalog.StandbyCopy{Chain: chain, Sequence: m.Sequence, LastLSN: m.Header.LastLSN, FinishUTC: m.Header.BackupFinishUTC,
				Copy: *v}
			return &rec.Standby.Copy
		}, log, recs...)
}

// restoreCopy restores set m into name on the verification instance with
// opts' recovery (StandbyFile, NoRecovery, NewBroker; the rest is filled
// in), under the cycle's own-copy guard: REPLACE destroys whatever has the
// name, so only ever a copy recs show is the product's. The own-copy record
// is handed to keep, which stores it in rec and returns where it is kept;
// rec is saved before the RESTORE is sent and again once it is confirmed.
func (a *Activities) restoreCopy(ctx context.Context, t *standbyTarget, sqlDB *mssql.DB, rec *catalog.LogProofRecord, name string,
	m *catalog.Manifest, opts tsql.RestoreOptions, part proofPart, keep func(*catalog.VerifyCopy) *catalog.VerifyCopy, log *zap.Logger,
	recs ...*catalog.VerifyCopy) error {
	d := &a.Base.Cycle
	old, err := activities.GuardOwnCopy(ctx, sqlDB, t.inst.Name, name, "replaced", true, recs...)
	if err != nil {
		return err
	}
	layout, err := tsql.Layout(t.srv.PathsFor(t.inst.Name), m.Names(), m.Sequence, len(m.Stripes))
	if err != nil {
		return activities.NonRetryable(activities.ErrInvalidConfig, err)
	}
	disks := tsql.Paths(layout)
	moves, err := activities.RestoreMoves(ctx, sqlDB, t.srv, name, disks)
	if err != nil {
		return err
	}
	opts.Database, opts.Disks, opts.Moves, opts.Checksum, opts.Replace = name, disks, moves, true, old != nil
	stmt, err := tsql.RestoreDatabase(opts)
	if err != nil {
		return activities.NonRetryable(activities.ErrInvalidConfig, err)
	}
	intent, err := activities.CopyIntent(a.Base, ctx, sqlDB, t.inst.Name, name, m.Header.BackupSetGUID, old)
	if err != nil {
		return err
	}
	kept := keep(intent)
	if err := saveProof(ctx, d, t, rec, part); err != nil {
		return err
	}
	marker, err := tsql.RestoreMarker(name, disks[0])
	if err != nil {
		return activities.NonRetryable(activities.ErrInvalidConfig, err)
	}
	if err := a.runLong(ctx, sqlDB, "RESTORE DATABASE", tsql.CommandRestoreDatabase, stmt, marker, m.Sequence, log); err != nil {
		return err
	}
	if err := activities.ConfirmCopy(ctx, sqlDB, kept); err != nil {
		return err
	}
	return saveProof(ctx, d, t, rec, part)
}

// runLong runs a long statement under the cycle's rules: one an earlier
// attempt left running is waited for, not sent twice.
func (a *Activities) runLong(ctx context.Context, sqlDB *mssql.DB, op, command, stmt, marker string, n int64, log *zap.Logger) error {
	s := activities.Statement{DB: sqlDB, Op: op, Command: command, Text: stmt, Marker: marker, Log: log, Step: StepApplyLogs, Number: n}
	if activities.IsRetry(ctx) {
		waited, _, err := activities.AwaitEarlier(a.Base, ctx, s)
		if err != nil && !activities.IsEndedUnseen(err) {
			return err
		}
		if waited {
			return nil
		}
	}
	if _, err := activities.RunStatement(a.Base, ctx, s); err != nil && !activities.IsEndedUnseen(err) {
		return err
	}
	return nil
}

// standbyFile is the standby copy's undo file, in the server's restore log
// directory as the verification instance sees it.
func standbyFile(t *standbyTarget) string {
	return tsql.JoinPath(t.srv.RestoreLogDir, t.name+".tuf")
}

// restoreLog applies log l to the standby copy, its files' SHA-256 checked
// on the copy target first.
func (a *Activities) restoreLog(ctx context.Context, t *standbyTarget, sqlDB *mssql.DB, names tsql.SetNames, chain int64, l logchain.Log, log *zap.Logger) error {
	disks, err := a.checkedLogFiles(ctx, t.remote, t.srv, t.inst.Name, t.db, chain, l)
	if err != nil {
		return err
	}
	stmt, err := tsql.RestoreLog(tsql.RestoreLogOptions{Database: t.name, Disks: disks, Recovery: tsql.LogStandby,
		StandbyFile: standbyFile(t), Checksum: true})
	if err != nil {
		return activities.NonRetryable(activities.ErrInvalidConfig, err)
	}
	marker, _, _ := strings.Cut(stmt, " WITH ")
	err = a.runLong(ctx, sqlDB, "RESTORE LOG", tsql.CommandRestoreLog, stmt, marker, l.Number, log.With(zap.Int64("seq", l.Number)))
	if n, ok := errorNumber(err); ok && n == 4326 {
		return nil // applied already (an attempt that ended unseen): the redo LSN moved on
	}
	return err
}

// checkedLogFiles are the paths of log l's files as the verification
// instance sees them on srv, each file's size and SHA-256 checked against
// the chain record first: a file that is not the one the chain wrote is
// never restored.
func (a *Activities) checkedLogFiles(ctx context.Context, st storage.Storage, srv *config.BackupServer, verifyInstance string,
	db *config.Database, chain int64, l logchain.Log) ([]string, error) {
	paths := srv.PathsFor(verifyInstance)
	var disks []string
	for i, f := range l.Files {
		size, sum, err := hashFile(ctx, st, f.Name)
		if err != nil {
			return nil, activities.StorageError(srv.Name, err)
		}
		if size != f.Size || sum != f.SHA256 {
			return nil, activities.NonRetryable(activities.ErrHashMismatch, fmt.Errorf(
				"log %d of chain %d of %s: %s on %s has %d bytes with SHA-256 %s, the chain record says %d bytes, %s: it is not restored",
				l.Number, chain, db.ID(), f.Name, srv.Name, size, sum, f.Size, f.SHA256))
		}
		disks = append(disks, tsql.JoinPath(paths[i%len(paths)], f.Name))
	}
	return disks, nil
}

// markProven marks proven (by mode, on the copy named copyName) every log
// of the chain the copy has passed since full (its LastLSN at or before
// redo), in the chain record on the copy target and then on the chain's
// server. Marks lost to a record
// written beside them are made again on the next call. It returns the
// logs the copy holds, in order.
func (a *Activities) markProven(ctx context.Context, t *standbyTarget, chain int64, full logchain.Full, redo logchain.LSN,
	mode logchain.ProofMode, copyName string) ([]logchain.Log, error) {
	rc, err := a.remoteChain(ctx, t, chain)
	if err != nil || rc == nil {
		return nil, err
	}
	logs, _ := rc.chain.Restorable(full)
	var held []logchain.Log
	for _, l := range logs {
		if !redo.Less(l.LastLSN) {
			held = append(held, l)
		}
	}
	if len(held) == 0 {
		return nil, nil
	}
	proof := &catalog.LogProof{At: a.Base.Cycle.Clock().UTC(), Mode: string(mode), Instance: t.inst.Name, Database: copyName}
	want := map[int64]bool{}
	for _, l := range held {
		want[l.Number] = true
	}
	if err := a.markOn(ctx, t.remote, t.srv.Name, t.db, chain, want, proof); err != nil {
		return nil, err
	}
	primary := chainServer(t.db)
	psrv, err := a.Base.Cycle.Server(primary)
	if err != nil {
		return nil, err
	}
	pst, err := a.Base.Cycle.OpenServer(ctx, psrv)
	if err != nil {
		return nil, err
	}
	defer pst.Close()
	if err := a.markOn(ctx, pst, primary, t.db, chain, want, proof); err != nil {
		return nil, err
	}
	return held, nil
}

// markOn sets proof on the logs of want not yet proven, in the chain's
// records on one server.
func (a *Activities) markOn(ctx context.Context, st storage.Storage, server string, db *config.Database, chain int64, want map[int64]bool,
	proof *catalog.LogProof) error {
	d := &a.Base.Cycle
	fsys := catalog.StorageFS{Storage: st}
	keys, err := d.ManifestKeys()
	if err != nil {
		return err
	}
	l, err := catalog.ListChains(ctx, fsys, keys, catalog.Of(db.Instance, db.Name))
	if err != nil {
		return activities.StorageError(server, err)
	}
	for _, r := range l.Records {
		if r.Chain != chain || !r.Trusted() {
			continue
		}
		changed := false
		for i := range r.Logs {
			lb := &r.Logs[i]
			if want[lb.Number] && lb.Proven == nil && (lb.State == catalog.LogWritten || lb.State == catalog.LogCopied) {
				p := *proof
				lb.Proven, lb.UpdatedAt = &p, proof.At
				changed = true
			}
		}
		if changed {
			if err := save(ctx, d, fsys, server, r); err != nil {
				return err
			}
		}
	}
	return nil
}

// ofChain reports whether full f can be one of the chain based on full
// base: it ends at or after the base in LSNs and in time. LSNs alone do not
// say it: after the source was restored over itself from an older set, the
// new recovery path reuses the old one's LSNs ("Recovery Paths"), so a full
// taken before the restore holds higher LSNs than the first full of the
// path after it, and none of the new chain's logs applies to it (4330).
// Every full of a chain finished after its base did; the instants are UTC
// (the source's offset applied), so a source in another time zone is
// compared right.
func ofChain(f, base logchain.Full) bool {
	if !f.LastLSN.Valid() || f.LastLSN.Less(base.LastLSN) {
		return false
	}
	return f.Finish.IsZero() || base.Finish.IsZero() || !f.Finish.Before(base.Finish)
}

// recordFull adds the full the standby copy was seeded from to the chain's
// newest record part (on the copy target, then the chain's server) when the
// chain does not list it: the proofs count from it (logchain ProvenTo). A
// full that is not of the chain (ofChain, against the chain's first part)
// is never added.
func (a *Activities) recordFull(ctx context.Context, t *standbyTarget, chain int64, m *catalog.Manifest, sqlDB *mssql.DB) error {
	layout, err := tsql.Layout(t.srv.PathsFor(t.inst.Name), m.Names(), m.Sequence, len(m.Stripes))
	if err != nil {
		return activities.NonRetryable(activities.ErrInvalidConfig, err)
	}
	hq, err := tsql.RestoreHeaderOnly(tsql.Paths(layout))
	if err != nil {
		return activities.NonRetryable(activities.ErrInvalidConfig, err)
	}
	hs, err := sqlDB.HeaderOnly(ctx, hq)
	if err != nil {
		return activities.SQLError(err)
	}
	if len(hs) == 0 || !strings.EqualFold(hs[0].BackupSetGUID, m.Header.BackupSetGUID) {
		return activities.NonRetryable(activities.ErrRestoreMismatch, fmt.Errorf("set %d of %s on %s: its header is not the manifest's backup set",
			m.Sequence, t.db.ID(), t.srv.Name))
	}
	h := m.Header
	full := catalog.ChainFull{Sequence: m.Sequence, BackupSetGUID: h.BackupSetGUID, FirstLSN: h.FirstLSN, LastLSN: h.LastLSN,
		CheckpointLSN: hs[0].CheckpointLSN, DatabaseBackupLSN: h.DatabaseBackupLSN, FinishUTC: h.BackupFinishUTC, CopyOnly: m.Options.CopyOnly}
	d := &a.Base.Cycle
	for _, server := range []string{t.srv.Name, chainServer(t.db)} {
		srv, err := d.Server(server)
		if err != nil {
			return err
		}
		st, err := d.OpenServer(ctx, srv)
		if err != nil {
			return err
		}
		err = func() error {
			defer st.Close()
			fsys := catalog.StorageFS{Storage: st}
			l, err := catalog.ListChains(ctx, fsys, t.keys, catalog.Of(t.db.Instance, t.db.Name))
			if err != nil {
				return activities.StorageError(server, err)
			}
			var newest *catalog.ChainRecord
			f := logchain.Full{LastLSN: logchain.LSN(full.LastLSN), Finish: full.FinishUTC}
			for _, r := range l.Records {
				if r.Chain != chain || !r.Trusted() {
					continue
				}
				if r.Part == 1 && len(r.Fulls) > 0 {
					if b := r.Fulls[0]; !ofChain(f, logchain.Full{LastLSN: logchain.LSN(b.LastLSN), Finish: b.FinishUTC}) {
						return activities.NonRetryable(activities.ErrRestoreMismatch, fmt.Errorf(
							"set %d of %s is not of chain %d (it ends before the chain's first full, set %d): it is not added to the chain",
							m.Sequence, t.db.ID(), chain, b.Sequence))
					}
				}
				for _, f := range r.Fulls {
					if strings.EqualFold(f.BackupSetGUID, full.BackupSetGUID) {
						return nil
					}
				}
				newest = r
			}
			if newest == nil {
				return nil
			}
			if k := len(newest.Fulls); k > 0 && logchain.LSN(full.LastLSN).Less(logchain.LSN(newest.Fulls[k-1].LastLSN)) ||
				len(newest.Fulls) >= catalog.MaxFullsPerPart {
				return nil
			}
			newest.Fulls = append(newest.Fulls, full)
			return save(ctx, d, fsys, server, newest)
		}()
		if err != nil {
			return err
		}
	}
	return nil
}

// loadProof reads the database's proof record on the copy target (a new
// one when there is none); one not trusted steers nothing.
func loadProof(ctx context.Context, d *activities.CycleDeps, t *standbyTarget) (*catalog.LogProofRecord, error) {
	rec, err := catalog.LoadLogProof(ctx, catalog.StorageFS{Storage: t.remote}, t.keys, t.db.Instance, t.db.Name)
	if err != nil {
		return nil, activities.StorageError(t.srv.Name, err)
	}
	if rec != nil && !rec.Trusted() {
		return nil, activities.NonRetryable(activities.ErrInvalidConfig, fmt.Errorf(
			"log proof record %s on %s is not trusted (%s): no copy on the verification instance is touched on its word; move it aside",
			rec.FileName(), t.srv.Name, rec.Auth.Why()))
	}
	if rec == nil {
		rec = catalog.NewLogProofRecord(t.db.Instance, t.db.Name, d.Clock())
	}
	return rec, nil
}

// proofPart is the part of the proof record a writer owns. The standby
// (ApplyLogs) and the scratch-copy proofs (PITProof, NightlyProof,
// DropProofCopy) run side by side in workflows of their own, each reading
// the record when it starts and writing it as it goes.
type proofPart int

const (
	standbyPart proofPart = iota // Standby
	scratchPart                  // Scratch and PIT
)

// saveProof writes rec's part of the proof record on the copy target,
// signed, into the record as the server holds it now: a writer that read
// the record before the other wrote its part (the proofs' own-copy intent,
// a standby seeded again) never puts back the older part, which would
// leave a copy the product restored without the record that shows it is
// the product's.
func saveProof(ctx context.Context, d *activities.CycleDeps, t *standbyTarget, rec *catalog.LogProofRecord, part proofPart) error {
	fsys := catalog.StorageFS{Storage: t.remote}
	cur, err := catalog.LoadLogProof(ctx, fsys, t.keys, t.db.Instance, t.db.Name)
	if err != nil {
		return activities.StorageError(t.srv.Name, err)
	}
	out := rec
	if cur != nil && cur.Trusted() {
		out = cur
		switch part {
		case standbyPart:
			out.Standby = rec.Standby
		case scratchPart:
			out.Scratch, out.PIT = rec.Scratch, rec.PIT
		}
	}
	out.UpdatedAt = d.Clock().UTC()
	if err := catalog.SaveLogProof(ctx, fsys, t.keys, out); err != nil {
		return activities.StorageError(t.srv.Name, err)
	}
	return nil
}
