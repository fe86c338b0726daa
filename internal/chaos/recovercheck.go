package chaos

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/recovery"
	"github.com/backupcycle/backupcycle/internal/tsql"
	"github.com/backupcycle/backupcycle/workflows"
)

// I12, judged by the harness's own reading of the chain records, the
// backup files (restored again on the checker's instance) and the rows of
// the source and of the restored copy, never by the product's verdict: a
// Recover that completed holds exactly the source's rows committed at or
// before the point it reports, and that point is the one asked (for the
// latest, no earlier than the newest proven log held before it started);
// one that failed names why with a stable error type of package
// activities. A drill's record says the same of its copy, the copy is
// dropped after, and no recovery entry touches the source database.

// pointPrecision is how far a reported instant may lie from the rows it
// stands for: datetime, which backupset dates and STOPAT are, is precise to
// 3.33 ms ("datetime (Transact-SQL)",
// https://learn.microsoft.com/en-us/sql/t-sql/data-types/datetime-transact-sql).
const pointPrecision = 4 * time.Millisecond

// recoverChecks counts what I12 judged.
type recoverChecks struct {
	rows   int            // completed recovers whose rows were compared
	failed int            // failed recovers judged by their error type
	skip   map[string]int // not judged, by why
}

func (l *recoverChecks) stats() string {
	return fmt.Sprintf("I12: %d completed recovers compared row by row, %d failures judged by their error type, skipped: %s", l.rows, l.failed, counts(l.skip))
}

func (l *recoverChecks) skipped(why string) Notes {
	if l.skip == nil {
		l.skip = map[string]int{}
	}
	l.skip[why]++
	return Notes{"I12 skipped: " + why}
}

// finding is an I12 violation, reported by the next Check.
type finding struct{ key, detail string }

// recoverClaim is what a completed recover reports (a drill's record
// says the same): the point asked and reached, the full and logs it
// restored, and the copy's rows as the harness read them.
type recoverClaim struct {
	what   string
	latest bool
	asked  time.Time // UTC; zero for the latest
	point  time.Time // the recovery point reported (UTC)
	// bound is the instant it reports no commit after which is in the
	// copy; zero: the point (a report from before bounds were given).
	bound   time.Time
	from    string
	seq     int64
	guid    string // "" when only the number is known
	chain   int64
	first   int64
	last    int64
	rows    []commitRow // nil: not read; the restore is replayed on the checker's instance
	started time.Time
}

// checkClaim judges a completed recover's claim.
func (c *Checker) checkClaim(ctx context.Context, cl recoverClaim, snap recoverSnap) ([]finding, Notes) {
	var out []finding
	add := func(key, format string, args ...any) {
		out = append(out, finding{key: cl.what + "|" + key, detail: cl.what + ": " + fmt.Sprintf(format, args...)})
	}
	if !cl.latest && (cl.point.Sub(cl.asked) > time.Millisecond || cl.asked.Sub(cl.point) > time.Millisecond) {
		add("point", "reports recovery point %s (%s), asked %s", stamp(cl.point), cl.from, stamp(cl.asked))
	}
	files, _ := c.scan()
	mf := c.fullOf(files, cl.seq, cl.guid)
	if mf == nil {
		return out, c.recs.skipped("the full it restored is no longer intact on a backup server")
	}
	h := mf.M.Header
	for _, r := range c.logs.rollbacks {
		if r.ended.After(h.BackupStartUTC) {
			return out, c.recs.skipped("the source was restored over since the full")
		}
	}
	var logs []catalog.LogBackup
	if cl.last > 0 {
		byNum, err := c.chainLogs(ctx, cl.chain)
		if err != nil {
			return out, Notes{fmt.Sprintf("I12: %v", err)}
		}
		for n := cl.first; n <= cl.last; n++ {
			l, ok := byNum[n]
			if !ok {
				return out, c.recs.skipped("a log it restored is no longer in the chain records")
			}
			logs = append(logs, l)
		}
	}
	// The rows of the logs that started before the point were all
	// committed before it (each log holds what was committed before it
	// started; the last is the first that started at or after the point);
	// those of the last log are read on its clock, the source's offset from
	// UTC then, which is theirs when the source ran on that one clock from
	// the start of the step before it (the log before, or the full) to its
	// end. Equal offsets of the two steps do not say so: the source may
	// have restarted in another zone and back between them, and an offset
	// the product recorded may be wrong; the harness's own record of the
	// source's zones does (sourceClock).
	offs := []*int{h.UTCOffsetMinutes}
	for _, l := range logs {
		offs = append(offs, l.UTCOffsetMinutes)
	}
	if slices.Contains(offs, nil) {
		return out, c.recs.skipped("a backup records no UTC offset")
	}
	off, prev := *offs[len(offs)-1], *offs[max(len(offs)-2, 0)]
	prevWall, lastWall := h.BackupStart, h.BackupFinish
	if n := len(logs); n > 0 {
		lastWall = logs[n-1].BackupFinish
		if n > 1 {
			prevWall = logs[n-2].BackupStart
		}
	}
	clock, ok := c.sourceClock(prevWall, lastWall)
	oneClock := ok && off == prev && clock == off
	if ok && clock != off {
		add("offset", "its last step (log %d, or the full) records the source's clock as UTC%+d min, but the source ran on UTC%+d min from %s to %s (its clock): "+
			"its instants, and a STOPAT written from them, are off by the difference", cl.last, off, clock,
			prevWall.Format("15:04:05"), lastWall.Format("15:04:05"))
	}
	if !cl.latest && !oneClock {
		return out, c.recs.skipped("the source's time zone changed just before the log that reaches the point")
	}
	v := &chainView{full: &catalog.ChainFull{Sequence: mf.ID.Sequence}, mf: mf}
	k := 0
	for k < len(logs)-1 && (cl.latest || logs[k].BackupStartUTC.Before(cl.point)) {
		k++
	}
	before, err := c.restoreTo(ctx, v, logs[:k], time.Time{})
	if err != nil {
		return out, Notes{fmt.Sprintf("I12: restore set %d and the logs before %d on %s: %v", mf.ID.Sequence, cl.last, pitInstance, err)}
	}
	all := before
	if len(logs) > 0 {
		if all, err = c.restoreTo(ctx, v, logs, time.Time{}); err != nil {
			return out, Notes{fmt.Sprintf("I12: restore set %d and logs %d..%d on %s: %v", mf.ID.Sequence, cl.first, cl.last, pitInstance, err)}
		}
	}
	// The point on the source's clock (what commit times and STOPAT read).
	pw := wallAt(cl.point, off)
	got := cl.rows
	if got == nil {
		stop := time.Time{}
		if !cl.latest {
			stop = pw
		}
		if got, err = c.restoreTo(ctx, v, logs, stop); err != nil {
			add("replay", "its restore (set %d, logs %d..%d, point %s) fails when the harness replays it: %v", mf.ID.Sequence, cl.first, cl.last,
				stamp(cl.point), err)
			return out, nil
		}
	}
	src, err := commitRows(ctx, c.f, LogTarget.Instance, LogTarget.Database)
	if err != nil {
		return out, Notes{fmt.Sprintf("I12: %v", err)}
	}
	beforeMax, allMax := maxID(before), maxID(all)
	want := map[string]bool{}
	for _, row := range src {
		if row.id <= beforeMax || row.id <= allMax && (cl.latest || !row.at.After(pw)) {
			want[row.key()] = true
		}
	}
	c.recs.rows++
	how := "read on " + Verify01
	if cl.rows == nil {
		how = "its restore replayed on " + pitInstance
	}
	if missing, extra := diffRows(want, got); len(missing)+len(extra) > 0 {
		add("rows", "restored set %d and logs %d..%d to %s and reports recovery point %s (%s); the copy (%s) holds %d rows, the source %d by then: %d missing %v, %d not committed by then %v",
			mf.ID.Sequence, cl.first, cl.last, pointText(cl), stamp(cl.point), cl.from, how, len(got), len(want), len(missing), head(missing), len(extra), head(extra))
	}
	note := Notes{fmt.Sprintf("I12: %s: set %d and logs %d..%d to %s (reported %s, %s): %d rows as the source's (%s)", cl.what, mf.ID.Sequence,
		cl.first, cl.last, pointText(cl), stamp(cl.point), cl.from, len(got), how)}
	if !cl.latest {
		return out, note
	}
	// The latest: the point it reports is reached, neither before nor
	// after the rows the copy holds (on one UTC offset of the source).
	if now, ok := c.sourceOffset(time.Now()); !ok || now != off {
		return out, append(note, "I12: the source's UTC offset moved since its last log: the reported latest point is not compared with its rows")
	}
	// Rows commit in id order: the point is reached when the first row the
	// copy lacks committed after it. Only that row is compared; later ones
	// may carry a wall clock that ran back since (the source went to a zone
	// behind and returned before this check), which names no instant.
	for _, row := range src {
		if row.id <= allMax {
			continue
		}
		if !row.at.After(pw.Add(-pointPrecision)) {
			add("reached", "reports the latest point as %s (%s), but the copy lacks row %d committed at %s on the source's clock (%s): the last row it holds is %d; it reports a point it did not reach",
				stamp(cl.point), cl.from, row.id, row.at.Format("15:04:05.0000000"), wallText(pw), allMax)
		}
		break
	}
	// Rows committed after the point and up to the bound may be in the
	// copy (the last backup ran then); none committed after the bound.
	bound := cl.point
	if cl.bound.After(bound) {
		bound = cl.bound
	}
	bw := wallAt(bound, off)
	for _, row := range got {
		if oneClock && row.id > beforeMax && row.at.After(bw.Add(pointPrecision)) {
			add("beyond", "reports the latest point as %s (%s), bounded by %s, but the copy holds row %d committed at %s on the source's clock, after it",
				stamp(cl.point), cl.from, stamp(bound), row.id, row.at.Format("15:04:05.0000000"))
			break
		}
	}
	if snap.chain != 0 && snap.chain == cl.chain && cl.last < snap.newest {
		add("short", "restored to the latest point up to log %d of chain %d, but %s was held before it started", cl.last, cl.chain, snap.newestText)
	}
	return out, note
}

func pointText(cl recoverClaim) string {
	if cl.latest {
		return "the latest point"
	}
	return stamp(cl.asked)
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

func wallText(t time.Time) string { return t.Format("15:04:05.000") }

// wallAt is instant t on a clock offset minutes from UTC, as a zone-less
// value (the form commit times are read in).
func wallAt(t time.Time, offset int) time.Time {
	w := t.UTC().Add(time.Duration(offset) * time.Minute)
	return time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), w.Nanosecond(), time.UTC)
}

// sourceOffset is LogTarget's instance's offset from UTC at t, in minutes,
// in the estate of t.
func (c *Checker) sourceOffset(t time.Time) (int, bool) {
	e, ok := c.estateAt(t)
	if !ok {
		e = baseEstate
	}
	loc, err := time.LoadLocation(e.Zone[estateIndex(LogTarget.Instance)])
	if err != nil {
		return 0, false
	}
	_, secs := t.In(loc).Zone()
	return secs / 60, true
}

// fullOf is the trusted manifest of LogTarget's set seq (of backup set
// guid when given) intact on its server.
func (c *Checker) fullOf(files []manifestFile, seq int64, guid string) *manifestFile {
	for i, mf := range files {
		if mf.ID.Instance != LogTarget.Instance || mf.ID.Database != LogTarget.Database || mf.M.Header == nil || mf.M.Differential != nil {
			continue
		}
		if guid != "" && mf.ID.GUID != normGUID(guid) || guid == "" && mf.ID.Sequence != seq {
			continue
		}
		if ok, _ := c.intactOn(files, mf.Server, mf); ok {
			return &files[i]
		}
	}
	return nil
}

// chainLogs are the written or copied log backups of LogTarget's chain id,
// by number, as the records on both servers hold them together.
func (c *Checker) chainLogs(ctx context.Context, id int64) (map[int64]catalog.LogBackup, error) {
	copies := map[int][]*catalog.ChainRecord{}
	for _, srv := range Servers {
		parts, _, err := c.chainParts(ctx, srv)
		if err != nil {
			return nil, err
		}
		for _, p := range parts {
			if p.Chain == id {
				copies[p.Part] = append(copies[p.Part], p)
			}
		}
	}
	out := map[int64]catalog.LogBackup{}
	for _, rs := range copies {
		for _, l := range catalog.MergeChainPart(rs).Logs {
			if l.State == catalog.LogWritten || l.State == catalog.LogCopied {
				out[l.Number] = l
			}
		}
	}
	return out, nil
}

// snapRecover reads LogTarget's chain before a recovery entry: the proven
// window from its newest verified full, and the newest proven log held
// intact on a server other than gone.
func (c *Checker) snapRecover(ctx context.Context, gone string) recoverSnap {
	var out recoverSnap
	files, _ := c.scan()
	v, err := c.currentChain(ctx, files)
	if err != nil || v == nil || v.full == nil {
		return out
	}
	seq, _, _ := v.walk()
	out.chain, out.logs = v.id, seq
	k := 0
	for k < len(seq) && seq[k].Proven != nil {
		k++
	}
	if k > 0 {
		out.lo, out.hi = v.full.FinishUTC.Add(time.Millisecond), seq[k-1].BackupStartUTC
	}
	for _, l := range seq {
		if l.Proven == nil {
			continue
		}
		held := slices.ContainsFunc(l.Servers, func(srv string) bool {
			if srv == gone {
				return false
			}
			for _, f := range l.Files {
				if c.logFileIntact(srv, f) != "" {
					return false
				}
			}
			return true
		})
		if held {
			out.newest = l.Number
			out.newestText = fmt.Sprintf("log %d (proven, finished %s)", l.Number, stamp(l.BackupFinishUTC))
		}
	}
	return out
}

// judgeFailure (I12) judges a recovery entry that ended failed: it names
// why with a stable error type of package activities. One the harness
// terminated or cancelled is not judged.
func (c *Checker) judgeFailure(what string, err error) ([]finding, Notes) {
	var term *temporal.TerminatedError
	var canc *temporal.CanceledError
	switch {
	case errors.As(err, &term):
		return nil, c.recs.skipped("terminated by the harness")
	case errors.As(err, &canc):
		return nil, c.recs.skipped("cancelled")
	}
	c.recs.failed++
	var app *temporal.ApplicationError
	if errors.As(err, &app) && slices.Contains(errorTypes(), app.Type()) {
		return nil, Notes{fmt.Sprintf("I12: %s failed %s: %s", what, app.Type(), short(firstLine(app.Message())))}
	}
	typ := ""
	if app != nil {
		typ = app.Type()
	}
	return []finding{{key: what + "|failed", detail: fmt.Sprintf("%s ended failed without naming why (error type %q, none of package activities'): %s",
		what, typ, firstLine(err.Error()))}}, nil
}

// errorTypes are the stable error types of package activities: the
// string constants named Err... of its source (errors.go and beside).
var errorTypes = sync.OnceValue(func() []string {
	_, self, _, _ := runtime.Caller(0)
	names, _ := filepath.Glob(filepath.Join(filepath.Dir(self), "..", "..", "activities", "*.go"))
	var out []string
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			continue
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, sp := range g.Specs {
				vs := sp.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if !strings.HasPrefix(n.Name, "Err") || i >= len(vs.Values) {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						if s, err := strconv.Unquote(lit.Value); err == nil {
							out = append(out, s)
						}
					}
				}
			}
		}
	}
	sort.Strings(out)
	return out
})

// drillResult is the drill run's result in LogTarget's drill record (the
// newest trusted record holding it), nil when none does.
func (c *Checker) drillResult(ctx context.Context, ref wfRef) *catalog.DrillResult {
	var best *catalog.DrillRecord
	var res *catalog.DrillResult
	for _, srv := range Servers {
		st, err := openShare(ctx, c.f.ShareDir(srv))
		if err != nil {
			continue
		}
		r, err := catalog.LoadDrill(ctx, catalog.StorageFS{Storage: st}, c.f.keys, LogTarget.Instance, LogTarget.Database)
		if err != nil || r == nil || !r.Trusted() || best != nil && !r.UpdatedAt.After(best.UpdatedAt) {
			continue
		}
		for i := range r.Drills {
			if d := &r.Drills[i]; d.WorkflowID == ref.ID && d.RunID == ref.RunID {
				best, res = r, d
			}
		}
	}
	return res
}

// drillClaim is what a drill's record says it restored.
func drillClaim(what string, d *catalog.DrillResult) (recoverClaim, error) {
	cl := recoverClaim{what: what, point: d.RecoveryPoint.UTC(), bound: d.RecoveryPointBound.UTC(), from: d.RecoveryPointFrom, seq: d.Sequence,
		chain: d.Chain, first: d.FirstLog, last: d.LastLog, started: d.StartedAt}
	if d.Point == (recovery.Point{Latest: true}).String() {
		cl.latest = true
		return cl, nil
	}
	at, err := time.Parse(time.RFC3339Nano, d.Point)
	if err != nil {
		return cl, fmt.Errorf("its record's point %q is neither the latest nor an instant", d.Point)
	}
	cl.asked = at.UTC()
	return cl, nil
}

// recoverClaimOf is what a completed Recover reports.
func recoverClaimOf(what string, st workflows.RecoverStatus, started time.Time) recoverClaim {
	cl := recoverClaim{what: what, latest: st.Point == "latest", point: st.RecoveryPoint.UTC(), bound: st.RecoveryPointBound.UTC(),
		from: st.RecoveryPointFrom, seq: st.Sequence, guid: st.FullGUID, started: started}
	if !cl.latest {
		cl.asked = st.StopAt.UTC()
		if at, err := time.Parse(time.RFC3339Nano, st.Point); err == nil {
			cl.asked = at.UTC()
		}
	}
	if st.LogsDone > 0 {
		cl.chain, cl.first, cl.last = st.Chain, st.FirstLog, st.FirstLog+int64(st.LogsDone)-1
	}
	return cl
}

// touchedSource (I12) lists what the recovery entry sent to the source
// database between began and ended: a restore, a drop, a change, a write,
// CHECKDB or a tail-log backup; the log chain's own log backups are not.
// cycleSequence reports whether sql is a backup cycle's work on its
// sequence table (tsql.SequenceSetup, tsql.SequenceNext): the table
// [db].[DBBackup].[Sequence] named in it.
func cycleSequence(sql string) bool {
	return strings.Contains(strings.ToUpper(sql), strings.ToUpper("].["+tsql.SequenceSchema+"].["+tsql.SequenceTable+"]"))
}

func (c *Checker) touchedSource(began, ended time.Time) []string {
	var out []string
	for _, st := range c.f.Instances[LogTarget.Instance].Statements() {
		if st.Start.Before(began) || st.Start.After(ended) || !strings.EqualFold(st.Database, LogTarget.Database) {
			continue
		}
		sql := strings.ToUpper(st.SQL)
		switch {
		case cycleSequence(st.SQL):
			// A backup cycle of the database running meanwhile (one the log
			// chain starts after a break) allocates its sequence number
			// there; no recovery entry builds that statement.
		case st.Kind == "BACKUP LOG" && (strings.Contains(sql, "NORECOVERY") || strings.Contains(sql, "NO_TRUNCATE")),
			slices.ContainsFunc([]string{"RESTORE", "DROP", "ALTER", "CREATE", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "DBCC"},
				func(p string) bool { return strings.HasPrefix(st.Kind, p) }):
			out = append(out, fmt.Sprintf("%s at %s (%s)", st.Kind, st.Start.UTC().Format("15:04:05.000"), st.Outcome))
		}
	}
	return out
}

// sourceClock is the one offset from UTC LogTarget's instance ran on from
// the moment its clock read from to the one it read to (wall clocks,
// zone-less, as SQL Server dates are), as the harness set its zones (the
// estates; while an estate was being applied, either one); false when
// it ran on more than one then, or a wall clock names no instant at
// which the source ran on a zone that reads it.
func (c *Checker) sourceClock(from, to time.Time) (int, bool) {
	i := estateIndex(LogTarget.Instance)
	zones := map[string]bool{baseEstate.Zone[i]: true}
	for _, s := range c.estates {
		zones[s.e.Zone[i]] = true
	}
	// instant is the earliest (or latest) instant at which the source's
	// clock read wall.
	instant := func(wall time.Time, latest bool) (time.Time, bool) {
		var out time.Time
		for z := range zones {
			loc, err := time.LoadLocation(z)
			if err != nil {
				continue
			}
			t := time.Date(wall.Year(), wall.Month(), wall.Day(), wall.Hour(), wall.Minute(), wall.Second(), wall.Nanosecond(), loc).UTC()
			if !c.sourceZonesIn(t, t)[z] {
				continue
			}
			if out.IsZero() || latest && t.After(out) || !latest && t.Before(out) {
				out = t
			}
		}
		return out, !out.IsZero()
	}
	a, ok1 := instant(from, false)
	b, ok2 := instant(to, true)
	if !ok1 || !ok2 || b.Before(a) {
		return 0, false
	}
	offs := map[int]bool{}
	for z := range c.sourceZonesIn(a, b) {
		loc, err := time.LoadLocation(z)
		if err != nil {
			return 0, false
		}
		// A zone's offset may change inside the span too (daylight
		// saving time).
		_, sa := a.In(loc).Zone()
		_, sb := b.In(loc).Zone()
		offs[sa/60], offs[sb/60] = true, true
	}
	if len(offs) != 1 {
		return 0, false
	}
	for o := range offs {
		return o, true
	}
	return 0, false
}

// sourceZonesIn are the zones LogTarget's instance may have run on at
// some instant from a to b: an estate's from when it began to be applied
// to when the next one was.
func (c *Checker) sourceZonesIn(a, b time.Time) map[string]bool {
	i := estateIndex(LogTarget.Instance)
	out := map[string]bool{}
	prevZone, prevSince := baseEstate.Zone[i], time.Time{}
	for _, s := range c.estates {
		// The previous estate held from prevSince until s was applied.
		if (prevSince.IsZero() || !prevSince.After(b)) && s.from.After(a) {
			out[prevZone] = true
		}
		prevZone, prevSince = s.e.Zone[i], s.since
	}
	if prevSince.IsZero() || !prevSince.After(b) {
		out[prevZone] = true
	}
	return out
}
