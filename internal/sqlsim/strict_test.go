package sqlsim

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	mssql "github.com/microsoft/go-mssqldb"
)

// backgroundRun starts a statement on its own connection and returns the
// channel its result arrives on.
func backgroundRun(t *testing.T, e *testEnv, query string, args ...any) <-chan *result {
	t.Helper()
	db := e.open(t, "master")
	out := make(chan *result, 1)
	go func() {
		r, err := run(testCtx(t), db, nil, query, args...)
		if err != nil {
			t.Errorf("%s: %v", short(query), err)
		}
		if r == nil {
			r = &result{}
		}
		out <- r
	}()
	return out
}

// requestPercent polls the percent_complete of the running request of kind
// until cond holds.
func waitPercent(t *testing.T, e *testEnv, kind string, cond func(float64) bool) {
	t.Helper()
	rec := waitRunning(t, e.in, kind)
	waitFor(t, func() bool {
		_, pct, _, ok := requestOf(t, e, rec.Session)
		return ok && cond(pct)
	})
}

// TestBackupFilesInUse: a BACKUP holds its stripe files; a second BACKUP
// or a RESTORE naming one of them while it runs cannot open it (3201 with
// OS error 32, then 3013). After it ends the files are free.
func TestBackupFilesInUse(t *testing.T) {
	e := newEnv(t)
	e.create(t, DatabaseSpec{Name: "Sales", Size: 8 << 20})
	paths := stripeNames("Sales", 2)
	e.in.SetThrottle(4 << 20)
	first := backgroundRun(t, e, "BACKUP DATABASE [Sales] TO "+disks(paths)+" WITH INIT, FORMAT")
	waitRunning(t, e.in, "BACKUP DATABASE")
	const busy = "Operating system error 32(The process cannot access the file because it is being used by another process.)"
	for _, stmt := range []string{
		"BACKUP DATABASE [Sales] TO DISK = " + ql(paths[1]) + " WITH INIT, FORMAT",
		"RESTORE VERIFYONLY FROM " + disks(paths),
		"RESTORE HEADERONLY FROM DISK = " + ql(paths[0]),
	} {
		r := mustFail(t, e.db, 3013, stmt)
		if r.errs[0].Number != 3201 || !strings.Contains(r.errs[0].Message, busy) {
			t.Fatalf("%s while a BACKUP writes the files: %v", short(stmt), r.errs)
		}
	}
	if r := <-first; len(r.errs) > 0 {
		t.Fatalf("the first backup: %v", r.errs)
	}
	e.in.SetThrottle(0)
	mustRun(t, e.db, "RESTORE VERIFYONLY FROM "+disks(paths))
	// Two RESTOREs may read one file at a time.
	e.in.SetThrottle(4 << 20)
	verify := backgroundRun(t, e, "RESTORE VERIFYONLY FROM "+disks(paths))
	waitRunning(t, e.in, "RESTORE VERIFYONLY")
	mustRun(t, e.db, "RESTORE HEADERONLY FROM DISK = "+ql(paths[0]))
	if r := <-verify; len(r.errs) > 0 {
		t.Fatalf("verify: %v", r.errs)
	}
}

// TestTruncatedStripe: a stripe cut short (an interrupted copy) fails
// RESTORE HEADERONLY, VERIFYONLY and DATABASE with 3203 "Read on ...
// failed: 38(Reached the end of the file.)" then 3013; an empty file is
// 3254; a BACKUP that stopped (whole blocks, no end) stays 3241.
func TestTruncatedStripe(t *testing.T) {
	e := newEnv(t)
	e.create(t, DatabaseSpec{Name: "Sales", Size: 8 << 20})
	paths := stripeNames("Sales", 2)
	mustRun(t, e.db, "BACKUP DATABASE [Sales] TO "+disks(paths)+" WITH INIT, FORMAT")
	moves := movesFor(t, e, disks(paths), "t")
	src, err := os.ReadFile(localStripe(e, paths[0]))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		keep int
	}{
		{"inside a block", len(src) / 2},
		{"inside the closing part", len(src) - 20},
		{"inside the media header", 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cut := `\\bak01\backup\cut_` + strings.ReplaceAll(tc.name, " ", "_") + `.bak`
			if err := os.WriteFile(localStripe(e, cut), src[:tc.keep], 0o644); err != nil {
				t.Fatal(err)
			}
			want := `Read on "` + cut + `" failed: 38(Reached the end of the file.)`
			for _, stmt := range []string{
				"RESTORE HEADERONLY FROM DISK = " + ql(cut),
				"RESTORE VERIFYONLY FROM DISK = " + ql(cut) + ", DISK = " + ql(paths[1]),
				"RESTORE DATABASE [T] FROM DISK = " + ql(cut) + ", DISK = " + ql(paths[1]) + " WITH " + moves + ", REPLACE",
			} {
				r := mustFail(t, e.db, 3013, stmt)
				if r.errs[0].Number != 3203 || r.errs[0].Message != want {
					t.Fatalf("%s: %v, want 3203 %q", short(stmt), r.errs, want)
				}
			}
		})
	}
	empty := `\\bak01\backup\empty.bak`
	if err := os.WriteFile(localStripe(e, empty), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := mustFail(t, e.db, 3013, "RESTORE HEADERONLY FROM DISK = "+ql(empty)); r.errs[0].Number != 3254 {
		t.Fatalf("HEADERONLY of an empty file: %v", r.errs)
	}
	// A backup cancelled by its client: whole blocks and no end: 3241.
	stopped := []string{`\\bak01\backup\stopped_1of2.bak`, `\\bak01\backup\stopped_2of2.bak`}
	e.in.SetThrottle(4 << 20)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.db.ExecContext(ctx, "BACKUP DATABASE [Sales] TO "+disks(stopped)+" WITH INIT, FORMAT")
	}()
	waitPercent(t, e, "BACKUP DATABASE", func(p float64) bool { return p > 20 })
	cancel()
	<-done
	waitFor(t, func() bool { return lastOf(t, e.in, "BACKUP DATABASE").Outcome != "running" })
	e.in.SetThrottle(0)
	if r := mustFail(t, e.db, 3013, "RESTORE VERIFYONLY FROM "+disks(stopped)); r.errs[0].Number != 3241 {
		t.Fatalf("VERIFYONLY of a backup that stopped: %v", r.errs)
	}
}

// TestShareLostMidTransfer: the backup share goes away while a BACKUP
// writes (3202 with OS error 64, or 59 for a flaky network) or while a
// RESTORE reads (3203 with 64); opening a file there then fails with 3201.
func TestShareLostMidTransfer(t *testing.T) {
	e := newEnv(t)
	e.create(t, DatabaseSpec{Name: "Sales", Size: 8 << 20})
	const share = `\\bak01\backup`
	paths := stripeNames("Sales", 2)
	for _, tc := range []struct {
		name string
		lose func()
		want string
	}{
		{"unreachable", func() { e.in.SetShareUnreachable(share, true) }, "64(The specified network name is no longer available.)"},
		{"network error 59", func() {
			if err := e.in.SetShareNetworkError(share, 59); err != nil {
				t.Fatal(err)
			}
		}, "59(An unexpected network error occurred.)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.in.SetThrottle(4 << 20)
			bk := backgroundRun(t, e, "BACKUP DATABASE [Sales] TO "+disks(paths)+" WITH INIT, FORMAT, STATS = 10")
			waitPercent(t, e, "BACKUP DATABASE", func(p float64) bool { return p > 20 })
			tc.lose()
			r := <-bk
			if r.lastErr() != 3013 || r.errs[0].Number != 3202 || !strings.HasSuffix(r.errs[0].Message, "failed: "+tc.want) ||
				!strings.HasPrefix(r.errs[0].Message, `Write on "\\bak01\backup\Sales_`) {
				t.Fatalf("BACKUP while the share went away: %v", r.errs)
			}
			if r := mustFail(t, e.db, 3013, "RESTORE HEADERONLY FROM DISK = "+ql(paths[0])); r.errs[0].Number != 3201 {
				t.Fatalf("opening a file on the lost share: %v", r.errs)
			}
			e.in.SetShareUnreachable(share, false)
			e.in.SetShareNetworkError(share, 0)
			e.in.SetThrottle(0)
		})
	}
	mustRun(t, e.db, "BACKUP DATABASE [Sales] TO "+disks(paths)+" WITH INIT, FORMAT")
	e.in.SetThrottle(4 << 20)
	vr := backgroundRun(t, e, "RESTORE VERIFYONLY FROM "+disks(paths))
	waitPercent(t, e, "RESTORE VERIFYONLY", func(p float64) bool { return p > 20 })
	e.in.SetShareUnreachable(share, true)
	r := <-vr
	if r.lastErr() != 3013 || r.errs[0].Number != 3203 || !strings.HasSuffix(r.errs[0].Message, "failed: 64(The specified network name is no longer available.)") {
		t.Fatalf("VERIFYONLY while the share went away: %v", r.errs)
	}
	if err := e.in.SetShareNetworkError(share, 12); err == nil {
		t.Fatal("SetShareNetworkError accepted an error code it does not emulate")
	}
}

// TestRestoreSilentPhases: a RESTORE first initialises its files (no
// percent message, percent_complete 0), then copies (3211 messages up to
// 100), then recovers (after "100 percent processed." and before 3014,
// percent_complete 100). Both silent phases last in proportion to the bytes.
func TestRestoreSilentPhases(t *testing.T) {
	e := newEnv(t)
	e.create(t, DatabaseSpec{Name: "Sales", Size: 8 << 20, LogSize: 4 << 20})
	from := disks(stripeNames("Sales", 2))
	mustRun(t, e.db, "BACKUP DATABASE [Sales] TO "+from+" WITH INIT, FORMAT")
	moves := movesFor(t, e, from, "p")
	const rate = 8 << 20
	e.in.SetThrottle(rate)
	files, err := e.in.DatabaseFiles("Sales")
	if err != nil {
		t.Fatal(err)
	}
	var dataBytes, logBytes int64
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(f, ".ldf") {
			logBytes += st.Size()
		} else {
			dataBytes += st.Size()
		}
	}
	initWant := time.Duration(float64(dataBytes+logBytes) / rate * float64(time.Second))
	redoWant := time.Duration(float64(logBytes) / rate * float64(time.Second))

	var mu sync.Mutex
	var first, hundred, done time.Time
	start := time.Now()
	db := e.open(t, "master")
	res := make(chan error, 1)
	go func() {
		_, err := run(testCtx(t), db, func(m mssql.Error) {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case m.Number == 3211 && first.IsZero():
				first = time.Now()
				if strings.HasPrefix(m.Message, "100 ") {
					hundred = first
				}
			case m.Number == 3211 && strings.HasPrefix(m.Message, "100 "):
				hundred = time.Now()
			case m.Number == 3014:
				done = time.Now()
			}
		}, "RESTORE DATABASE [P] FROM "+from+" WITH "+moves+", REPLACE, STATS = 10")
		res <- err
	}()
	rec := waitRunning(t, e.in, "RESTORE DATABASE")
	// During initialisation: running, 0 %.
	time.Sleep(initWant / 3)
	if _, pct, _, ok := requestOf(t, e, rec.Session); !ok || pct != 0 {
		t.Fatalf("during file initialisation: running %v, percent %v; want 0", ok, pct)
	}
	mu.Lock()
	early := first
	mu.Unlock()
	if !early.IsZero() {
		t.Fatal("a percent message arrived during file initialisation")
	}
	// During recovery: running, 100 %.
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return !hundred.IsZero() })
	if _, pct, _, ok := requestOf(t, e, rec.Session); ok && pct != 100 {
		t.Fatalf("after 100 percent processed: percent_complete %v", pct)
	}
	if err := <-res; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	initGot, redoGot := first.Sub(start), done.Sub(hundred)
	mu.Unlock()
	if initGot < initWant*8/10 {
		t.Fatalf("first percent message after %v; file initialisation of %d bytes at %d B/s should take %v", initGot, dataBytes+logBytes, rate, initWant)
	}
	if redoGot < redoWant*8/10 {
		t.Fatalf("3014 %v after 100 percent; recovery of %d log bytes should take %v", redoGot, logBytes, redoWant)
	}
	t.Logf("initialisation %v (model %v), recovery %v (model %v)", initGot, initWant, redoGot, redoWant)

	// With instant file initialisation only the log is zeroed.
	e.in.SetInstantFileInit(true)
	var firstIFI time.Time
	start = time.Now()
	r, err := run(testCtx(t), db, func(m mssql.Error) {
		if m.Number == 3211 && firstIFI.IsZero() {
			firstIFI = time.Now()
		}
	}, "RESTORE DATABASE [P] FROM "+from+" WITH "+moves+", REPLACE, STATS = 10")
	if err != nil || len(r.errs) > 0 {
		t.Fatalf("restore with instant file initialisation: %v %v", err, r.errs)
	}
	if got, most := firstIFI.Sub(start), initWant*6/10; got > most {
		t.Fatalf("with instant file initialisation the first percent came after %v (more than %v)", got, most)
	}
}

// TestConflictingOptions: SQL Server refuses WITH options that exclude each
// other or repeat (3031 for BACKUP/RESTORE, 2559 for DBCC) before doing
// anything.
func TestConflictingOptions(t *testing.T) {
	e := newEnv(t)
	e.create(t, DatabaseSpec{Name: "Sales", Size: 2 << 20})
	p := `\\bak01\backup\opts.bak`
	for _, tc := range []struct {
		stmt string
		num  int32
		msg  string
	}{
		{"BACKUP DATABASE [Sales] TO DISK = " + ql(p) + " WITH COMPRESSION, INIT, NO_COMPRESSION", 3031,
			"Option 'no_compression' conflicts with option(s) 'compression'. Remove the conflicting option and reissue the statement."},
		{"BACKUP DATABASE [Sales] TO DISK = " + ql(p) + " WITH INIT, STATS = 5, STATS = 10", 3031,
			"Option 'stats' conflicts with option(s) 'stats'. Remove the conflicting option and reissue the statement."},
		{"RESTORE VERIFYONLY FROM DISK = " + ql(p) + " WITH CHECKSUM, NO_CHECKSUM", 3031,
			"Option 'no_checksum' conflicts with option(s) 'checksum'. Remove the conflicting option and reissue the statement."},
		{"DBCC CHECKDB([Sales]) WITH PHYSICAL_ONLY, DATA_PURITY", 2559,
			"The 'PHYSICAL_ONLY' and 'DATA_PURITY' options are not allowed on the same statement."},
		{"DBCC CHECKDB([Sales]) WITH NO_INFOMSGS, NO_INFOMSGS", 2559,
			"The 'NO_INFOMSGS' and 'NO_INFOMSGS' options are not allowed on the same statement."},
	} {
		r := mustFail(t, e.db, tc.num, tc.stmt)
		if len(r.errs) != 1 || r.errs[0].Message != tc.msg {
			t.Fatalf("%s: %v, want only %d %q", short(tc.stmt), r.errs, tc.num, tc.msg)
		}
	}
	if _, err := os.Stat(localStripe(e, p)); !os.IsNotExist(err) {
		t.Fatalf("a refused BACKUP created its file: %v", err)
	}
	mustRun(t, e.db, "DBCC CHECKDB([Sales]) WITH PHYSICAL_ONLY, NO_INFOMSGS")
}

// TestEditionCompression: Express and Web refuse BACKUP WITH COMPRESSION
// (1844 then 3013); without the option nothing is compressed; Standard
// compresses.
func TestEditionCompression(t *testing.T) {
	for _, tc := range []struct {
		edition, name string
		refuses       bool
	}{
		{"Express", "Express Edition (64-bit)", true},
		{"Web", "Web Edition (64-bit)", true},
		{"Standard", "Standard Edition (64-bit)", false},
	} {
		t.Run(tc.edition, func(t *testing.T) {
			e := newEnv(t, func(c *Config) { c.Edition = tc.edition })
			e.create(t, DatabaseSpec{Name: "Sales", Size: 2 << 20})
			p := `\\bak01\backup\ed.bak`
			stmt := "BACKUP DATABASE [Sales] TO DISK = " + ql(p) + " WITH INIT, FORMAT, COMPRESSION"
			if tc.refuses {
				r := mustFail(t, e.db, 3013, stmt)
				want := "BACKUP DATABASE WITH COMPRESSION is not supported on " + tc.name + "."
				if r.errs[0].Number != 1844 || r.errs[0].Message != want {
					t.Fatalf("COMPRESSION on %s: %v, want 1844 %q", tc.edition, r.errs, want)
				}
				mustRun(t, e.db, "BACKUP DATABASE [Sales] TO DISK = "+ql(p)+" WITH INIT, FORMAT")
			} else {
				mustRun(t, e.db, stmt)
			}
			r := mustRun(t, e.db, "RESTORE HEADERONLY FROM DISK = "+ql(p))
			if compressed := r.rows[0][4].(bool); compressed == tc.refuses {
				t.Fatalf("HEADERONLY Compressed = %v on %s", compressed, tc.edition)
			}
		})
	}
}

// TestServerLocalDates: HEADERONLY's BackupStartDate/BackupFinishDate and
// the msdb dates are datetime in the server's time zone, without a zone.
func TestServerLocalDates(t *testing.T) {
	zone := time.FixedZone("UTC+0530", 5*3600+1800)
	e := newEnv(t, func(c *Config) { c.TimeZone = zone })
	e.create(t, DatabaseSpec{Name: "Sales", Size: 2 << 20})
	from := disks(stripeNames("Sales", 1))
	before := time.Now()
	mustRun(t, e.db, "BACKUP DATABASE [Sales] TO "+from+" WITH INIT, FORMAT, NAME = N'tz'")
	mustRun(t, e.db, "RESTORE DATABASE [Z] FROM "+from+" WITH "+movesFor(t, e, from, "z")+", REPLACE")
	after := time.Now()
	// The driver labels a datetime UTC; its wall clock must be the server's.
	inZone := func(got time.Time) bool {
		w := func(t time.Time) time.Time {
			l := t.In(zone)
			return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), l.Second(), l.Nanosecond(), time.UTC)
		}
		return !got.Before(w(before).Add(-time.Second)) && !got.After(w(after).Add(time.Second))
	}
	h := mustRun(t, e.db, "RESTORE HEADERONLY FROM "+from)
	col := func(name string) int {
		for i, c := range h.cols {
			if c == name {
				return i
			}
		}
		t.Fatalf("HEADERONLY has no %s", name)
		return -1
	}
	for _, c := range []string{"BackupStartDate", "BackupFinishDate"} {
		if got := h.rows[0][col(c)].(time.Time); !inZone(got) {
			t.Fatalf("HEADERONLY %s = %v, want the server's wall clock (%v..%v in %v)", c, got, before.In(zone), after.In(zone), zone)
		}
	}
	r := mustRun(t, e.db, "SELECT backup_start_date, backup_finish_date FROM msdb.dbo.backupset WHERE name = N'tz'")
	for i := range 2 {
		if got := r.rows[0][i].(time.Time); !inZone(got) {
			t.Fatalf("msdb.dbo.backupset date %d = %v, want the server's wall clock", i, got)
		}
	}
	r = mustRun(t, e.db, "SELECT restore_date FROM msdb.dbo.restorehistory WHERE destination_database_name = N'Z'")
	if got := r.rows[0][0].(time.Time); !inZone(got) {
		t.Fatalf("restorehistory.restore_date = %v, want the server's wall clock", got)
	}
}

// TestBatchContinuesAfterError: a severity-16 error ends only its
// statement; the rest of the batch runs. A syntax error runs nothing; an
// unknown object aborts the batch where it occurs.
func TestBatchContinuesAfterError(t *testing.T) {
	e := newEnv(t)
	r, err := run(testCtx(t), e.db, nil, "SELECT 1/0; SELECT 2")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r.events, ","); got != "error:8134,row" || asInt(r.rows[0][0]) != 2 {
		t.Fatalf("SELECT 1/0; SELECT 2: events %s rows %v", got, r.rows)
	}
	// database/sql sees the failure.
	if _, err := e.db.ExecContext(testCtx(t), "SELECT 1/0; SELECT 2"); errNumber(err) != 8134 {
		t.Fatalf("Exec of a batch with a failed statement: %v", err)
	}
	// A failed BACKUP does not stop the batch either.
	r, err = run(testCtx(t), e.db, nil, "BACKUP DATABASE [Nope] TO DISK = N'x.bak'; SELECT 5")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r.events, ","); got != "error:911,error:3013,row" {
		t.Fatalf("failed BACKUP then SELECT: events %s", got)
	}
	if got := statementsOf(e.in, "SELECT"); got[len(got)-1].Outcome != "ok" {
		t.Fatalf("the SELECT after the failed BACKUP: %+v", got[len(got)-1])
	}
	// Compile errors: nothing runs.
	r = mustFail(t, e.db, 102, "SELECT 3; SELEC 4")
	if len(r.rows) != 0 {
		t.Fatalf("a batch with a syntax error returned rows %v", r.rows)
	}
	// Name resolution aborts the batch where it occurs.
	r, err = run(testCtx(t), e.db, nil, "SELECT 6; SELECT * FROM dbo.Nope; SELECT 7")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r.events, ","); got != "row,error:208" {
		t.Fatalf("SELECT; unknown table; SELECT: events %s", got)
	}
	// Inside BEGIN ... END too.
	r, err = run(testCtx(t), e.db, nil, "IF 1 = 1 BEGIN SELECT 1/0; SELECT 8 END")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r.events, ","); got != "error:8134,row" {
		t.Fatalf("block: events %s", got)
	}
}

// TestIdentifierLength: identifiers and names of at most 128 characters
// work; longer ones fail with 103 (as identifiers in the text: nothing of
// the batch runs; as values of BACKUP/RESTORE: then 3013). A database whose
// generated logical file names would pass 128 cannot be created.
func TestIdentifierLength(t *testing.T) {
	e := newEnv(t)
	long := strings.Repeat("n", 128)
	tooLong := long + "x"
	want103 := "The identifier that starts with '" + long + "' is too long. Maximum length is 128."
	r := mustFail(t, e.db, 103, "SELECT 1 AS "+qi(tooLong))
	if r.errs[0].Message != want103 {
		t.Fatalf("103 text %q", r.errs[0].Message)
	}
	mustRun(t, e.db, "SELECT 1 AS "+qi(long))
	if r := mustFail(t, e.db, 103, "SELECT 1; BACKUP DATABASE "+qi(tooLong)+" TO DISK = N'x.bak'"); len(r.rows) != 0 {
		t.Fatal("a batch with a too long identifier ran its first statement")
	}

	if err := e.in.CreateDatabase(DatabaseSpec{Name: long, Size: 1 << 20}); err == nil || !strings.Contains(err.Error(), "LogicalName") {
		t.Fatalf("CreateDatabase of a 128-character name with generated logical names: %v", err)
	}
	if err := e.in.CreateDatabase(DatabaseSpec{Name: tooLong, Size: 1 << 20, LogicalName: "d"}); err == nil {
		t.Fatal("CreateDatabase accepted a 129-character name")
	}
	e.create(t, DatabaseSpec{Name: long, Size: 1 << 20, LogicalName: "d"})
	p := `\\bak01\backup\long.bak`
	mustRun(t, e.db, "BACKUP DATABASE "+qi(long)+" TO DISK = @p1 WITH INIT, FORMAT", p)
	for _, row := range mustRun(t, e.db, "RESTORE FILELISTONLY FROM DISK = @p1", p).rows {
		if n := len(row[0].(string)); n > 128 {
			t.Fatalf("logical name of %d characters", n)
		}
	}
	r = mustFail(t, e.db, 3013, "RESTORE DATABASE @p1 FROM DISK = @p2 WITH MOVE N'd' TO N'R:\\restore\\l1.mdf', MOVE N'd_log' TO N'R:\\restore\\l1.ldf'", tooLong, p)
	if r.errs[0].Number != 103 {
		t.Fatalf("RESTORE DATABASE of a 129-character name: %v", r.errs)
	}
	r = mustFail(t, e.db, 3013, "RESTORE DATABASE [L] FROM DISK = @p1 WITH MOVE @p2 TO N'R:\\restore\\l2.mdf'", p, tooLong)
	if r.errs[0].Number != 103 {
		t.Fatalf("MOVE of a 129-character logical name: %v", r.errs)
	}
	if r := mustFail(t, e.db, 3013, "BACKUP DATABASE @p1 TO DISK = @p2 WITH INIT, FORMAT", tooLong, p); r.errs[0].Number != 103 {
		t.Fatalf("BACKUP DATABASE of a 129-character name: %v", r.errs)
	}
	mustRun(t, e.db, "RESTORE DATABASE @p1 FROM DISK = @p2 WITH MOVE N'd' TO N'R:\\restore\\l3.mdf', MOVE N'd_log' TO N'R:\\restore\\l3.ldf', REPLACE", long, p)
	if _, err := os.Stat(filepath.Join(e.restoreDir, "l3.mdf")); err != nil {
		t.Fatal(err)
	}
}
