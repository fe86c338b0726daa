package conformance

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/hostcheck"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// Verdict is what a probe concluded.
type Verdict string

const (
	// Holds: the server did what the product assumes, and the probe saw it.
	Holds Verdict = "holds"
	// Fails: the server did something else; IfFails says what that means.
	Fails Verdict = "fails"
	// Inconclusive: the probe could not see it (too fast, a permission,
	// a step before it failed); Why says what would make it conclusive.
	Inconclusive Verdict = "inconclusive"
)

// Probe ids: stable, the JSON's "id".
const (
	IDLastGoodRestored = "lastgood-carried-by-restore"
	IDLastGoodCheckDB  = "lastgood-changed-by-checkdb"
	IDCheckDBPhases    = "checkdb-phases"
	IDBatchText        = "batch-text-exact"
	IDCreateDate       = "create-date-within-restore"
	IDRestoreDate      = "restore-date-is-start"
	IDVanishedBackup   = "vanished-client-backup-runs-on"
	IDVanishedRestore  = "vanished-client-restore-runs-on"
	IDDropRestoring    = "drop-restoring-copy"
	IDHeaderClock      = "headeronly-dates-local-clock"
	IDGarbageMedia     = "garbage-file-is-3241"
	IDMissingFile      = "missing-file-os-error"
	// IDLogForkAfterRestore: forkprobe.go.
	IDLogForkAfterRestore = "log-fork-after-restore"
	// IDDifferentialBase: forkprobe.go.
	IDDifferentialBase = "differential-base-is-the-full"
	// IDEncryptedBackup: encprobe.go.
	IDEncryptedBackup = "encrypted-backup-header"
)

// Probe is one assumption and what the server did.
type Probe struct {
	ID         string  `json:"id"`
	Assumption string  `json:"assumption"`
	Verdict    Verdict `json:"verdict"`
	// Observed is what the server did, in words with the numbers.
	Observed string `json:"observed"`
	// Facts are the same as values (per probe: see the judge functions).
	Facts map[string]any `json:"facts,omitempty"`
	// Why says why a probe is inconclusive, and what would make it
	// conclusive.
	Why string `json:"why,omitempty"`
	// IfFails is what a failure means for the product.
	IfFails string `json:"if_it_fails"`
}

// The assumptions, each in one line, and what a failure would mean.
var assumptions = map[string]struct{ text, ifFails string }{
	IDLastGoodRestored: {
		"a restored copy reports its source's LastGoodCheckDbTime (the source's wall clock), not the time of the restore",
		"the README's account of LastGoodCheckDbTime after a restore is wrong; the CHECKDB step does not depend on it " +
			"(it counts only a change since its own baseline: see " + IDLastGoodCheckDB + ")",
	},
	IDLastGoodCheckDB: {
		"a clean DBCC CHECKDB of the copy changes its LastGoodCheckDbTime to a time on the verification instance's clock, " +
			"at or after a GETDATE() read before it (the CHECKDB step's rule for a CHECKDB that ended unseen)",
		"a CHECKDB that ended while no worker watched is never counted as clean, and the step runs CHECKDB again " +
			"(wasted hours, never a false verdict), or, if the value moves without a CHECKDB, one could be counted that did not run",
	},
	IDCheckDBPhases: {
		"every phase of DBCC CHECKDB shows in sys.dm_exec_requests.command as LIKE 'DBCC %', and the product's query " +
			"(the configured login, the exact batch) finds it in each",
		"after a worker restart the CHECKDB step does not find its CHECKDB in that phase: it sends a second one over it, " +
			"and cancel or a failed step does not stop it",
	},
	IDBatchText: {
		"sys.dm_exec_sql_text(sql_handle) returns the batch exactly as sent, trailing comment included",
		"a retried step does not recognise its own BACKUP, RESTORE or CHECKDB (the statement marker): it runs it a second time",
	},
	IDCreateDate: {
		"sys.databases.create_date of a restored copy lies within its RESTORE (between the start and the end, on the verification " +
			"instance's clock)",
		"the restore proof and the REPLACE/DROP guard, which tell backupcycle's copy from a database created later by create_date " +
			"against msdb's restore_date, could disown the product's own copy (VerifyDatabaseInUse)",
	},
	IDRestoreDate: {
		"msdb.dbo.restorehistory.restore_date is the start of the RESTORE, not its end",
		"the slack the restore proof allows between restore_date and create_date is measured from the wrong end",
	},
	IDVanishedBackup: {
		"a BACKUP whose client vanished without an attention (its TCP connection closed, as when the worker process dies) " +
			"runs on to its end, and the product's query still finds it: SQL Server notices a vanished client only when it " +
			"next writes to it",
		"a worker restart (deploy, crash) or a dropped connection ends the running BACKUP: the retry finds nothing to " +
			"re-attach to and backs up again from the start (safe, but every deploy during a multi-hour BACKUP costs it again)",
	},
	IDVanishedRestore: {
		"a RESTORE whose client vanished without an attention runs on to its end, and the product's query still finds it",
		"a worker restart (deploy, crash) or a dropped connection ends the running RESTORE and leaves the copy RESTORING: " +
			"the retry restores again from the start (safe, but costly on a large copy)",
	},
	IDDropRestoring: {
		"the product's drop batch (ALTER DATABASE ... SET SINGLE_USER WITH ROLLBACK IMMEDIATE; DROP DATABASE) removes a copy " +
			"left RESTORING, at the latest when the drop step is retried",
		"a copy left RESTORING (a RESTORE cut short or cancelled) stays on the verification instance; the drop step fails " +
			"for good and the space stays taken until a person drops it",
	},
	IDHeaderClock: {
		"RESTORE HEADERONLY's BackupStartDate and BackupFinishDate are the source's local wall clock (GETDATE()), whose " +
			"offset from UTC is GETDATE() - GETUTCDATE()",
		"the instants the manifests record (and so ages, the newest set, retention order) are off by the server's offset from UTC",
	},
	IDGarbageMedia: {
		"RESTORE HEADERONLY of a file that is not a backup answers 3241 (media family incorrectly formed), which the " +
			"product classifies as a corrupt set, not as a missing file",
		"the probe before every BACKUP (an unmounted mount point) misreads a file SQL Server found: it refuses every " +
			"BACKUP with InvalidConfig, or stops protecting against a BACKUP filling the SQL host's disk",
	},
	IDLogForkAfterRestore: {
		"after RESTORE DATABASE ... WITH REPLACE, RECOVERY of a database in the FULL recovery model from its own full backup, " +
			"its next log backup is on a new recovery fork: RESTORE HEADERONLY and msdb.dbo.backupset give it the restored full's fork " +
			"as FirstRecoveryForkID and another as RecoveryForkID, so it is not on the recovery path of the log backups taken before the restore",
		"the log chain does not see that the source was restored to an earlier point (it records the next log backup as the chain's, " +
			"and a restore through the chain fails at it), and another tool's log backup taken before the restore still " +
			"splits every later chain until a log backup passes its LSNs",
	},
	IDDifferentialBase: {
		"RESTORE HEADERONLY of a differential taken after a full backup that is not COPY_ONLY gives BackupType 5, that full's " +
			"BackupSetGUID as DifferentialBaseGUID and an LSN as DifferentialBaseLSN",
		"every differential (diff_backup) fails its catalog step with DifferentialBaseMoved, as if another tool's full backup had " +
			"moved the base, and none is ever proven",
	},
	IDEncryptedBackup: {
		"a backup taken WITH ENCRYPTION as encryption: configures it gives, in RESTORE HEADERONLY as the product reads it on the " +
			"source and on the verification instance, the algorithm, the certificate's thumbprint and CERTIFICATE; and the " +
			"verification instance reads its file list with the certificate (or answers 33111 without it)",
		"the manifests record no or wrong encryption, so the plans of recover and drill do not compare the restoring instance's " +
			"certificates (its RESTORE does, with 33111), or a RESTORE without the certificate fails with an error the product " +
			"does not take for a missing certificate",
	},
	IDMissingFile: {
		"RESTORE HEADERONLY of a file that does not exist answers a device error (3201) quoting the operating system error " +
			"as N(text), 2 or 3, which the product reads as a path where SQL Server does not see the file",
		"the probe before every BACKUP cannot tell an unmounted mount point (SQL Server does not see the worker's file) " +
			"from other errors: it lets the BACKUP go ahead and fill the SQL host's disk",
	},
}

// newProbe starts the probe id with its assumption.
func newProbe(id string) Probe {
	a := assumptions[id]
	return Probe{ID: id, Assumption: a.text, IfFails: a.ifFails, Facts: map[string]any{}}
}

// notMeasured is what a probe that did not run observed.
const notMeasured = "not measured"

// inconclusive is probe id, not measured: why.
func inconclusive(id, why string) Probe {
	p := newProbe(id)
	p.Verdict, p.Why, p.Observed = Inconclusive, why, notMeasured
	return p
}

// wall formats a SQL Server datetime, which has no zone: the wall clock
// of the server that reported it.
func wall(t time.Time) string { return t.Format("2006-01-02 15:04:05.000") }

// wallJSON is a SQL Server datetime in the JSON report: RFC 3339 labelled
// UTC, as the driver decodes it and the manifests record it, under a key
// ending in _wall; it is the wall clock of the server the probe names
// (servers[].utc_offset_minutes gives each server's offset), not an
// instant.
func wallJSON(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// seconds rounds d to milliseconds, in seconds.
func seconds(d time.Duration) float64 {
	return float64(d.Round(time.Millisecond)) / float64(time.Second)
}

// datetimeSlack is the rounding of datetime (to 1/300 s) and more.
const datetimeSlack = 10 * time.Millisecond

// lastGoodObs is what LastGoodCheckDbTime was: on the source after its
// CHECKDB, on the copy after the RESTORE and after the copy's CHECKDB, each
// with the GETDATE() of the server that reported it.
type lastGoodObs struct {
	Source, SourceNow     time.Time
	Restored, RestoredNow time.Time
	RestoreDate           time.Time // msdb's restore_date of the copy; zero when unread
	After, AfterNow       time.Time
	AfterCheckDB          bool // the copy's CHECKDB ran clean and After was read
}

// judgeLastGoodRestored: the copy reports exactly its source's value.
// Facts: source_value_wall, copy_value_wall, restore_date_wall.
func judgeLastGoodRestored(o lastGoodObs) Probe {
	p := newProbe(IDLastGoodRestored)
	if o.Source.IsZero() || o.Restored.IsZero() {
		p.Verdict, p.Observed = Inconclusive, "the server reports no LastGoodCheckDbTime"
		p.Why = "DATABASEPROPERTYEX(db, 'LastGoodCheckDbTime') needs SQL Server 2016 SP2 or later"
		return p
	}
	p.Facts["source_value_wall"], p.Facts["copy_value_wall"] = wallJSON(o.Source), wallJSON(o.Restored)
	if !o.RestoreDate.IsZero() {
		p.Facts["restore_date_wall"] = wallJSON(o.RestoreDate)
	}
	p.Observed = fmt.Sprintf("the source's value after its CHECKDB was %s (source clock); the restored copy reports %s",
		wall(o.Source), wall(o.Restored))
	if !o.RestoreDate.IsZero() {
		p.Observed += fmt.Sprintf("; its restore_date is %s (verification clock)", wall(o.RestoreDate))
	}
	if o.Restored.Equal(o.Source) {
		p.Verdict = Holds
		return p
	}
	p.Verdict = Fails
	return p
}

// judgeLastGoodCheckDB: the copy's CHECKDB changes the value to a time on
// the verification instance's clock at or after the baseline read before it
// (activities.CheckDBBaseline.CleanSince), not later than the server's
// GETDATE() after it. Facts: baseline_value_wall,
// baseline_server_now_wall, after_value_wall, after_server_now_wall.
func judgeLastGoodCheckDB(o lastGoodObs) Probe {
	p := newProbe(IDLastGoodCheckDB)
	if o.Restored.IsZero() || !o.AfterCheckDB || o.After.IsZero() {
		p.Verdict, p.Observed = Inconclusive, notMeasured
		p.Why = "the copy's CHECKDB did not run clean, or the server reports no LastGoodCheckDbTime (SQL Server 2016 SP2 and later do)"
		return p
	}
	p.Facts["baseline_value_wall"], p.Facts["baseline_server_now_wall"] = wallJSON(o.Restored), wallJSON(o.RestoredNow)
	p.Facts["after_value_wall"], p.Facts["after_server_now_wall"] = wallJSON(o.After), wallJSON(o.AfterNow)
	p.Observed = fmt.Sprintf("before the copy's CHECKDB: %s, the verification instance's GETDATE() %s; after it: %s, GETDATE() %s",
		wall(o.Restored), wall(o.RestoredNow), wall(o.After), wall(o.AfterNow))
	base := activities.CheckDBBaseline{LastGood: o.Restored, At: o.RestoredNow}
	if base.CleanSince(o.After) && !o.After.After(o.AfterNow.Add(datetimeSlack)) {
		p.Verdict = Holds
		return p
	}
	p.Verdict = Fails
	return p
}

// sighting is one poll of a statement this run sent, seen in
// sys.dm_exec_requests by its session.
type sighting struct {
	At      time.Duration // since it was sent
	Command string
	Percent float64
	Text    string
	Own     bool // the session's original login is the querying login
	// Found: the product's own query (tsql.RunningStatements and
	// mssql.Find with the statement's marker) found it in the same poll.
	Found bool
}

// likeMatch is T-SQL's LIKE for the patterns the product uses (% and _),
// as the default case-insensitive collations compare.
func likeMatch(pattern, s string) bool {
	p, v := []rune(strings.ToUpper(pattern)), []rune(strings.ToUpper(s))
	var match func(i, j int) bool
	match = func(i, j int) bool {
		for i < len(p) {
			switch p[i] {
			case '%':
				for k := j; k <= len(v); k++ {
					if match(i+1, k) {
						return true
					}
				}
				return false
			case '_':
				if j >= len(v) {
					return false
				}
			default:
				if j >= len(v) || v[j] != p[i] {
					return false
				}
			}
			i, j = i+1, j+1
		}
		return j == len(v)
	}
	return match(0, 0)
}

// phasesObs is a DBCC CHECKDB of the copy, watched while it ran.
type phasesObs struct {
	Blind     bool // the login sees no other session's requests
	Sent      string
	Sightings []sighting
	Duration  time.Duration
	Polls     int
}

// distinctCommands are the commands seen, in order of first sight.
func distinctCommands(ss []sighting) []string {
	var out []string
	for _, s := range ss {
		if len(out) == 0 || !containsString(out, s.Command) {
			out = append(out, s.Command)
		}
	}
	return out
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// judgeCheckDBPhases: every sighting's command is LIKE tsql.CommandCheckDB,
// its text is the batch sent, and the product's query found it. Facts:
// phases (the commands seen), sightings, polls, duration_seconds.
func judgeCheckDBPhases(o phasesObs) Probe {
	p := newProbe(IDCheckDBPhases)
	if o.Blind {
		p.Verdict, p.Observed = Inconclusive, "the login sees only its own session in sys.dm_exec_requests"
		p.Why = "grant VIEW SERVER STATE (SQL Server 2022: VIEW SERVER PERFORMANCE STATE) to the verification instance's login, as the cycle needs it"
		return p
	}
	phases := distinctCommands(o.Sightings)
	p.Facts["phases"], p.Facts["sightings"], p.Facts["polls"] = phases, len(o.Sightings), o.Polls
	p.Facts["duration_seconds"] = seconds(o.Duration)
	if len(o.Sightings) == 0 {
		p.Verdict = Inconclusive
		p.Observed = fmt.Sprintf("the CHECKDB took %.3f s and no poll saw it running", seconds(o.Duration))
		p.Why = "it was too fast to observe: run again with a larger --size"
		return p
	}
	p.Observed = fmt.Sprintf("in %d of %d polls over %.3f s the CHECKDB's session showed the commands %s",
		len(o.Sightings), o.Polls, seconds(o.Duration), strings.Join(quoteAll(phases), ", "))
	for _, s := range o.Sightings {
		switch {
		case !likeMatch(tsql.CommandCheckDB, s.Command):
			p.Verdict = Fails
			p.Observed += fmt.Sprintf("; at %.3f s its command was %q, which LIKE %q does not match", seconds(s.At), s.Command, tsql.CommandCheckDB)
			return p
		case !s.Found:
			p.Verdict = Fails
			p.Observed += fmt.Sprintf("; at %.3f s, in %q, the product's query did not find it (login seen as its own: %v; batch text as sent: %v)",
				seconds(s.At), s.Command, s.Own, s.Text == o.Sent)
			return p
		}
	}
	p.Observed += "; the product's query found it in every one"
	p.Verdict = Holds
	return p
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// textObs is a statement this run sent and the batch text SQL Server
// showed for it.
type textObs struct {
	Op   string
	Sent string
	Seen []string // sys.dm_exec_sql_text of each sighting
}

// judgeBatchText: every sighting's text is exactly what was sent. Facts:
// statements, sightings.
func judgeBatchText(obs []textObs, blind bool) Probe {
	p := newProbe(IDBatchText)
	n := 0
	for _, o := range obs {
		n += len(o.Seen)
	}
	p.Facts["statements"], p.Facts["sightings"] = len(obs), n
	if n == 0 {
		p.Verdict, p.Observed = Inconclusive, "no statement of this run was seen running"
		p.Why = "the statements were too fast to observe (a larger --size), or the login sees no other session (grant VIEW SERVER STATE)"
		if blind {
			p.Why = "the login sees only its own session: grant VIEW SERVER STATE (SQL Server 2022: VIEW SERVER PERFORMANCE STATE)"
		}
		return p
	}
	var ops []string
	for _, o := range obs {
		if len(o.Seen) > 0 {
			ops = append(ops, o.Op)
		}
		for _, seen := range o.Seen {
			m := mssql.Marker{Prefix: o.Sent, Whole: true}
			if !m.Matches(seen) {
				p.Verdict = Fails
				p.Observed = fmt.Sprintf("%s: sent %q, sys.dm_exec_sql_text showed %q", o.Op, clip(o.Sent), clip(seen))
				return p
			}
		}
	}
	p.Verdict = Holds
	p.Observed = fmt.Sprintf("in %d sightings (%s) the text was the batch as sent, character for character", n, strings.Join(ops, ", "))
	return p
}

// clip shortens a batch for a message, keeping its end (where a marker is).
func clip(s string) string {
	if len(s) <= 160 {
		return s
	}
	return s[:60] + " ... " + s[len(s)-95:]
}

// restoreObs is a RESTORE of the copy: the verification instance's
// GETDATE() before it was sent and after it ended, and what msdb and
// sys.databases then said.
type restoreObs struct {
	Before, After time.Time
	RestoreDate   time.Time // zero: msdb could not be read
	Created       time.Time
	MSDBError     string
}

// judgeCreateDate: create_date lies within [Before, After]. Facts:
// restore_seconds, create_minus_restore_date_seconds,
// create_minus_start_seconds.
func judgeCreateDate(o restoreObs) Probe {
	p := newProbe(IDCreateDate)
	took := o.After.Sub(o.Before)
	p.Facts["restore_seconds"] = seconds(took)
	p.Facts["create_minus_start_seconds"] = seconds(o.Created.Sub(o.Before))
	p.Observed = fmt.Sprintf("the RESTORE ran from %s to %s (%.3f s, verification clock); the copy's create_date is %s, %.3f s after its start",
		wall(o.Before), wall(o.After), seconds(took), wall(o.Created), seconds(o.Created.Sub(o.Before)))
	if !o.RestoreDate.IsZero() {
		d := o.Created.Sub(o.RestoreDate)
		p.Facts["create_minus_restore_date_seconds"] = seconds(d)
		rel := "after"
		if d < 0 {
			rel, d = "before", -d
		}
		p.Observed += fmt.Sprintf(", %.3f s %s msdb's restore_date %s", seconds(d), rel, wall(o.RestoreDate))
	}
	if o.Created.Before(o.Before.Add(-datetimeSlack)) || o.Created.After(o.After.Add(datetimeSlack)) {
		p.Verdict = Fails
		return p
	}
	p.Verdict = Holds
	return p
}

// minRestoreForDate is how long a RESTORE must take for its start and end
// to be told apart on datetime values read by separate queries.
const minRestoreForDate = time.Second

// judgeRestoreDate: restore_date is nearer the RESTORE's start than its
// end. Facts: restore_seconds, restore_date_minus_start_seconds.
func judgeRestoreDate(o restoreObs) Probe {
	p := newProbe(IDRestoreDate)
	if o.RestoreDate.IsZero() {
		p.Verdict, p.Observed = Inconclusive, "msdb.dbo.restorehistory could not be read: "+o.MSDBError
		p.Why = "grant SELECT on msdb.dbo.restorehistory and msdb.dbo.backupset to the verification instance's login, as the cycle needs it"
		return p
	}
	took := o.After.Sub(o.Before)
	p.Facts["restore_seconds"] = seconds(took)
	p.Facts["restore_date_minus_start_seconds"] = seconds(o.RestoreDate.Sub(o.Before))
	p.Observed = fmt.Sprintf("the RESTORE ran from %s to %s (%.3f s, verification clock); restore_date is %s",
		wall(o.Before), wall(o.After), seconds(took), wall(o.RestoreDate))
	if took < minRestoreForDate {
		p.Verdict = Inconclusive
		p.Why = fmt.Sprintf("the RESTORE took %.3f s, too short to tell its start from its end: run again with a larger --size", seconds(took))
		return p
	}
	if o.RestoreDate.Sub(o.Before) <= o.After.Sub(o.RestoreDate) {
		p.Verdict = Holds
		return p
	}
	p.Verdict = Fails
	return p
}

// vanishObs is a BACKUP or RESTORE whose client vanished while it ran.
type vanishObs struct {
	Blind bool
	// Seen: the product's query found it running before the client
	// vanished; EndedFirst: it ended before the client could vanish.
	Seen, EndedFirst bool
	PercentAtVanish  float64
	// LastPercent and RanOnFor are from the last sighting after the
	// vanish; EndedAfter is when it was no longer seen.
	LastPercent float64
	RanOnFor    time.Duration
	EndedAfter  time.Duration
	StillRuns   bool // still running when the probe stopped waiting
	running     *vanished
	// MissedAfter counts the sightings after the vanish in which the
	// product's query did not find it (a retry would not re-attach).
	MissedAfter int
	// Completed: it ran to its end, by what a retry reads (Evidence: a
	// BACKUP's RESTORE HEADERONLY shows the finished set, msdb records a
	// RESTORE); HeaderErr is what was found instead, Unknown why it could
	// not be read.
	Completed bool
	Evidence  string
	HeaderErr string
	Unknown   string
	Sightings []sighting
}

// judgeVanished: the statement completed after its client vanished, and
// the product's query found it all along. Facts: percent_at_vanish,
// ran_on_seconds, ended_seconds_after_vanish, last_percent, completed,
// missed_by_product_query.
func judgeVanished(id string, o vanishObs) Probe {
	p := newProbe(id)
	what := "BACKUP"
	if id == IDVanishedRestore {
		what = "RESTORE"
	}
	switch {
	case o.Blind:
		p.Verdict, p.Observed = Inconclusive, "the login sees only its own session in sys.dm_exec_requests"
		p.Why = "grant VIEW SERVER STATE (SQL Server 2022: VIEW SERVER PERFORMANCE STATE) to the login of the instance that runs the " +
			what + ", as the cycle needs it"
		return p
	case !o.Seen && len(o.Sightings) > 0:
		p.Verdict = Fails
		p.Observed = fmt.Sprintf("the %s's session was seen running %d times, and the product's query found it in none: "+
			"a retry would not re-attach to it (client's connection left open)", what, len(o.Sightings))
		return p
	case o.EndedFirst || !o.Seen:
		p.Verdict, p.Observed = Inconclusive, "the "+what+" ended before its client could vanish"
		p.Why = "it was too fast: run again with a larger --size"
		return p
	}
	p.Facts["percent_at_vanish"], p.Facts["last_percent"] = o.PercentAtVanish, o.LastPercent
	p.Facts["ran_on_seconds"], p.Facts["ended_seconds_after_vanish"] = seconds(o.RanOnFor), seconds(o.EndedAfter)
	p.Facts["completed"] = o.Completed
	p.Facts["missed_by_product_query"] = o.MissedAfter
	p.Observed = fmt.Sprintf("the client's connection was closed at %.0f %%; the %s was seen running %.3f s longer (at %.0f %%) and was gone %.3f s after the close; ",
		o.PercentAtVanish, what, seconds(o.RanOnFor), o.LastPercent, seconds(o.EndedAfter))
	switch {
	case o.MissedAfter > 0:
		p.Verdict = Fails
		p.Observed += fmt.Sprintf("in %d polls after the close the product's query did not find it (another login, or another text): a retry would not re-attach to it", o.MissedAfter)
	case o.StillRuns:
		p.Verdict = Holds
		p.Observed = fmt.Sprintf("the client's connection was closed at %.0f %%; %.3f s later the %s still ran (at %.0f %%) when the probe stopped waiting",
			o.PercentAtVanish, seconds(o.RanOnFor), what, o.LastPercent)
		p.Facts["still_running"] = true
	case o.Completed:
		p.Verdict = Holds
		p.Observed += o.Evidence + ": it ran to its end"
	case o.Unknown != "":
		p.Verdict = Inconclusive
		p.Observed += "whether it finished could not be read: " + o.Unknown
		p.Why = "the login could not read what the statement left (msdb's restore history needs SELECT on msdb.dbo.restorehistory and backupset)"
	default:
		p.Verdict = Fails
		p.Observed += "it did not finish (" + o.HeaderErr + "): SQL Server stopped it"
	}
	return p
}

// dropRun is one run of the product's drop batch: the errors it raised, in
// order, and whether the copy was gone afterwards.
type dropRun struct {
	Errors []string // "5011: message"
	Gone   bool
}

// dropObs is the drop of a copy left RESTORING.
type dropObs struct {
	StateBefore string
	Runs        []dropRun
}

// judgeDropRestoring: the copy is gone after the first run or its retry.
// Facts: state_before, runs (each with errors and gone).
func judgeDropRestoring(o dropObs) Probe {
	p := newProbe(IDDropRestoring)
	if o.StateBefore != "RESTORING" {
		p.Verdict, p.Observed = Inconclusive, fmt.Sprintf("the copy restored WITH NORECOVERY was %q, not RESTORING", o.StateBefore)
		p.Why = "the RESTORE WITH NORECOVERY did not leave the copy RESTORING"
		return p
	}
	p.Facts["state_before"] = o.StateBefore
	var runs []map[string]any
	var parts []string
	for i, r := range o.Runs {
		runs = append(runs, map[string]any{"errors": nonNil(r.Errors), "gone": r.Gone})
		what := "no error"
		if len(r.Errors) > 0 {
			what = "errors " + strings.Join(r.Errors, "; ")
		}
		gone := "the copy was still there"
		if r.Gone {
			gone = "the copy was gone"
		}
		parts = append(parts, fmt.Sprintf("run %d: %s; %s", i+1, what, gone))
	}
	p.Facts["runs"] = runs
	p.Observed = "the copy was RESTORING; " + strings.Join(parts, "; then ")
	if len(o.Runs) > 0 && o.Runs[len(o.Runs)-1].Gone {
		p.Verdict = Holds
		return p
	}
	p.Verdict = Fails
	return p
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// headerObs is a BACKUP of the source: its server's GETDATE() and
// GETUTCDATE() before and after it, and the dates HEADERONLY gives.
type headerObs struct {
	BeforeLocal, BeforeUTC time.Time
	AfterLocal, AfterUTC   time.Time
	Start, Finish          time.Time
}

// headerSlack: HEADERONLY's dates are whole seconds on some versions.
const headerSlack = 2 * time.Second

// judgeHeaderClock: the dates fall within the BACKUP on the local clock.
// Facts: utc_offset_minutes and, as wall clocks, backup_start,
// backup_finish, local_before, local_after, utc_before, utc_after.
func judgeHeaderClock(o headerObs) Probe {
	p := newProbe(IDHeaderClock)
	off := int(o.BeforeLocal.Sub(o.BeforeUTC).Round(time.Minute) / time.Minute)
	p.Facts["utc_offset_minutes"] = off
	p.Facts["backup_start_wall"], p.Facts["backup_finish_wall"] = wallJSON(o.Start), wallJSON(o.Finish)
	p.Facts["local_before_wall"], p.Facts["local_after_wall"] = wallJSON(o.BeforeLocal), wallJSON(o.AfterLocal)
	p.Facts["utc_before_wall"], p.Facts["utc_after_wall"] = wallJSON(o.BeforeUTC), wallJSON(o.AfterUTC)
	within := func(t, from, to time.Time) bool {
		return !t.Before(from.Add(-headerSlack)) && !t.After(to.Add(headerSlack))
	}
	p.Observed = fmt.Sprintf("BackupStartDate %s, BackupFinishDate %s; GETDATE() was %s before and %s after the BACKUP, GETUTCDATE() %s and %s (offset %+d min)",
		wall(o.Start), wall(o.Finish), wall(o.BeforeLocal), wall(o.AfterLocal), wall(o.BeforeUTC), wall(o.AfterUTC), off)
	local := within(o.Start, o.BeforeLocal, o.AfterLocal) && within(o.Finish, o.BeforeLocal, o.AfterLocal)
	switch {
	case local && off == 0:
		p.Verdict = Holds
		p.Observed += "; this server runs on UTC, where the local clock and UTC agree"
	case local:
		p.Verdict = Holds
	default:
		p.Verdict = Fails
		if within(o.Finish, o.BeforeUTC, o.AfterUTC) {
			p.Observed += "; the dates are UTC, not the local clock"
		}
	}
	return p
}

// mediaObs is RESTORE HEADERONLY of files that are not backups: a file the
// worker wrote (hostcheck.Probe) and a name that does not exist.
type mediaObs struct {
	Paths []string
	// ProbeErr is what hostcheck.Probe returned; SQLErrors what SQL Server
	// answered the HEADERONLY of the probe file.
	ProbeErr  error
	SQLErrors []string
	// MissingErr is the HEADERONLY of a name that does not exist.
	MissingPath string
	MissingErr  error
}

// sqlErrors lists the SQL Server errors of a failure, "n: message".
func sqlErrors(err error) []string {
	var f *mssql.Failure
	if !errors.As(err, &f) {
		return nil
	}
	out := make([]string, len(f.Errors))
	for i, e := range f.Errors {
		out[i] = fmt.Sprintf("%d: %s", e.Number, e.Message)
	}
	return out
}

// judgeGarbage: hostcheck.Probe, the product's check before every BACKUP,
// takes the file SQL Server found for what it is. Facts: errors, paths.
func judgeGarbage(o mediaObs) Probe {
	p := newProbe(IDGarbageMedia)
	p.Facts["paths"], p.Facts["errors"] = o.Paths, nonNil(o.SQLErrors)
	said := "SQL Server answered " + strings.Join(o.SQLErrors, "; ")
	if len(o.SQLErrors) == 0 {
		said = "SQL Server raised no error"
	}
	switch {
	case o.ProbeErr == nil:
		p.Verdict = Holds
		p.Observed = said + "; the product's probe found the file"
	case errors.Is(o.ProbeErr, hostcheck.ErrNotSeen):
		p.Verdict, p.Observed = Inconclusive, "SQL Server does not see the file the worker wrote: "+o.ProbeErr.Error()
		p.Why = "the backup server's paths and location are not the same directory (`starter preflight` says which): fix the configuration"
	case len(o.SQLErrors) == 0:
		p.Verdict, p.Observed = Inconclusive, "the probe could not run: "+o.ProbeErr.Error()
		p.Why = "the worker could not write the probe file through the backup server's location, or the instance was unreachable"
	default:
		p.Verdict = Fails
		p.Observed = said + "; the product's probe took it for: " + o.ProbeErr.Error()
	}
	return p
}

// judgeMissing: the error of a missing file is what the product's probe
// reads as "not seen" (mssql.MissingFile, or a path SQL Server rejects),
// through the operating system error quoted as N(text). Facts: path,
// errors, os_error.
func judgeMissing(o mediaObs) Probe {
	p := newProbe(IDMissingFile)
	errs := sqlErrors(o.MissingErr)
	code := mssql.OSError(o.MissingErr)
	p.Facts["path"], p.Facts["errors"], p.Facts["os_error"] = o.MissingPath, nonNil(errs), code
	switch {
	case o.MissingErr == nil:
		p.Verdict, p.Observed = Fails, "RESTORE HEADERONLY of "+o.MissingPath+", which does not exist, raised no error"
	case len(errs) == 0:
		p.Verdict, p.Observed = Inconclusive, "the HEADERONLY could not run: "+o.MissingErr.Error()
		p.Why = "the instance was unreachable"
	case (mssql.MissingFile(o.MissingErr) || errors.Is(o.MissingErr, mssql.ErrBackupPathInvalid)) && code >= 0:
		p.Verdict = Holds
		p.Observed = fmt.Sprintf("SQL Server answered %s; the product reads operating system error %d", strings.Join(errs, "; "), code)
	default:
		p.Verdict = Fails
		p.Observed = fmt.Sprintf("SQL Server answered %s; the product reads operating system error %d and takes it for: %v",
			strings.Join(errs, "; "), code, o.MissingErr)
	}
	return p
}
