package chaos

import (
	"context"
	"database/sql"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/status"
	"github.com/backupcycle/backupcycle/internal/storage/local"
	"github.com/backupcycle/backupcycle/internal/tsql"
	"github.com/backupcycle/backupcycle/workflows"
)

// The log chain's invariants (I9-I11), judged from the signed chain
// records on the shares, the files there and the emulator's state, with
// rules of their own (LSN continuity, files by size and SHA-256, rows by
// commit time): the product's verdict is what its LogChain and LogProof
// queries say, never recomputed with its code.

// logChecks is what the simulation tells the log checks.
type logChecks struct {
	// rollbacks are the RESTOREs over LogTarget the harness ran
	// (FaultRollback), from before it sent each to after it returned.
	rollbacks []restoreSpan
	deleted   map[string]time.Time // server|file of log files the harness deleted, when
	// pitDraw chooses the point in time of the run's I11 restore.
	pitDraw uint64
	// pits counts the I11 restores compared and skipped (why), replays
	// the product's point-in-time proofs replayed (replayed, by key).
	pits     int
	pitSkip  map[string]int
	replays  int
	replayed map[string]bool
}

func (l *logChecks) stats() string {
	return fmt.Sprintf("%d point-in-time restores of %s compared with its rows (I11), skipped: %s; %d of the product's point-in-time proofs replayed",
		l.pits, LogTarget, counts(l.pitSkip), l.replays)
}

// restoreSpan is a RESTORE over the source: sent after began, returned
// before ended.
type restoreSpan struct{ began, ended time.Time }

// side says on which side of the RESTORE a backup finished at t lies: -1
// before it (the database's life it replaced), 1 after it, 0 when t falls
// within it (a backup of either life may finish then).
func (r restoreSpan) side(t time.Time) int {
	switch {
	case t.Before(r.began):
		return -1
	case t.After(r.ended):
		return 1
	}
	return 0
}

func (c *Checker) rolledBack(t Target, began, ended time.Time) {
	if t == LogTarget {
		c.logs.rollbacks = append(c.logs.rollbacks, restoreSpan{began, ended})
	}
}

func (c *Checker) deletedLog(server, name string) {
	if c.logs.deleted == nil {
		c.logs.deleted = map[string]time.Time{}
	}
	c.logs.deleted[server+"|"+name] = time.Now()
}

func openShare(ctx context.Context, dir string) (*local.Storage, error) {
	return local.Open(ctx, dir)
}

// lsnCmp compares two LSNs (decimal digits, numeric(25,0)).
func lsnCmp(a, b string) int {
	a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
	if len(a) != len(b) {
		if len(a) < len(b) {
			return -1
		}
		return 1
	}
	return strings.Compare(a, b)
}

// chainView is LogTarget's current chain as the records on both servers
// hold it together: each part's copies merged as the product's status
// merges them (catalog.MergeChainPart: the chain's server writes each log
// backup first, the copy target gets its proof first).
type chainView struct {
	id    int64
	parts []*catalog.ChainRecord
	logs  []catalog.LogBackup // written or copied, by number
	brk   *catalog.ChainBreak
	// full is the newest full of the chain that a trusted manifest calls
	// verified, and its manifest (nil when none); fulls are all of them.
	full  *catalog.ChainFull
	mf    *manifestFile
	fulls []*catalog.ChainFull
}

func (c *Checker) currentChain(ctx context.Context, files []manifestFile) (*chainView, error) {
	copies := map[[2]int64][]*catalog.ChainRecord{}
	for _, srv := range Servers {
		parts, _, err := c.chainParts(ctx, srv)
		if err != nil {
			return nil, err
		}
		for _, p := range parts {
			k := [2]int64{p.Chain, int64(p.Part)}
			copies[k] = append(copies[k], p)
		}
	}
	v := &chainView{}
	for k := range copies {
		v.id = max(v.id, k[0])
	}
	if v.id == 0 {
		return nil, nil
	}
	for k, rs := range copies {
		if k[0] == v.id {
			v.parts = append(v.parts, catalog.MergeChainPart(rs))
		}
	}
	sort.Slice(v.parts, func(i, j int) bool { return v.parts[i].Part < v.parts[j].Part })
	verified := map[string]*manifestFile{}
	for i, mf := range files {
		if mf.M.State == catalog.StateVerified && mf.ID.Instance == LogTarget.Instance && mf.ID.Database == LogTarget.Database && mf.M.Header != nil {
			if ok, _ := c.intactOn(files, mf.Server, mf); ok {
				verified[normGUID(mf.M.Header.BackupSetGUID)] = &files[i]
			}
		}
	}
	for _, p := range v.parts {
		for i := range p.Fulls {
			// The newest by its end: after a restore of the source over
			// itself, a later full can have the lower LSNs.
			f := &p.Fulls[i]
			mf := verified[normGUID(f.BackupSetGUID)]
			if mf == nil {
				continue
			}
			v.fulls = append(v.fulls, f)
			if v.full == nil || f.FinishUTC.After(v.full.FinishUTC) {
				v.full, v.mf = f, mf
			}
		}
		for _, l := range p.Logs {
			if l.State == catalog.LogWritten || l.State == catalog.LogCopied {
				v.logs = append(v.logs, l)
			}
		}
		if p.Break != nil {
			v.brk = p.Break
		}
	}
	sort.Slice(v.logs, func(i, j int) bool { return v.logs[i].Number < v.logs[j].Number })
	return v, nil
}

// walk is the restore sequence from the chain's newest verified full: each
// log starting at or before where the last one ended and ending after
// it; gap says where it stops short of the newest log backup ("" when it
// reaches it).
func (v *chainView) walk() (seq []catalog.LogBackup, gap string, at int64) {
	pos := v.full.LastLSN
	for _, l := range v.logs {
		if lsnCmp(l.LastLSN, pos) <= 0 {
			continue // before the full, or empty
		}
		if lsnCmp(l.FirstLSN, pos) > 0 {
			return seq, fmt.Sprintf("log %d starts at LSN %s, the chain from full %d stands at %s", l.Number, l.FirstLSN, v.full.Sequence, pos), l.Number
		}
		if len(l.Files) == 0 {
			return seq, fmt.Sprintf("log %d (LSN %s to %s) has no file in the chain", l.Number, l.FirstLSN, l.LastLSN), l.Number
		}
		seq = append(seq, l)
		pos = l.LastLSN
	}
	return seq, "", 0
}

// productSays is what the product reports of LogTarget's chain: the
// LogChain and LogProof queries, or why they could not be read.
type productSays struct {
	chain workflows.LogChainStatus
	proof workflows.LogProofStatus
	// status are the reasons `starter status` gives for LogTarget.
	status []string
	err    error
}

func (c *Checker) productSays(ctx context.Context) productSays {
	var out productSays
	tc := c.f.Client()
	if tc == nil {
		out.err = fmt.Errorf("Temporal is down")
		return out
	}
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := tc.QueryWorkflow(qctx, workflows.LogChainWorkflowID(LogTarget.Instance, LogTarget.Database), "", workflows.LogChainQuery)
	if err == nil {
		err = v.Get(&out.chain)
	}
	if err != nil {
		out.err = fmt.Errorf("logchain query: %w", err)
		return out
	}
	if v, err := tc.QueryWorkflow(qctx, workflows.LogProofWorkflowID(LogTarget.Instance, LogTarget.Database), "", workflows.LogProofQuery); err == nil {
		_ = v.Get(&out.proof)
	}
	for _, d := range status.Load(ctx, c.f.Cfg, nil, time.Now()).Databases {
		if d.Instance == LogTarget.Instance && d.Database == LogTarget.Database {
			out.status = d.Reasons
		}
	}
	return out
}

// red reports whether the product says the chain is not well, and its
// words: broken with its break, or degraded with the error.
func (p productSays) red() (bool, string) {
	st := p.chain
	switch {
	case st.State == workflows.ChainBroken && st.Break != nil:
		return true, fmt.Sprintf("broken: %s: %s", st.Break.Reason, st.Break.Detail)
	case st.State == workflows.ChainDegraded && st.LastError+st.CopyError != "":
		return true, "degraded: " + st.LastError + st.CopyError
	}
	return false, ""
}

// checkLogs checks I9, I10 and I11 on LogTarget's current chain.
func (c *Checker) checkLogs(ctx context.Context, files []manifestFile, add addFunc) Notes {
	var notes Notes
	v, err := c.currentChain(ctx, files)
	if err != nil {
		return append(notes, fmt.Sprintf("log chain: %v", err))
	}
	if v == nil || v.full == nil {
		return append(notes, fmt.Sprintf("log chain of %s: no chain with a verified full yet", LogTarget))
	}
	if v.brk != nil {
		notes = append(notes, fmt.Sprintf("log chain %d of %s broke (%s: %s)", v.id, LogTarget, v.brk.Reason, v.brk.Detail))
	}
	says := c.productSays(ctx)
	if says.err != nil {
		return append(notes, fmt.Sprintf("log chain of %s: the product's word not read: %v", LogTarget, says.err))
	}
	seq, gap, gapAt := v.walk()
	red, words := says.red()
	proofErr := says.proof.LastError
	// The product names log n: its LogChain query broken or degraded, its
	// proof's error or status's reasons.
	names := func(n int64) bool {
		if red || strings.Contains(proofErr, fmt.Sprintf("log %d ", n)) {
			return true
		}
		for _, r := range says.status {
			if strings.Contains(r, fmt.Sprintf("log %d ", n)) || strings.Contains(r, "broke") {
				return true
			}
		}
		return false
	}
	// I9: no gap from the newest verified full to the newest log backup,
	// no log of another life of the database, every file of the walk
	// intact where the record says it is.
	var defects []defect
	if gap != "" && v.brk == nil {
		defects = append(defects, defect{gapAt, gap})
	}
	defects = append(defects, c.acrossRestore(v)...)
	now := time.Now().UTC()
	fd, fn := c.fileDefects(seq, now)
	defects, notes = append(defects, fd...), append(notes, fn...)
	for _, d := range defects {
		if !names(d.log) {
			add(9, fmt.Sprintf("%d|%s", v.id, d.text), "chain %d of %s from full %d: %s; the product says %s %s (proof: %q; status: %q)",
				v.id, LogTarget, v.full.Sequence, d.text, says.chain.State, words, proofErr, says.status)
		}
	}
	// I10: every log backup of the walk finished more than ProofLag ago is
	// proven, or the product says why not.
	for _, l := range seq {
		if l.Proven != nil || now.Sub(l.BackupFinishUTC) <= ProofLag {
			continue
		}
		if !names(l.Number) && says.proof.Waiting == "" {
			add(10, fmt.Sprintf("%d|%d", v.id, l.Number), "chain %d of %s: log %d finished %s ago (%s) is not proven, log_proof_lag %s; the product says %s, the proof %+v, status %q",
				v.id, LogTarget, l.Number, now.Sub(l.BackupFinishUTC).Round(time.Second), l.BackupFinishUTC.Format(time.RFC3339), ProofLag, says.chain.State, proofBrief(says.proof), says.status)
		}
	}
	notes = append(notes, c.replayPITProofs(ctx, v, files, add)...)
	n, err := c.checkPIT(ctx, v, seq, add)
	if err != nil {
		notes = append(notes, fmt.Sprintf("point-in-time restore (I11) of %s: %v", LogTarget, err))
	} else if n != "" {
		notes = append(notes, n)
	}
	return notes
}

// defect is what I9 finds wrong with the chain, at log backup log.
type defect struct {
	log  int64
	text string
}

// acrossRestore names, for each verified full of the chain, the first of
// the chain's log backups after it (in its walk, or finished after it)
// that lies on the other side of a restore of the source over itself
// (FaultRollback). A database restored WITH RECOVERY begins a new recovery
// fork, its LSNs going on from the restored set's, and a log backup of
// another recovery path does not apply to a copy ("This backup set cannot
// be applied because it is on a recovery path that is inconsistent with
// the database", 4330, "Database Engine events and errors (4000 to
// 4999)",
// https://learn.microsoft.com/en-us/sql/relational-databases/errors-events/database-engine-events-and-errors-4000-to-4999),
// whatever their LSNs say: a chain that lists such a full offers a restore
// no server runs. A backup that finished while the RESTORE ran is of
// either life: it is not judged.
func (c *Checker) acrossRestore(v *chainView) []defect {
	var out []defect
	for _, f := range v.fulls {
		if f.FinishUTC.IsZero() {
			continue
		}
		from := *v
		from.full = f
		seq, _, _ := from.walk()
	logs:
		for _, l := range v.logs {
			inWalk := slices.ContainsFunc(seq, func(x catalog.LogBackup) bool { return x.Number == l.Number })
			if l.BackupFinishUTC.IsZero() || !inWalk && !l.BackupFinishUTC.After(f.FinishUTC) {
				continue
			}
			for _, r := range c.logs.rollbacks {
				if r.side(l.BackupFinishUTC)*r.side(f.FinishUTC) < 0 {
					out = append(out, defect{l.Number, fmt.Sprintf("full %d (finished %s) and log %d (finished %s), the first of the chain's logs after it taken on the other side of %s restored over at %s: two recovery paths, which no restore joins",
						f.Sequence, f.FinishUTC.Format(time.RFC3339), l.Number, l.BackupFinishUTC.Format(time.RFC3339), LogTarget, r.began.UTC().Format(time.RFC3339))})
					break logs
				}
			}
		}
	}
	return out
}

// deletedGrace is how long the product has to notice a log backup file
// the harness deleted (FaultLogDelete) before I9 judges it: it looks at
// its next copy of the chain (CopyLogs, after a tick), which a worker
// restarted, killed or frozen delays; the proof gets as long.
const deletedGrace = ProofLag

// fileDefects are the files of the walk (seq) that are not intact on a
// server their log's record names, and the copied logs held on one server
// only, as at now; a file the harness deleted less than deletedGrace ago
// is noted, not judged yet.
func (c *Checker) fileDefects(seq []catalog.LogBackup, now time.Time) ([]defect, Notes) {
	var out []defect
	var notes Notes
	for _, l := range seq {
		for _, srv := range l.Servers {
			for _, f := range l.Files {
				why := c.logFileIntact(srv, f)
				if why == "" {
					continue
				}
				if at, ok := c.logs.deleted[srv+"|"+f.Name]; ok && now.Sub(at) < deletedGrace {
					notes = append(notes, fmt.Sprintf("log %d: %s on %s deleted by the harness %s ago: judged after %s", l.Number, f.Name, srv,
						now.Sub(at).Round(time.Second), deletedGrace))
					continue
				}
				out = append(out, defect{l.Number, fmt.Sprintf("log %d: %s on %s %s", l.Number, f.Name, srv, why)})
			}
		}
		if l.State == catalog.LogCopied && len(l.Servers) < 2 {
			out = append(out, defect{l.Number, fmt.Sprintf("log %d is copied but held on %v only", l.Number, l.Servers)})
		}
	}
	return out, notes
}

func proofBrief(p workflows.LogProofStatus) string {
	return fmt.Sprintf("{through %d, seq %d, lag %s, waiting %q, error %q}", p.Through, p.Sequence, p.Lag.Round(time.Second), p.Waiting, p.LastError)
}

// logFileIntact says what is wrong with a log backup file on server ("" if
// nothing): missing, another size or another SHA-256 than the record's.
func (c *Checker) logFileIntact(server string, f catalog.Stripe) string {
	p, ok := stripePath(c.f.ShareDir(server), f.Name)
	if !ok {
		return "is not a file name"
	}
	fi, err := os.Stat(p)
	if err != nil {
		if _, ok := c.logs.deleted[server+"|"+f.Name]; ok {
			return "missing (deleted by the harness)"
		}
		return "missing"
	}
	if f.Size > 0 && fi.Size() != f.Size {
		return fmt.Sprintf("has %d bytes, the record %d", fi.Size(), f.Size)
	}
	if f.SHA256 != "" {
		got, err := hashFile(p)
		if err != nil {
			return "unreadable"
		}
		if !strings.EqualFold(f.SHA256, hex.EncodeToString(got[:])) {
			return "differs from its sha256"
		}
	}
	return ""
}

// pitName is the scratch database of the I11 restores on the checker's
// own instance.
const pitName = "DBA_pit"

// checkPIT (I11) restores LogTarget on the checker's instance to a point T
// drawn in the proven window (from the first log after the newest verified
// full to the last log proven without a hole before it) with RESTORE
// DATABASE ... NORECOVERY and RESTORE LOG ... STOPAT = T, and compares its
// dbo.CommitLog with the source's rows committed at or before T.
func (c *Checker) checkPIT(ctx context.Context, v *chainView, seq []catalog.LogBackup, add addFunc) (string, error) {
	skip := func(why string) (string, error) {
		if c.logs.pitSkip == nil {
			c.logs.pitSkip = map[string]int{}
		}
		c.logs.pitSkip[why]++
		return "I11 skipped: " + why, nil
	}
	k := 0
	for k < len(seq) && seq[k].Proven != nil {
		k++
	}
	if k < 2 {
		return skip("fewer than two proven log backups after the newest verified full")
	}
	proven := seq[:k]
	for _, r := range c.logs.rollbacks {
		if r.side(v.full.FinishUTC) <= 0 {
			return skip("the source was restored over since the full")
		}
	}
	// The full holds every row committed before it ended, the logs each
	// row after it up to the last one's end, whatever the commit times say
	// (the estate moves the source between time zones): restored without
	// STOPAT they hold exactly the source's rows up to their newest.
	inFull, err := c.restoreTo(ctx, v, nil, time.Time{})
	if err != nil {
		return "", err
	}
	all, err := c.restoreTo(ctx, v, proven, time.Time{})
	if err != nil {
		return "", err
	}
	src, err := commitRows(ctx, c.f, LogTarget.Instance, LogTarget.Database)
	if err != nil {
		return "", err
	}
	fullMax, allMax := maxID(inFull), maxID(all)
	through := map[string]bool{}
	for _, row := range src {
		if row.id <= allMax {
			through[row.key()] = true
		}
	}
	c.logs.pits++
	if missing, extra := diffRows(through, all); len(missing)+len(extra) > 0 {
		add(11, fmt.Sprintf("%d|%d|all", v.id, proven[k-1].Number),
			"chain %d of %s restored from full %d and logs %d..%d holds %d rows, the source %d up to id %d: %d missing %v, %d the source does not hold %v",
			v.id, LogTarget, v.full.Sequence, proven[0].Number, proven[k-1].Number, len(all), len(through), allMax,
			len(missing), head(missing), len(extra), head(extra))
	}

	// STOPAT names the source's wall clock: T is drawn when the full and
	// every proven log were taken on one UTC offset, after the full's end
	// (STOPAT before it is 4335) and before the last proven log's start.
	h := v.mf.M.Header
	for _, l := range proven {
		if h.UTCOffsetMinutes == nil || l.UTCOffsetMinutes == nil || *l.UTCOffsetMinutes != *h.UTCOffsetMinutes {
			return skip("STOPAT: the source's time zone changed since the full")
		}
	}
	lo, hi := wall(proven[0].BackupStart), wall(proven[k-1].BackupStart)
	if f := wall(h.BackupFinish).Add(time.Millisecond); f.After(lo) {
		lo = f
	}
	if !hi.After(lo) {
		return skip("STOPAT: an empty window")
	}
	r := rand.New(rand.NewPCG(c.logs.pitDraw, uint64(v.id)))
	at := lo.Add(time.Duration(r.Int64N(int64(hi.Sub(lo))))).Truncate(time.Millisecond)
	logs := logsToStopAt(proven, at)
	got, err := c.restoreTo(ctx, v, logs, at)
	if err != nil {
		return "", fmt.Errorf("STOPAT %s: %w", at.Format("2006-01-02T15:04:05.000"), err)
	}
	want, why := stopAtRows(src, fullMax, allMax, at)
	if why != "" {
		return skip(why)
	}
	missing, extra := diffRows(want, got)
	if len(missing)+len(extra) > 0 {
		add(11, fmt.Sprintf("%d|%s", v.id, at.Format(time.RFC3339Nano)),
			"chain %d of %s restored from full %d and logs %d..%d to STOPAT %s holds %d rows, the source %d committed at or before it: %d missing %v, %d not committed by then %v",
			v.id, LogTarget, v.full.Sequence, logs[0].Number, logs[len(logs)-1].Number, at.Format("2006-01-02T15:04:05.000"),
			len(got), len(want), len(missing), head(missing), len(extra), head(extra))
	}
	return fmt.Sprintf("I11: chain %d restored from full %d and logs %d..%d as the source, and to STOPAT %s with logs ..%d: %d rows", v.id,
		v.full.Sequence, proven[0].Number, proven[k-1].Number, at.Format("15:04:05.000"), logs[len(logs)-1].Number, len(got)), nil
}

// stopAtRows are the source's rows a restore of the full (rows up to id
// fullMax) and the logs (up to allMax) to the wall clock at holds: those of
// the full and those committed at or before at; why says why no such
// restore is compared ("" when it is). Redo stops at the first commit after
// at, in log order ("The recovery point is the latest transaction commit
// that occurred at or before the datetime value", "Restore a SQL Server
// Database to a Point in Time (Full Recovery Model)"): when the source's
// wall clock ran back among the logs' commits (it went to a zone ahead and
// came back between the full and the first log, both taken on one
// offset), a commit at or before at may follow one after it, and at names
// no single point.
func stopAtRows(src []commitRow, fullMax, allMax int64, at time.Time) (map[string]bool, string) {
	want := map[string]bool{}
	var prev *commitRow
	for i, row := range src {
		if row.id <= fullMax || row.id <= allMax && !row.at.After(at) {
			want[row.key()] = true
		}
		if row.id <= fullMax || row.id > allMax {
			continue
		}
		if prev != nil && row.at.Before(prev.at) {
			return nil, "STOPAT: the source's wall clock ran back among the logs' commits"
		}
		prev = &src[i]
	}
	return want, ""
}

// wall is t's wall clock (its date and time of day, labelled UTC), as a
// datetime of the source holds it.
func wall(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}

// logsToStopAt are the logs a DBA restores to the wall clock at: up to
// and including the log backup that contains it ("Restore a SQL Server
// Database to a Point in Time (Full Recovery Model)"), the first that
// started at or after at, since a log backup holds the log written
// before it started, and commits while it runs may be in the next one;
// a log backup that was running at at does not hold it all.
func logsToStopAt(logs []catalog.LogBackup, at time.Time) []catalog.LogBackup {
	var out []catalog.LogBackup
	for _, l := range logs {
		out = append(out, l)
		if !wall(l.BackupStart).Before(at) {
			break
		}
	}
	return out
}

// replayPITProofs (I11) restores, on the checker's instance, what the
// newest point-in-time proof the product recorded as ok restored (its
// full, its logs, its STOPAT) and compares the rows with the source's: the
// rows of the full and those of the logs committed at or before the
// STOPAT. Each proof is replayed once; one over a change of the source's
// time zone is left (STOPAT names a wall clock).
func (c *Checker) replayPITProofs(ctx context.Context, v *chainView, files []manifestFile, add addFunc) Notes {
	var rec *catalog.LogProofRecord
	for _, srv := range Servers {
		st, err := openShare(ctx, c.f.ShareDir(srv))
		if err != nil {
			continue
		}
		r, err := catalog.LoadLogProof(ctx, catalog.StorageFS{Storage: st}, c.f.keys, LogTarget.Instance, LogTarget.Database)
		if err == nil && r != nil && r.Trusted() && (rec == nil || r.UpdatedAt.After(rec.UpdatedAt)) {
			rec = r
		}
	}
	if rec == nil {
		return nil
	}
	if c.logs.replayed == nil {
		c.logs.replayed = map[string]bool{}
	}
	for i := len(rec.PIT) - 1; i >= 0; i-- {
		p := rec.PIT[i]
		key := fmt.Sprintf("%d|%d|%s", p.Chain, p.Sequence, p.Target.Format(time.RFC3339Nano))
		if !p.OK || p.Chain != v.id || c.logs.replayed[key] {
			continue
		}
		c.logs.replayed[key] = true
		vv := *v
		vv.full, vv.mf = nil, nil
		for _, part := range v.parts {
			for j := range part.Fulls {
				if part.Fulls[j].Sequence == p.Sequence {
					vv.full = &part.Fulls[j]
				}
			}
		}
		for j, mf := range files {
			if mf.ID.Instance == LogTarget.Instance && mf.ID.Database == LogTarget.Database && mf.ID.Sequence == p.Sequence && mf.M.Header != nil {
				if ok, _ := c.intactOn(files, mf.Server, mf); ok {
					vv.mf = &files[j]
				}
			}
		}
		var logs []catalog.LogBackup
		same := vv.mf != nil && vv.mf.M.Header.UTCOffsetMinutes != nil
		for _, l := range v.logs {
			if l.Number >= p.FirstLog && l.Number <= p.LastLog {
				logs = append(logs, l)
				same = same && l.UTCOffsetMinutes != nil && *l.UTCOffsetMinutes == *vv.mf.M.Header.UTCOffsetMinutes
			}
		}
		if vv.full == nil || vv.mf == nil || int64(len(logs)) != p.LastLog-p.FirstLog+1 {
			return Notes{fmt.Sprintf("I11: the product's point-in-time proof to %s (set %d, logs %d..%d) is no longer on the servers to replay",
				p.StopAt.Format("15:04:05.000"), p.Sequence, p.FirstLog, p.LastLog)}
		}
		if !same {
			return Notes{fmt.Sprintf("I11: the product's point-in-time proof to %s spans a change of the source's time zone: not replayed", p.StopAt.Format("15:04:05.000"))}
		}
		inFull, err := c.restoreTo(ctx, &vv, nil, time.Time{})
		if err != nil {
			return Notes{fmt.Sprintf("I11 replay: %v", err)}
		}
		all, err := c.restoreTo(ctx, &vv, logs, time.Time{})
		if err != nil {
			return Notes{fmt.Sprintf("I11 replay: %v", err)}
		}
		at := time.Date(p.StopAt.Year(), p.StopAt.Month(), p.StopAt.Day(), p.StopAt.Hour(), p.StopAt.Minute(), p.StopAt.Second(), p.StopAt.Nanosecond(), time.UTC)
		got, err := c.restoreTo(ctx, &vv, logs, at)
		if err != nil {
			add(11, "proof|"+key, "the product's point-in-time proof of chain %d to %s (set %d, logs %d..%d) says ok, but the same restore fails: %v",
				p.Chain, at.Format("2006-01-02T15:04:05.000"), p.Sequence, p.FirstLog, p.LastLog, err)
			return nil
		}
		src, err := commitRows(ctx, c.f, LogTarget.Instance, LogTarget.Database)
		if err != nil {
			return Notes{fmt.Sprintf("I11 replay: %v", err)}
		}
		fullMax, allMax := maxID(inFull), maxID(all)
		want := map[string]bool{}
		for _, row := range src {
			if row.id <= fullMax || row.id <= allMax && !row.at.After(at) {
				want[row.key()] = true
			}
		}
		c.logs.replays++
		if missing, extra := diffRows(want, got); len(missing)+len(extra) > 0 {
			add(11, "proof|"+key, "the product's point-in-time proof of chain %d to %s (set %d, logs %d..%d) says ok; restored so here it holds %d rows, the source %d: %d missing %v, %d not committed by then %v",
				p.Chain, at.Format("2006-01-02T15:04:05.000"), p.Sequence, p.FirstLog, p.LastLog, len(got), len(want), len(missing), head(missing), len(extra), head(extra))
		}
		return Notes{fmt.Sprintf("I11: the product's point-in-time proof to %s (set %d, logs %d..%d) replayed: %d rows as the source", at.Format("15:04:05.000"),
			p.Sequence, p.FirstLog, p.LastLog, len(got))}
	}
	return nil
}

// diffRows says which rows of want got lacks and which it has beyond.
func diffRows(want map[string]bool, got []commitRow) (missing, extra []string) {
	have := map[string]bool{}
	for _, row := range got {
		have[row.key()] = true
		if !want[row.key()] {
			extra = append(extra, row.key())
		}
	}
	for k := range want {
		if !have[k] {
			missing = append(missing, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	return missing, extra
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

func head(s []string) []string {
	if len(s) > 3 {
		return s[:3]
	}
	return s
}

type commitRow struct {
	id int64
	at time.Time
}

// maxID is the highest id among rows (0 for none).
func maxID(rows []commitRow) int64 {
	var n int64
	for _, row := range rows {
		n = max(n, row.id)
	}
	return n
}

func (r commitRow) key() string { return fmt.Sprintf("%d@%s", r.id, r.at.Format("15:04:05.0000000")) }

// commitRows reads db's dbo.CommitLog on instance (the harness's own
// connection).
func commitRows(ctx context.Context, f *Fleet, instance, db string) ([]commitRow, error) {
	conn, err := f.DB(instance)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return queryCommitRows(ctx, conn, db)
}

func queryCommitRows(ctx context.Context, conn *sql.DB, db string) ([]commitRow, error) {
	q, err := tsql.QuoteIdent(db)
	if err != nil {
		return nil, err
	}
	qctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	rows, err := conn.QueryContext(qctx, "SELECT id, committed_at FROM "+q+".dbo.CommitLog ORDER BY id")
	if err != nil {
		return nil, fmt.Errorf("read %s.dbo.CommitLog: %w", db, err)
	}
	defer rows.Close()
	var out []commitRow
	for rows.Next() {
		var r commitRow
		if err := rows.Scan(&r.id, &r.at); err != nil {
			return nil, err
		}
		r.at = time.Date(r.at.Year(), r.at.Month(), r.at.Day(), r.at.Hour(), r.at.Minute(), r.at.Second(), r.at.Nanosecond(), time.UTC)
		out = append(out, r)
	}
	return out, rows.Err()
}

// restoreTo restores the chain's full and logs to at on the checker's
// instance under pitName and returns its rows (the copy is dropped); no
// logs restores the full alone. With at, every log WITH STOPAT = at,
// NORECOVERY up to the one in which at was reached, then RECOVERY.
func (c *Checker) restoreTo(ctx context.Context, v *chainView, logs []catalog.LogBackup, at time.Time) ([]commitRow, error) {
	conn, err := c.f.PitDB()
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	exec := func(stmt string) error {
		ectx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		_, err := conn.ExecContext(ectx, stmt)
		return err
	}
	q, _ := tsql.QuoteIdent(pitName)
	_ = exec("IF DB_ID(N'" + pitName + "') IS NOT NULL DROP DATABASE " + q)
	disks := make([]string, len(v.mf.M.Stripes))
	for i, st := range v.mf.M.Stripes {
		disks[i] = UNC(v.mf.Server) + `\` + st.Name
	}
	fq, err := tsql.RestoreFileListOnly(disks)
	if err != nil {
		return nil, err
	}
	rows, err := c.fileList(ctx, fq)
	if err != nil {
		return nil, fmt.Errorf("FILELISTONLY of set %d: %w", v.full.Sequence, err)
	}
	moves, err := tsql.Moves(pitName, rows, pitDisk+`\data`, pitDisk+`\log`)
	if err != nil {
		return nil, err
	}
	stmt, err := tsql.RestoreDatabase(tsql.RestoreOptions{Database: pitName, Disks: disks, Moves: moves, Replace: true, NoRecovery: len(logs) > 0})
	if err != nil {
		return nil, err
	}
	if err := exec(stmt); err != nil {
		return nil, fmt.Errorf("restore set %d from %s: %w", v.full.Sequence, v.mf.Server, err)
	}
	for i, l := range logs {
		srv := c.logServer(l, v.mf.Server)
		var ld []string
		for _, f := range l.Files {
			ld = append(ld, UNC(srv)+`\`+f.Name)
		}
		rec := tsql.LogNoRecovery
		if i == len(logs)-1 && at.IsZero() {
			rec = tsql.LogRecover
		}
		stmt, err := tsql.RestoreLog(tsql.RestoreLogOptions{Database: pitName, Disks: ld, Recovery: rec, StopAt: at})
		if err != nil {
			return nil, err
		}
		if err := exec(stmt); err != nil {
			return nil, fmt.Errorf("RESTORE LOG %d from %s STOPAT %s: %w", l.Number, srv, at.Format("15:04:05.000"), err)
		}
		if at.IsZero() {
			continue
		}
		// Roll forward stopped at T inside this log (its redo point short
		// of its end): a later log no longer applies (4305), and RECOVERY
		// ends the sequence, as a DBA ends it.
		redo, err := redoPoint(ctx, conn)
		if err != nil {
			return nil, fmt.Errorf("after RESTORE LOG %d STOPAT %s: %w", l.Number, at.Format("15:04:05.000"), err)
		}
		if redo != "" && lsnCmp(redo, l.LastLSN) < 0 {
			break
		}
	}
	var state string
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = conn.QueryRowContext(sctx, "SELECT state_desc FROM sys.databases WHERE name = @p1", pitName).Scan(&state)
	cancel()
	if err != nil {
		return nil, err
	}
	if state == "RESTORING" {
		stmt, err := tsql.RecoverDatabase(pitName)
		if err != nil {
			return nil, err
		}
		if err := exec(stmt); err != nil {
			return nil, fmt.Errorf("recover %s: %w", pitName, err)
		}
	}
	out, err := queryCommitRows(ctx, conn, pitName)
	_ = exec("DROP DATABASE " + q)
	return out, err
}

// logServer is the server to restore log l from, as a DBA picks it: one
// of those its record names where its files are intact, the full's
// server first (a copy the harness deleted or damaged on one server is
// read from the other); the full's, or the first named, when none is.
func (c *Checker) logServer(l catalog.LogBackup, full string) string {
	servers := slices.Clone(l.Servers)
	sort.SliceStable(servers, func(i, j int) bool { return servers[i] == full && servers[j] != full })
	for _, srv := range servers {
		intact := true
		for _, f := range l.Files {
			intact = intact && c.logFileIntact(srv, f) == ""
		}
		if intact {
			return srv
		}
	}
	if slices.Contains(servers, full) || len(servers) == 0 {
		return full
	}
	return servers[0]
}

// redoPoint is where roll forward of pitName continues
// (sys.master_files.redo_start_lsn of its primary file; "" when NULL).
func redoPoint(ctx context.Context, conn *sql.DB) (string, error) {
	q, args, err := tsql.RestoringState(pitName)
	if err != nil {
		return "", err
	}
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var state, standby, fork any
	var redo sql.NullString
	if err := conn.QueryRowContext(qctx, q, args...).Scan(&state, &standby, &redo, &fork); err != nil {
		return "", fmt.Errorf("redo_start_lsn of %s: %w", pitName, err)
	}
	return redo.String, nil
}

// fileList runs RESTORE FILELISTONLY on the checker's instance through
// the product's client.
func (c *Checker) fileList(ctx context.Context, q string) ([]tsql.FileListRow, error) {
	db, err := mssql.Open(ctx, mssql.Target{Instance: pitInstance, Address: c.f.pit.Addr(), User: "sa",
		Password: c.f.passwords[passwordEnv(pitInstance)], Database: "master", Encrypt: "disable", ConnectTimeout: 10 * time.Second})
	if err != nil {
		return nil, err
	}
	defer db.Close()
	files, err := db.FileListOnly(ctx, q)
	if err != nil {
		return nil, err
	}
	out := make([]tsql.FileListRow, len(files))
	for i, f := range files {
		out[i] = tsql.FileListRow{LogicalName: f.LogicalName, PhysicalName: f.PhysicalName, Type: f.Type, FileID: f.FileID}
	}
	return out, nil
}

// pitDisk is the checker instance's disk for restored files.
const pitDisk = `D:\pit`
