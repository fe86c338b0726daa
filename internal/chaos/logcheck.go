package chaos

import (
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/status"
	"github.com/backupcycle/backupcycle/internal/storage/local"
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

// unprovenLogRE finds status's "log N of chain C ... is not proven" reasons.
var unprovenLogRE = regexp.MustCompile(`log (\d+) of chain (\d+) [^;]*not proven`)

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
	// now is taken before the product is asked: a log the checker finds
	// overdue was overdue when status and the queries answered (a log that
	// crossed log_proof_lag while they were read is not one they missed).
	now := time.Now().UTC()
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
			// Logs are proven in order: status naming the oldest log of
			// the chain that is not proven names every later one too.
			for _, m := range unprovenLogRE.FindAllStringSubmatch(r, -1) {
				if m[2] == strconv.FormatInt(v.id, 10) {
					if k, err := strconv.ParseInt(m[1], 10, 64); err == nil && k <= n {
						return true
					}
				}
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
