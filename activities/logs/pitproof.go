package logs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/activities/cycle"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/evidence"
	"github.com/backupcycle/backupcycle/internal/logchain"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// The proofs that restore a scratch copy on the verification instance of
// the chain's copy target: the point-in-time proof (PITProof: the newest
// verified full and the logs to a random instant of the proven window,
// WITH STOPAT) and the nightly proof (NightlyProof: the newest verified
// full and every log since). Each leaves the recovered, checked copy in
// place; DropProofCopy drops it. The copy is guarded like the standby
// copy: its own-copy record (LogProofRecord.Scratch) is written before
// the RESTORE, and a database of its name the product did not restore is
// never replaced or dropped.

// Step names of the proofs, as in logs.
const (
	StepPITProof     = "pit-proof"
	StepNightlyProof = "nightly-proof"
)

// ScratchDatabaseName is the name of the proofs' scratch copy of db: its
// standby copy's name (standby_name, which has a fixed prefix or suffix
// of its own) and "_proof".
func ScratchDatabaseName(db *config.Database) string { return db.StandbyDatabaseName() + "_proof" }

// PITProofInput asks for a point-in-time proof. Fraction, in [0, 1),
// places the target in the proven window (from the newest verified full's
// finish to the point the chain is proven to): the workflow draws it, so
// that a retry restores to the same instant.
type PITProofInput struct {
	Database string  `json:"database"`
	Instance string  `json:"instance,omitempty"`
	Fraction float64 `json:"fraction"`
}

// ProofOutput is what a proof restored and found. Skipped says why there
// was nothing to prove (no chain, no verified full, no proven window):
// nothing was restored.
type ProofOutput struct {
	Skipped  string    `json:"skipped,omitempty"`
	Copy     string    `json:"copy,omitempty"`
	Instance string    `json:"instance,omitempty"`
	Chain    int64     `json:"chain,omitempty"`
	Sequence int64     `json:"sequence,omitempty"` // the full restored
	Target   time.Time `json:"target,omitzero"`    // PITProof: the instant restored to (UTC)
	FirstLog int64     `json:"first_log,omitempty"`
	LastLog  int64     `json:"last_log,omitempty"`
	// OK: the copy recovered and passed the sanity checks (and CHECKDB
	// when asked); Detail says what failed otherwise.
	OK     bool          `json:"ok"`
	Detail string        `json:"detail,omitempty"`
	Took   time.Duration `json:"took"`
	Proven []int64       `json:"proven,omitempty"` // NightlyProof: logs marked proven
}

// PITProof restores the database's newest verified full and the chain's
// logs to a random instant T of the proven window into the scratch copy,
// every log WITH STOPAT = T and NORECOVERY, then RESTORE ... WITH
// RECOVERY ("Restore a SQL Server Database to a Point in Time (Full
// Recovery Model)", https://learn.microsoft.com/sql/relational-databases/backup-restore/restore-a-sql-server-database-to-a-point-in-time-full-recovery-model),
// runs the sanity checks on it (max_age measured from T) and CHECKDB when
// pit_proof.checkdb, and records the result in the proof record. The copy
// stays for DropProofCopy.
func (a *Activities) PITProof(ctx context.Context, in PITProofInput) (ProofOutput, error) {
	if in.Fraction < 0 || in.Fraction >= 1 {
		return ProofOutput{}, activities.NonRetryable(activities.ErrInvalidConfig, fmt.Errorf("PITProof fraction %v: give a number in [0, 1)", in.Fraction))
	}
	p, out, err := a.openProof(ctx, in.Database, in.Instance, StepPITProof)
	if err != nil || p == nil {
		return out, err
	}
	defer p.close()
	from, to, _, ok := p.chain.chain.ProvenWindow()
	if !ok {
		out.Skipped = fmt.Sprintf("chain %d is proven to no point after its newest verified full yet", p.chain.chain.ID)
		return out, nil
	}
	target := pickTarget(from, to, in.Fraction)
	tg := p.chain.chain.LogsTo(target)
	if !tg.Reachable || len(tg.Logs) == 0 {
		out.Skipped = "no restore reaches " + target.Format(time.RFC3339Nano) + ": " + tg.Why
		return out, nil
	}
	m := p.fulls[strings.ToUpper(tg.Full.BackupSetGUID)]
	if m == nil {
		out.Skipped = fmt.Sprintf("the manifest of set %d is not on %s", tg.Full.Sequence, p.t.srv.Name)
		return out, nil
	}
	// STOPAT names the instant on the wall clock of the server that wrote
	// the log, with the offset from UTC of the log that reaches it: the
	// full's may be another (a change of daylight saving time, a server
	// moved to another zone since), and commits carry the clock of their
	// moment. A log recorded without one falls back to the full's.
	offset := 0
	if o, ok := p.chain.offsets[tg.Logs[len(tg.Logs)-1].Number]; ok {
		offset = o
	} else if o := m.Header.UTCOffsetMinutes; o != nil {
		offset = *o
	}
	stopAt := target.Add(time.Duration(offset) * time.Minute)
	out.Target, out.Sequence, out.FirstLog, out.LastLog = target, m.Sequence, tg.Logs[0].Number, tg.Logs[len(tg.Logs)-1].Number
	res := catalog.PITProof{Chain: p.chain.chain.ID, Sequence: m.Sequence, Target: target, StopAt: stopAt, FirstLog: out.FirstLog,
		LastLog: out.LastLog, CheckDB: p.t.db.PITProof.CheckDB, Instance: p.t.inst.Name, Database: p.name, StartedAt: p.started}
	log := p.log.With(zap.Time("target", target))
	if err := a.restoreScratch(ctx, p, m, tg.Logs, stopAt, log); err != nil {
		return out, p.failed(ctx, &a.Base.Cycle, &res, err)
	}
	// The sanity checks' max_age is measured from T: the copy is the
	// database as it was then.
	at := *m
	h := *m.Header
	h.BackupFinish, h.BackupFinishUTC = stopAt, target
	at.Header = &h
	detail, err := a.checkScratch(ctx, p, &at, p.t.db.PITProof.CheckDB, log)
	if err != nil {
		return out, p.failed(ctx, &a.Base.Cycle, &res, err)
	}
	res.OK, res.Detail, res.At = detail == "", detail, a.Base.Cycle.Clock().UTC()
	if res.OK {
		res.Detail = checksDone(p.t.db, res.CheckDB)
	}
	p.rec.AddPIT(res)
	if err := saveProof(ctx, &a.Base.Cycle, p.t, p.rec, scratchPart); err != nil {
		return out, err
	}
	if res.OK {
		a.proofEvidence(ctx, p, m, target, out.LastLog, res.CheckDB)
	}
	out.OK, out.Detail, out.Took = res.OK, res.Detail, res.At.Sub(p.started)
	log.Info("point-in-time proof done", zap.Bool("ok", res.OK), zap.String("detail", res.Detail), zap.Duration("took", out.Took))
	return out, nil
}

// proofEvidence records a passed proof (the copy restored from full m and
// the chain's logs through lastLog, to the recovery point rp) in the
// evidence ledger of the copy target; best effort.
func (a *Activities) proofEvidence(ctx context.Context, p *proofRun, m *catalog.Manifest, rp time.Time, lastLog int64, checkDB bool) {
	r := activities.CopyProof(ctx, evidence.KindLogProof, p.t.srv.Name, p.t.db, p.t.inst.Name, p.name, m, rp, checkDB)
	r.LogProof = &evidence.LogProof{Chain: p.chain.chain.ID, AppliedThrough: lastLog}
	r.Timings = map[string]float64{"proof": a.Base.Cycle.Clock().Sub(p.started).Seconds()}
	activities.AppendEvidence(ctx, a.Base, p.t.remote, p.t.db, m.Sequence, r)
}

// pickTarget is the instant at fraction f of (from, to], in whole
// milliseconds (STOPAT's precision here), never at from itself: STOPAT
// inside the full's own backup time is refused.
func pickTarget(from, to time.Time, f float64) time.Time {
	t := from.Add(time.Duration(f * float64(to.Sub(from)))).Truncate(time.Millisecond)
	if !t.After(from) {
		t = from.Add(time.Millisecond)
	}
	if t.After(to) {
		t = to
	}
	return t.UTC()
}

// checksDone says what a proof's copy passed.
func checksDone(db *config.Database, checkDB bool) string {
	s := fmt.Sprintf("recovered; %d sanity checks passed", len(db.SanityChecks))
	if checkDB {
		s += "; DBCC CHECKDB clean"
	}
	return s
}

// NightlyProofInput asks for the nightly proof of the database.
type NightlyProofInput struct {
	Database string `json:"database"`
	Instance string `json:"instance,omitempty"`
}

// NightlyProof restores the newest verified full of the database's newest
// chain and every log since (as far as the chain is whole) into the
// scratch copy, NORECOVERY, recovers it, runs the sanity checks, and
// marks each log applied proven (nightly) in the chain record, on the copy
// target first. The copy stays for DropProofCopy.
func (a *Activities) NightlyProof(ctx context.Context, in NightlyProofInput) (ProofOutput, error) {
	p, out, err := a.openProof(ctx, in.Database, in.Instance, StepNightlyProof)
	if err != nil || p == nil {
		return out, err
	}
	defer p.close()
	full, m := a.newestVerified(p)
	if m == nil {
		out.Skipped = fmt.Sprintf("no verified full backup of chain %d on %s yet", p.chain.chain.ID, p.t.srv.Name)
		return out, nil
	}
	logs, gap := p.chain.chain.Restorable(full)
	var copied []logchain.Log
	for _, l := range logs {
		if !containsString(l.Servers, p.t.srv.Name) {
			break // not copied yet: the next night takes it
		}
		copied = append(copied, l)
	}
	out.Sequence = m.Sequence
	if len(copied) > 0 {
		out.FirstLog, out.LastLog = copied[0].Number, copied[len(copied)-1].Number
	}
	if err := a.restoreScratch(ctx, p, m, copied, time.Time{}, p.log); err != nil {
		return out, err
	}
	detail, err := a.checkScratch(ctx, p, m, false, p.log)
	if err != nil {
		return out, err
	}
	out.OK, out.Detail = detail == "", detail
	if out.OK && len(copied) > 0 {
		proven, err := a.markProven(ctx, p.t, p.chain.chain.ID, full, copied[len(copied)-1].LastLSN, logchain.ProofNightly, p.name)
		if err != nil {
			return out, err
		}
		for _, l := range proven {
			out.Proven = append(out.Proven, l.Number)
		}
	}
	if out.OK {
		rp := m.TakenAt()
		if len(copied) > 0 {
			rp = copied[len(copied)-1].Finish
		}
		a.proofEvidence(ctx, p, m, rp, out.LastLog, false)
		out.Detail = checksDone(p.t.db, false)
		if gap != nil {
			out.Detail += "; the chain stops at a hole: " + gap.String()
		}
	}
	out.Took = a.Base.Cycle.Clock().Sub(p.started)
	p.log.Info("nightly proof done", zap.Bool("ok", out.OK), zap.Int64s("proven", out.Proven), zap.String("detail", out.Detail),
		zap.Duration("took", out.Took))
	return out, nil
}

// newestVerified is the newest verified full of the chain held on the
// copy target, and its manifest.
func (a *Activities) newestVerified(p *proofRun) (logchain.Full, *catalog.Manifest) {
	c := p.chain.chain
	for i := len(c.Fulls) - 1; i >= 0; i-- {
		if m := p.fulls[strings.ToUpper(c.Fulls[i].BackupSetGUID)]; m != nil && c.Fulls[i].Verified {
			return c.Fulls[i], m
		}
	}
	return logchain.Full{}, nil
}

func containsString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// DropProofInput names the database whose scratch copy is dropped.
type DropProofInput struct {
	Database string `json:"database"`
	Instance string `json:"instance,omitempty"`
}

// DropProofCopy drops the proofs' scratch copy when its record shows it is
// the product's (nothing when it is gone), and clears the record.
func (a *Activities) DropProofCopy(ctx context.Context, in DropProofInput) error {
	d := &a.Base.Cycle
	db, err := d.Database(in.Instance, in.Database)
	if err != nil {
		return err
	}
	t, err := a.standbyTarget(ctx, db)
	if err != nil {
		return err
	}
	defer t.remote.Close()
	rec, err := loadProof(ctx, d, t)
	if err != nil {
		return err
	}
	sqlDB, err := d.ConnectSQL(ctx, t.inst, "master")
	if err != nil {
		return err
	}
	defer sqlDB.Close()
	name := ScratchDatabaseName(db)
	log := activities.Logger(a.Base, ctx).With(zap.String("db", db.Name), zap.String("instance", db.Instance), zap.String("copy", name))
	if err := activities.DropOwnCopy(a.Base, ctx, sqlDB, t.inst.Name, name, true, log, rec.Scratch); err != nil {
		return err
	}
	if rec.Scratch != nil {
		rec.Scratch = nil
		return saveProof(ctx, d, t, rec, scratchPart)
	}
	return nil
}

// proofRun is one proof's target, chain, verified fulls and proof record.
type proofRun struct {
	t       *standbyTarget
	chain   *remoteChainOf
	fulls   map[string]*catalog.Manifest
	rec     *catalog.LogProofRecord
	sqlDB   *mssql.DB
	name    string
	started time.Time
	log     *zap.Logger
	stop    func()
}

func (p *proofRun) close() {
	p.sqlDB.Close()
	p.t.remote.Close()
	p.stop()
}

// openProof gathers what a proof needs; nil (with out.Skipped) when there
// is nothing to prove.
func (a *Activities) openProof(ctx context.Context, database, instance, step string) (*proofRun, ProofOutput, error) {
	d := &a.Base.Cycle
	db, err := d.Database(instance, database)
	if err != nil {
		return nil, ProofOutput{}, err
	}
	if !db.LogBackups() {
		return nil, ProofOutput{Skipped: "the database has no log_backup"}, nil
	}
	p := &proofRun{name: ScratchDatabaseName(db), started: d.Clock().UTC(), stop: d.KeepAlive(ctx)}
	fail := func(err error) (*proofRun, ProofOutput, error) {
		if p.sqlDB != nil {
			p.sqlDB.Close()
		}
		if p.t != nil {
			p.t.remote.Close()
		}
		p.stop()
		return nil, ProofOutput{}, err
	}
	if p.t, err = a.standbyTarget(ctx, db); err != nil {
		return fail(err)
	}
	out := ProofOutput{Copy: p.name, Instance: p.t.inst.Name}
	p.log = activities.Logger(a.Base, ctx).With(zap.String("db", db.Name), zap.String("instance", db.Instance),
		zap.String("server", p.t.srv.Name), zap.String("step", step), zap.String("copy", p.name))
	if p.chain, err = a.remoteChain(ctx, p.t, 0); err != nil {
		return fail(err)
	}
	if p.chain == nil {
		_, _, _ = fail(nil)
		out.Skipped = "no log chain record on " + p.t.srv.Name + " yet"
		return nil, out, nil
	}
	out.Chain = p.chain.chain.ID
	if p.fulls, err = a.verifiedOnTarget(ctx, p.t); err != nil {
		return fail(err)
	}
	if p.rec, err = loadProof(ctx, d, p.t); err != nil {
		return fail(err)
	}
	if p.sqlDB, err = d.ConnectSQL(ctx, p.t.inst, "master"); err != nil {
		return fail(err)
	}
	return p, out, nil
}

// failed records a proof that failed on the backups themselves (a log or
// full whose files or content do not restore) and passes err on; an
// outage or a problem of the environment (the name taken, the
// configuration) is only passed on: the proof says nothing then.
func (p *proofRun) failed(ctx context.Context, d *activities.CycleDeps, res *catalog.PITProof, err error) error {
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || !ae.NonRetryable() {
		return err
	}
	switch ae.Type() {
	case activities.ErrCorruptBackup, activities.ErrHashMismatch, activities.ErrRestoreMismatch:
	default:
		return err
	}
	res.OK, res.Detail, res.At = false, err.Error(), d.Clock().UTC()
	p.rec.AddPIT(*res)
	if serr := saveProof(ctx, d, p.t, p.rec, scratchPart); serr != nil {
		p.log.Warn("failed point-in-time proof not recorded", zap.Error(serr))
	}
	return err
}

// restoreScratch restores set m into the scratch copy NORECOVERY (its
// own-copy record written first), applies logs in order (each file's
// SHA-256 checked first), with STOPAT = stopAt when it is set (a log
// inside which the point is reached ends the sequence), and recovers it.
func (a *Activities) restoreScratch(ctx context.Context, p *proofRun, m *catalog.Manifest, logs []logchain.Log, stopAt time.Time, log *zap.Logger) error {
	t := p.t
	log.Info("proof copy restoring", zap.Int64("seq", m.Sequence), zap.Int("logs", len(logs)))
	// NEW_BROKER: the copy comes online, and must deliver none of its
	// source's Service Broker messages.
	if err := a.restoreCopy(ctx, t, p.sqlDB, p.rec, p.name, m, tsql.RestoreOptions{NoRecovery: true, NewBroker: true}, scratchPart,
		func(v *catalog.VerifyCopy) *catalog.VerifyCopy { p.rec.Scratch = v; return v }, log, p.rec.Scratch); err != nil {
		return err
	}
	for _, l := range logs {
		disks, err := a.checkedLogFiles(ctx, t.remote, t.srv, t.inst.Name, t.db, p.chain.chain.ID, l)
		if err != nil {
			return err
		}
		stmt, err := tsql.RestoreLog(tsql.RestoreLogOptions{Database: p.name, Disks: disks, Recovery: tsql.LogNoRecovery, StopAt: stopAt, Checksum: true})
		if err != nil {
			return activities.NonRetryable(activities.ErrInvalidConfig, err)
		}
		marker, _, _ := strings.Cut(stmt, " WITH ")
		err = a.runLong(ctx, p.sqlDB, "RESTORE LOG", tsql.CommandRestoreLog, stmt, marker, l.Number, log.With(zap.Int64("seq", l.Number)))
		if n, ok := errorNumber(err); !ok || n != 4326 {
			if err != nil {
				return err
			}
		}
		if stopAt.IsZero() {
			continue
		}
		// Stopped inside this log (its redo point short of its end): the
		// point is reached, no later log applies.
		rs, err := activities.RestoringState(ctx, p.sqlDB, p.name)
		if err != nil {
			return err
		}
		if rs.RedoLSN != "" && logchain.LSN(rs.RedoLSN).Less(l.LastLSN) {
			break
		}
	}
	rec, err := tsql.RecoverDatabase(p.name)
	if err != nil {
		return activities.NonRetryable(activities.ErrInvalidConfig, err)
	}
	if _, err := p.sqlDB.Run(ctx, "RESTORE DATABASE WITH RECOVERY", rec, nil); err != nil {
		return activities.SQLError(err)
	}
	return nil
}

// checkScratch runs the sanity checks on the recovered scratch copy
// (max_age measured from ref's backup finish) and CHECKDB when checkDB.
// A check that did not hold, or CHECKDB errors, come back as the detail
// ("" when all held); an outage, or a check that could not run, as the
// error.
func (a *Activities) checkScratch(ctx context.Context, p *proofRun, ref *catalog.Manifest, checkDB bool, log *zap.Logger) (string, error) {
	d := &a.Base.Cycle
	cdb, err := d.ConnectSQL(ctx, p.t.inst, p.name)
	if err != nil {
		return "", err
	}
	defer cdb.Close()
	err = cycle.SanityCheckCopy(ctx, cdb, p.t.db, p.t.inst.Name, p.name, ref.Sequence, ref, log)
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) && ae.Type() == activities.ErrSanityCheckFailed {
		return ae.Error(), nil
	}
	if err != nil {
		return "", err
	}
	if !checkDB {
		return "", nil
	}
	return cycle.CheckDBCopy(ctx, p.sqlDB, p.name)
}
