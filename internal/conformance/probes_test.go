package conformance

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	mssqldb "github.com/microsoft/go-mssqldb"

	"github.com/backupcycle/backupcycle/internal/hostcheck"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// The verdicts of what a real server might do otherwise than the emulator
// does: each judge fails on the behaviour that breaks the product's
// assumption, and is inconclusive, never holds, on what it did not see.

var t0 = time.Date(2025, 3, 2, 1, 40, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

func TestLikeMatchIsTSQLLike(t *testing.T) {
	for _, c := range []struct {
		pattern, s string
		want       bool
	}{
		{tsql.CommandCheckDB, "DBCC TABLE CHECK", true},
		{tsql.CommandCheckDB, "dbcc iview check", true},
		{tsql.CommandCheckDB, "DBCC", false},
		{tsql.CommandCheckDB, "DBCCX", false},
		{tsql.CommandCheckDB, "SELECT", false},
		{tsql.CommandBackupDatabase, "BACKUP DATABASE", true},
		{tsql.CommandBackupDatabase, "BACKUP LOG", false},
		{"a_c", "abc", true},
		{"a_c", "ac", false},
	} {
		if got := likeMatch(c.pattern, c.s); got != c.want {
			t.Errorf("%q LIKE %q = %v, want %v", c.s, c.pattern, got, c.want)
		}
	}
}

func TestJudgeLastGood(t *testing.T) {
	src := at(0).Add(time.Hour) // a source an hour ahead of the verification instance
	good := lastGoodObs{Source: src, SourceNow: src, Restored: src, RestoredNow: at(60), After: at(90), AfterNow: at(91), AfterCheckDB: true}
	for _, c := range []struct {
		name     string
		edit     func(*lastGoodObs)
		restored Verdict
		checkdb  Verdict
	}{
		{"as assumed", func(*lastGoodObs) {}, Holds, Holds},
		{"restore stamps its own time", func(o *lastGoodObs) { o.Restored = at(59) }, Fails, Holds},
		{"CHECKDB leaves it unchanged", func(o *lastGoodObs) { o.After = o.Restored }, Holds, Fails},
		{"CHECKDB writes the source's clock", func(o *lastGoodObs) { o.After = at(30) }, Holds, Fails},
		{"a time in the server's future", func(o *lastGoodObs) { o.After = at(120) }, Holds, Fails},
		{"not reported (before 2016 SP2)", func(o *lastGoodObs) { o.Source, o.Restored, o.After = time.Time{}, time.Time{}, time.Time{} },
			Inconclusive, Inconclusive},
		{"the copy's CHECKDB did not run", func(o *lastGoodObs) { o.AfterCheckDB = false }, Holds, Inconclusive},
	} {
		o := good
		c.edit(&o)
		if p := judgeLastGoodRestored(o); p.Verdict != c.restored {
			t.Errorf("%s: %s %s: %s", c.name, IDLastGoodRestored, p.Verdict, p.Observed)
		}
		if p := judgeLastGoodCheckDB(o); p.Verdict != c.checkdb {
			t.Errorf("%s: %s %s: %s", c.name, IDLastGoodCheckDB, p.Verdict, p.Observed)
		}
	}
}

func TestJudgeCheckDBPhases(t *testing.T) {
	sent := "DBCC CHECKDB([x_copy]) WITH NO_INFOMSGS /* backupcycle seq 00000000 */"
	seen := func(cmd string, found bool) sighting {
		return sighting{Command: cmd, Text: sent, Own: true, Found: found}
	}
	for _, c := range []struct {
		name string
		o    phasesObs
		want Verdict
	}{
		{"every phase found", phasesObs{Sightings: []sighting{seen("DBCC ALLOC CHECK", true), seen("DBCC IVIEW CHECK", true)}}, Holds},
		{"a phase outside DBCC %", phasesObs{Sightings: []sighting{seen("DBCC TABLE CHECK", true), seen("CHECKDB IVIEW", false)}}, Fails},
		{"missed by the product's query", phasesObs{Sightings: []sighting{seen("DBCC SSB CHECK", false)}}, Fails},
		{"too fast to see", phasesObs{Polls: 1}, Inconclusive},
		{"blind", phasesObs{Blind: true}, Inconclusive},
	} {
		c.o.Sent = sent
		p := judgeCheckDBPhases(c.o)
		if p.Verdict != c.want {
			t.Errorf("%s: %s: %s (%s)", c.name, p.Verdict, p.Observed, p.Why)
		}
	}
	p := judgeCheckDBPhases(phasesObs{Sent: sent, Sightings: []sighting{seen("DBCC ALLOC CHECK", true), seen("DBCC ALLOC CHECK", true),
		seen("DBCC IVIEW CHECK", true)}})
	if fmt.Sprint(p.Facts["phases"]) != "[DBCC ALLOC CHECK DBCC IVIEW CHECK]" {
		t.Errorf("phases %v", p.Facts["phases"])
	}
}

func TestJudgeBatchText(t *testing.T) {
	sent := "DBCC CHECKDB([x]) WITH NO_INFOMSGS /* backupcycle seq 00000000 */"
	if p := judgeBatchText([]textObs{{Op: "DBCC CHECKDB", Sent: sent, Seen: []string{sent, sent}}}, false); p.Verdict != Holds {
		t.Errorf("exact text: %s %s", p.Verdict, p.Observed)
	}
	// A server that drops the trailing comment, or returns only the
	// statement's start.
	for _, seen := range []string{"DBCC CHECKDB([x]) WITH NO_INFOMSGS", sent[:40]} {
		if p := judgeBatchText([]textObs{{Op: "DBCC CHECKDB", Sent: sent, Seen: []string{seen}}}, false); p.Verdict != Fails {
			t.Errorf("text %q: %s", seen, p.Verdict)
		}
	}
	if p := judgeBatchText([]textObs{{Op: "BACKUP DATABASE", Sent: sent}}, true); p.Verdict != Inconclusive || !strings.Contains(p.Why, "VIEW SERVER STATE") {
		t.Errorf("nothing seen, blind: %s %s", p.Verdict, p.Why)
	}
}

func TestJudgeRestoreDates(t *testing.T) {
	for _, c := range []struct {
		name           string
		o              restoreObs
		create, restDT Verdict
	}{
		{"stamped at the start", restoreObs{Before: at(0), After: at(30), RestoreDate: at(0.1), Created: at(0.2)}, Holds, Holds},
		{"restore_date at the end", restoreObs{Before: at(0), After: at(30), RestoreDate: at(29.9), Created: at(0.2)}, Holds, Fails},
		{"create_date after the restore", restoreObs{Before: at(0), After: at(30), RestoreDate: at(0.1), Created: at(31)}, Fails, Holds},
		{"create_date the source's", restoreObs{Before: at(0), After: at(30), RestoreDate: at(0.1), Created: at(-86400)}, Fails, Holds},
		{"too short", restoreObs{Before: at(0), After: at(0.4), RestoreDate: at(0.3), Created: at(0.1)}, Holds, Inconclusive},
		{"msdb unreadable", restoreObs{Before: at(0), After: at(30), Created: at(0.2), MSDBError: "229"}, Holds, Inconclusive},
	} {
		if p := judgeCreateDate(c.o); p.Verdict != c.create {
			t.Errorf("%s: %s %s: %s", c.name, IDCreateDate, p.Verdict, p.Observed)
		}
		if p := judgeRestoreDate(c.o); p.Verdict != c.restDT {
			t.Errorf("%s: %s %s: %s", c.name, IDRestoreDate, p.Verdict, p.Observed)
		}
	}
}

func TestJudgeVanished(t *testing.T) {
	for _, id := range []string{IDVanishedBackup, IDVanishedRestore} {
		testJudgeVanished(t, id)
	}
}

func testJudgeVanished(t *testing.T, id string) {
	for _, c := range []struct {
		name string
		o    vanishObs
		want Verdict
	}{
		{"ran to its end", vanishObs{Seen: true, RanOnFor: 20 * time.Second, EndedAfter: 21 * time.Second, Completed: true}, Holds},
		{"cannot tell (msdb unreadable)", vanishObs{Seen: true, Unknown: "229"}, Inconclusive},
		{"still running when the probe gave up", vanishObs{Seen: true, StillRuns: true}, Holds},
		{"aborted by SQL Server", vanishObs{Seen: true, EndedAfter: 100 * time.Millisecond, HeaderErr: "3241"}, Fails},
		{"ran on, but the product's query lost it", vanishObs{Seen: true, Completed: true, MissedAfter: 3}, Fails},
		{"ended before the client vanished", vanishObs{EndedFirst: true}, Inconclusive},
		{"never found by the product's query", vanishObs{EndedFirst: true, Sightings: []sighting{{Command: "BACKUP DATABASE"}}}, Fails},
		{"blind", vanishObs{Blind: true}, Inconclusive},
	} {
		if p := judgeVanished(id, c.o); p.Verdict != c.want {
			t.Errorf("%s: %s: %s: %s (%s)", id, c.name, p.Verdict, p.Observed, p.Why)
		}
	}
}

func TestJudgeDropRestoring(t *testing.T) {
	alter := "5011: User does not have permission to alter database 'x', the database does not exist, or the database is not in a state that allows access checks."
	for _, c := range []struct {
		name string
		o    dropObs
		want Verdict
	}{
		{"dropped with the ALTER's error", dropObs{StateBefore: "RESTORING", Runs: []dropRun{{Errors: []string{alter, "5069: ALTER DATABASE statement failed."}, Gone: true}}}, Holds},
		{"dropped by the retry", dropObs{StateBefore: "RESTORING", Runs: []dropRun{{Errors: []string{alter}}, {Gone: true}}}, Holds},
		{"still there after the retry", dropObs{StateBefore: "RESTORING", Runs: []dropRun{{Errors: []string{alter}}, {Errors: []string{alter}}}}, Fails},
		{"not RESTORING", dropObs{StateBefore: "ONLINE"}, Inconclusive},
	} {
		if p := judgeDropRestoring(c.o); p.Verdict != c.want {
			t.Errorf("%s: %s: %s", c.name, p.Verdict, p.Observed)
		}
	}
}

func TestJudgeHeaderClock(t *testing.T) {
	utc := headerObs{BeforeUTC: at(0), AfterUTC: at(10)}
	berlin := utc
	berlin.BeforeLocal, berlin.AfterLocal = at(3600), at(3610)
	local := berlin
	local.Start, local.Finish = at(3601), at(3609)
	if p := judgeHeaderClock(local); p.Verdict != Holds || p.Facts["utc_offset_minutes"] != 60 {
		t.Errorf("local dates: %s %v", p.Verdict, p.Facts)
	}
	inUTC := berlin
	inUTC.Start, inUTC.Finish = at(1), at(9)
	if p := judgeHeaderClock(inUTC); p.Verdict != Fails || !strings.Contains(p.Observed, "UTC, not the local clock") {
		t.Errorf("UTC dates: %s %s", p.Verdict, p.Observed)
	}
	onUTC := utc
	onUTC.BeforeLocal, onUTC.AfterLocal, onUTC.Start, onUTC.Finish = at(0), at(10), at(1), at(9)
	if p := judgeHeaderClock(onUTC); p.Verdict != Holds || !strings.Contains(p.Observed, "runs on UTC") {
		t.Errorf("a server on UTC: %s %s", p.Verdict, p.Observed)
	}
}

// failure is a classified SQL Server failure of RESTORE HEADERONLY.
func failure(errs ...mssqldb.Error) error {
	return mssql.ClassifyErrors(mssql.Target{Instance: "sql01", Address: "sql01:1433"}, "RESTORE HEADERONLY", errs)
}

func TestJudgeMedia(t *testing.T) {
	terminated := mssqldb.Error{Number: 3013, Class: 16, Message: "RESTORE HEADERONLY is terminating abnormally."}
	missing := failure(mssqldb.Error{Number: 3201, Class: 16,
		Message: `Cannot open backup device '\\bak01\backup\x.bak'. Operating system error 2(The system cannot find the file specified.).`}, terminated)
	if p := judgeMissing(mediaObs{MissingPath: `\\bak01\backup\x.bak`, MissingErr: missing}); p.Verdict != Holds || p.Facts["os_error"] != 2 {
		t.Errorf("3201 with 2(...): %s %v", p.Verdict, p.Facts)
	}
	// An OS error the product cannot read (another format), or another
	// error number.
	for _, err := range []error{
		failure(mssqldb.Error{Number: 3201, Class: 16, Message: `Cannot open backup device. Operating system error 0x80070002.`}, terminated),
		failure(mssqldb.Error{Number: 3241, Class: 16, Message: "The media family on device is incorrectly formed."}, terminated),
	} {
		if p := judgeMissing(mediaObs{MissingErr: err}); p.Verdict != Fails {
			t.Errorf("%v: %s: %s", err, p.Verdict, p.Observed)
		}
	}
	if p := judgeMissing(mediaObs{MissingErr: errors.New("dial tcp: connection refused")}); p.Verdict != Inconclusive {
		t.Errorf("unreachable: %s", p.Verdict)
	}

	if p := judgeGarbage(mediaObs{SQLErrors: []string{"3241: The media family ...", "3013: ..."}}); p.Verdict != Holds {
		t.Errorf("probe passed: %s", p.Verdict)
	}

	if p := judgeGarbage(mediaObs{ProbeErr: fmt.Errorf("%w: x", hostcheck.ErrNotSeen), SQLErrors: []string{"3201: ... 2(...)"}}); p.Verdict != Inconclusive {
		t.Errorf("not seen (a configuration problem): %s", p.Verdict)
	}
	if p := judgeGarbage(mediaObs{ProbeErr: errors.New("statement failed"), SQLErrors: sqlErrors(failure(mssqldb.Error{Number: 9999, Class: 16, Message: "x"}))}); p.Verdict != Fails {
		t.Errorf("an unexpected answer: %s", p.Verdict)
	}

	if p := judgeGarbage(mediaObs{ProbeErr: errors.New("write the probe file: access denied")}); p.Verdict != Inconclusive {
		t.Errorf("the worker cannot write: %s", p.Verdict)
	}
}

func TestFillRows(t *testing.T) {
	for bytes, want := range map[int64]int64{0: 1, 8 << 10: 1, 16 << 10: 2, 24 << 10: 2, 32 << 10: 4, DefaultFill: 32768} {
		if got := fillRows(bytes); got != want {
			t.Errorf("fillRows(%d) = %d, want %d", bytes, got, want)
		}
	}
}

func TestJudgeLogFork(t *testing.T) {
	const a, b = "AAAAAAAA-0000-0000-0000-000000000001", "BBBBBBBB-0000-0000-0000-000000000002"
	hdr := func(first, last, point, from, to string) mssql.BackupHeader {
		return mssql.BackupHeader{FirstLSN: from, LastLSN: to, Fork: mssql.RecoveryFork{First: first, Last: last, Point: point}}
	}
	good := forkObs{Full: hdr(a, a, "", "100", "120"), Before: hdr(a, a, "", "100", "150"), After: hdr(a, b, "120", "120", "170"),
		MsdbAfter: mssql.RecoveryFork{First: a, Last: b, Point: "120"}, MsdbFound: true}
	for _, c := range []struct {
		name string
		edit func(*forkObs)
		want Verdict
	}{
		{"as assumed", func(*forkObs) {}, Holds},
		{"no new fork", func(o *forkObs) { o.After.Fork, o.MsdbAfter = o.Before.Fork, o.Before.Fork }, Fails},
		{"msdb records other forks", func(o *forkObs) { o.MsdbAfter.Last = a }, Fails},
		{"msdb has no row", func(o *forkObs) { o.MsdbFound = false }, Fails},
		{"no fork in the header", func(o *forkObs) { o.After.Fork = mssql.RecoveryFork{} }, Fails},
		{"refused: no current database backup", func(o *forkObs) {
			o.AfterErr = &mssql.Failure{Errors: []mssqldb.Error{{Number: 4214, Message: "BACKUP LOG cannot be performed because there is no current database backup."}}}
		}, Fails},
		{"could not run", func(o *forkObs) { o.AfterErr = errors.New("connection reset") }, Inconclusive},
	} {
		o := good
		c.edit(&o)
		if p := judgeLogFork(o); p.Verdict != c.want {
			t.Errorf("%s: %s, want %s: %s", c.name, p.Verdict, c.want, p.Observed)
		}
	}
}

// The differential names the full it was taken on; another GUID, no LSN
// or another backup type fails.
func TestJudgeDifferentialBase(t *testing.T) {
	full := mssql.BackupHeader{BackupSetGUID: "6F9A2B10-3C4D-4E5F-8091-A2B3C4D5E6F7"}
	diff := mssql.BackupHeader{BackupType: 5, DifferentialBaseGUID: "6f9a2b10-3c4d-4e5f-8091-a2b3c4d5e6f7", DifferentialBaseLSN: "37000000012800038"}
	if p := judgeDifferentialBase(diffObs{Full: full, Diff: diff}); p.Verdict != Holds {
		t.Fatalf("%s: %s", p.Verdict, p.Observed)
	}
	for _, bad := range []func(*mssql.BackupHeader){
		func(h *mssql.BackupHeader) { h.DifferentialBaseGUID = "00000000-0000-0000-0000-000000000001" },
		func(h *mssql.BackupHeader) { h.DifferentialBaseLSN = "" },
		func(h *mssql.BackupHeader) { h.BackupType = 1 },
	} {
		d := diff
		bad(&d)
		if p := judgeDifferentialBase(diffObs{Full: full, Diff: d}); p.Verdict != Fails {
			t.Errorf("%+v: %s", d, p.Verdict)
		}
	}
}

func TestJudgeEncryptedBackup(t *testing.T) {
	const tp = "0x15404D156BDEEBE626D9D6558A25978D1C7B2CCB"
	h := mssql.BackupHeader{KeyAlgorithm: "AES_256", EncryptorThumbprint: tp, EncryptorType: "CERTIFICATE"}
	good := encObs{Algorithm: "AES_256", Certificate: "BackupCert", Thumbprint: tp, Src: h, Ver: h}
	if p := judgeEncryptedBackup(good); p.Verdict != Holds {
		t.Fatalf("%s: %s", p.Verdict, p.Observed)
	}
	noCert := good
	noCert.FileListErr = failure(mssqldb.Error{Number: 33111, Class: 16, State: 3, Message: "Cannot find server certificate with thumbprint '" + tp + "'."},
		mssqldb.Error{Number: 3013, Class: 16, Message: "RESTORE FILELIST is terminating abnormally."})
	if p := judgeEncryptedBackup(noCert); p.Verdict != Holds || !strings.Contains(p.Observed, "33111") {
		t.Errorf("33111 without the certificate: %s: %s", p.Verdict, p.Observed)
	}
	for name, bad := range map[string]func(*encObs){
		"no encryption read":   func(o *encObs) { o.Src = mssql.BackupHeader{} },
		"another thumbprint":   func(o *encObs) { o.Ver.EncryptorThumbprint = "0x00" },
		"another algorithm":    func(o *encObs) { o.Src.KeyAlgorithm = "AES_128" },
		"verify header failed": func(o *encObs) { o.VerErr = errors.New("3241") },
		"another error": func(o *encObs) {
			o.FileListErr = failure(mssqldb.Error{Number: 3241, Class: 16, Message: "The media family on device 'x' is incorrectly formed."})
		},
	} {
		o := good
		bad(&o)
		if p := judgeEncryptedBackup(o); p.Verdict != Fails {
			t.Errorf("%s: %s", name, p.Verdict)
		}
	}
}
