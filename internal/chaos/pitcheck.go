package chaos

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// I11: the checker's own point-in-time restores of the chain on pit01, the
// product's point-in-time proofs replayed, and the source's rows they are
// compared with.

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
		// The source's rows are compared: a RESTORE over the source since
		// the full replaced the rows committed after its point with others
		// of the same ids (the rule checkPIT and I12 follow).
		for _, r := range c.logs.rollbacks {
			if r.ended.After(vv.mf.M.Header.BackupStartUTC) {
				return Notes{fmt.Sprintf("I11: the product's point-in-time proof to %s (set %d): the source was restored over since the full, not replayed",
					p.StopAt.Format("15:04:05.000"), p.Sequence)}
			}
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
		// The same rule as checkPIT's: where the source's wall clock ran
		// back among the logs' commits, STOPAT names no single point and
		// the rows are not compared.
		want, why := stopAtRows(src, maxID(inFull), maxID(all), at)
		if why != "" {
			return Notes{fmt.Sprintf("I11: the product's point-in-time proof to %s (set %d, logs %d..%d) not compared: %s", at.Format("15:04:05.000"),
				p.Sequence, p.FirstLog, p.LastLog, why)}
		}
		c.logs.replays++
		if missing, extra := diffRows(want, got); len(missing)+len(extra) > 0 {
			add(11, "proof|"+key, "the product's point-in-time proof of chain %d to %s (set %d, logs %d..%d) says ok; restored so here it holds %d rows, the source %d: %d missing %v, %d not committed by then %v",
				p.Chain, at.Format("2006-01-02T15:04:05.000"), p.Sequence, p.FirstLog, p.LastLog, len(got), len(want), len(missing), head(missing), len(extra), head(extra))
			return nil
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
