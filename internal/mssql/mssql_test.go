package mssql

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/sitetest"
	"github.com/backupcycle/backupcycle/internal/sqlsim/tds"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// scripted is a TDS handler answering each statement from a script: the
// real go-mssqldb driver talks real TDS to it, so what these tests check is
// what the package does with real driver behaviour (messages, errors,
// dropped connections), without the full emulator.
type scripted struct {
	mu      sync.Mutex
	seen    []string
	answers map[string]func(ctx context.Context, req tds.Request, w tds.ResultWriter) error
}

func (h *scripted) Login(_ context.Context, l tds.Login) (tds.Session, error) {
	if l.User != "sa" || l.Password != "p'w ö" {
		return nil, &tds.Error{Number: 18456, Class: 14, State: 1, Message: "Login failed for user '" + l.User + "'."}
	}
	if l.Database != "" && l.Database != "master" && l.Database != "Sales" {
		return nil, &tds.Error{Number: 4060, Class: 11, State: 1,
			Message: "Cannot open database \"" + l.Database + "\" requested by the login. The login failed."}
	}
	return &session{h: h, db: l.Database}, nil
}

type session struct {
	h  *scripted
	db string
}

func (s *session) Database() string { return s.db }
func (s *session) Reset()           {}
func (s *session) Close()           {}

func (s *session) Exec(ctx context.Context, req tds.Request, w tds.ResultWriter) error {
	s.h.mu.Lock()
	s.h.seen = append(s.h.seen, req.SQL)
	s.h.mu.Unlock()
	if req.SQL == tsql.SetLanguageEnglish { // every session's first batch (Target.connector)
		return w.StatementDone(tds.CmdSelect, 0, false)
	}
	if strings.HasPrefix(strings.ToLower(req.SQL), "select 1") { // ping
		if err := w.Columns([]tds.Column{{Name: "", Type: tds.TypeInt}}); err != nil {
			return err
		}
		if err := w.Row(int64(1)); err != nil {
			return err
		}
		return w.StatementDone(tds.CmdSelect, 1, true)
	}
	for prefix, fn := range s.h.answers {
		if strings.HasPrefix(req.SQL, prefix) {
			return fn(ctx, req, w)
		}
	}
	return &tds.Error{Number: 102, Class: 15, State: 1, Message: "Incorrect syntax near '" + req.SQL + "'."}
}

func startScripted(t *testing.T, answers map[string]func(context.Context, tds.Request, tds.ResultWriter) error) (*scripted, *tds.Server, Target) {
	t.Helper()
	h := &scripted{answers: answers}
	srv := tds.NewServer(h, tds.Options{ServerName: "sql01"}, nil)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return h, srv, Target{Instance: "sql01", Address: l.Addr().String(), User: "sa", Password: "p'w ö",
		Database: "master", Encrypt: "disable", ConnectTimeout: 5 * time.Second}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// backupOK streams progress like SQL Server: 3211 every 10 %, then 3014.
func backupOK(_ context.Context, _ tds.Request, w tds.ResultWriter) error {
	for p := 10; p <= 100; p += 10 {
		if err := w.Info(3211, 0, strconv.Itoa(p)+" percent processed."); err != nil {
			return err
		}
	}
	if err := w.Info(4035, 0, "Processed 1024 pages for database 'Sales', file 'Sales' on file 1."); err != nil {
		return err
	}
	return w.Info(3014, 0, "BACKUP DATABASE successfully processed 1030 pages in 0.125 seconds (64.375 MB/sec).")
}

func TestRunStreamsProgressAndSummary(t *testing.T) {
	_, _, target := startScripted(t, map[string]func(context.Context, tds.Request, tds.ResultWriter) error{
		"BACKUP DATABASE": backupOK,
	})
	db, err := Open(testCtx(t), target)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var percents []int
	res, err := db.Run(testCtx(t), "BACKUP DATABASE", "BACKUP DATABASE [Sales] TO DISK = N'x'", func(m Message) {
		if m.Percent >= 0 {
			percents = append(percents, m.Percent)
		}
	})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if len(percents) != 10 || percents[0] != 10 || percents[9] != 100 || res.Percent != 100 {
		t.Errorf("percents %v (last %d), want 10..100", percents, res.Percent)
	}
	if res.Summary == nil || res.Summary.Pages != 1030 || res.Summary.Seconds != 0.125 || res.Summary.MBps != 64.375 ||
		res.Summary.Operation != "BACKUP DATABASE" || res.Summary.Bytes() != 1030*8192 {
		t.Errorf("summary %+v, want 1030 pages in 0.125 s at 64.375 MB/s", res.Summary)
	}
}

func TestRunClassifiesErrors(t *testing.T) {
	fail := func(errs ...*tds.Error) func(context.Context, tds.Request, tds.ResultWriter) error {
		return func(_ context.Context, _ tds.Request, w tds.ResultWriter) error {
			if err := w.Info(3211, 0, "10 percent processed."); err != nil {
				return err
			}
			for _, e := range errs[:len(errs)-1] {
				if err := w.Error(e); err != nil {
					return err
				}
			}
			return errs[len(errs)-1]
		}
	}
	term := &tds.Error{Number: 3013, Class: 16, State: 1, Message: "BACKUP DATABASE is terminating abnormally."}
	rterm := &tds.Error{Number: 3013, Class: 16, State: 1, Message: "RESTORE DATABASE is terminating abnormally."}
	answers := map[string]func(context.Context, tds.Request, tds.ResultWriter) error{
		"UNREACHABLE": fail(&tds.Error{Number: 3201, Class: 16, Message: `Cannot open backup device '\\bak01\backup\S_1of1.bak'. Operating system error 53(The network path was not found.).`}, term),
		"FULL":        fail(&tds.Error{Number: 3202, Class: 16, Message: `Write on "\\bak01\backup\S_1of1.bak" failed: 112(There is not enough space on the disk.)`}, term),
		"CORRUPT":     fail(&tds.Error{Number: 3183, Class: 16, Message: "RESTORE detected an error on page (1:153) in database \"Sales_verify\" as read from the backup set."}, rterm),
		"CHECKSUM":    fail(&tds.Error{Number: 3189, Class: 16, Message: "Damage to the backup set was detected."}, rterm),
		"MEMORY":      fail(&tds.Error{Number: 701, Class: 17, Message: "There is insufficient system memory in resource pool 'default' to run this query."}, term),
		"CHECKDB": fail(&tds.Error{Number: 8928, Class: 16, Message: "Object ID 581577110, index ID 1, partition ID 72057594043236352: Page (1:153) could not be processed."},
			&tds.Error{Number: 8939, Class: 16, Message: "Table error: page (1:153) failed check."}),
		"SOURCEPAGE": fail(&tds.Error{Number: 3043, Class: 16, Message: "BACKUP 'Sales' detected an error on page (1:153) in file 'D:\\data\\Sales.mdf'."}, term),
		"NOPATH":     fail(&tds.Error{Number: 3201, Class: 16, Message: `Cannot open backup device '\\bak01\nodir\S_1of1.bak'. Operating system error 3(The system cannot find the path specified.).`}, term),
		"NOFILE":     fail(&tds.Error{Number: 3201, Class: 16, Message: `Cannot open backup device '\\bak02\backup\S_2of2.bak'. Operating system error 2(The system cannot find the file specified.).`}, rterm),
		"NODB":       fail(&tds.Error{Number: 911, Class: 16, Message: "Database 'Nope' does not exist. Make sure that the name is entered correctly."}),
		"SYNTAX":     fail(&tds.Error{Number: 102, Class: 15, Message: "Incorrect syntax near 'x'."}),
		// An error that is not the request's last word still fails it.
		"SOFT": func(_ context.Context, _ tds.Request, w tds.ResultWriter) error {
			return w.Error(&tds.Error{Number: 50000, Class: 16, Message: "something went wrong"})
		},
	}
	_, _, target := startScripted(t, answers)
	db, err := Open(testCtx(t), target)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for stmt, want := range map[string]error{
		"UNREACHABLE": ErrBackupTargetUnreachable, "FULL": ErrShareFull, "CORRUPT": ErrCorruptBackup,
		"CHECKSUM": ErrCorruptBackup, "MEMORY": ErrInsufficientMemory, "CHECKDB": ErrCheckDBFailed,
		"NODB": ErrDatabaseNotFound, "SYNTAX": ErrStatement, "SOURCEPAGE": ErrSourceDamaged,
		"NOPATH": ErrBackupPathInvalid, "NOFILE": ErrCorruptBackup, "SOFT": ErrStatement,
	} {
		t.Run(stmt, func(t *testing.T) {
			_, err := db.Run(testCtx(t), "op", stmt+" now", nil) // a bare word would go as an RPC
			if !errors.Is(err, want) {
				t.Fatalf("error %v, want kind %v", err, want)
			}
			var f *Failure
			if !errors.As(err, &f) || len(f.Errors) == 0 || !strings.Contains(err.Error(), "sql01") {
				t.Fatalf("error %v should be a *Failure naming the instance with the SQL errors", err)
			}
		})
	}
	// Both messages of a device failure are kept, in order.
	_, err = db.Run(testCtx(t), "BACKUP DATABASE", "UNREACHABLE now", nil)
	var f *Failure
	if errors.As(err, &f) {
		if n := f.Numbers(); len(n) != 2 || n[0] != 3201 || n[1] != 3013 || !f.Retryable() {
			t.Errorf("numbers %v retryable %v, want [3201 3013] retryable", n, f.Retryable())
		}
	}
}

func TestOpenClassifiesLoginAndDatabase(t *testing.T) {
	_, _, target := startScripted(t, nil)
	bad := target
	bad.Password = "wrong"
	if _, err := Open(testCtx(t), bad); !errors.Is(err, ErrLoginFailed) || strings.Contains(err.Error(), "wrong") {
		t.Errorf("wrong password: %v, want LoginFailed without the password", err)
	}
	nodb := target
	nodb.Database = "Nope"
	if _, err := Open(testCtx(t), nodb); !errors.Is(err, ErrDatabaseUnavailable) {
		t.Errorf("database that cannot be opened (4060): %v, want DatabaseUnavailable", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := target
	closed.Address = l.Addr().String()
	l.Close() // nothing listens there any more
	if _, err := Open(testCtx(t), closed); !errors.Is(err, ErrUnreachable) {
		t.Errorf("closed port: %v, want Unreachable", err)
	}
	noport := target
	noport.Address = "sql01"
	if _, err := Open(testCtx(t), noport); !errors.Is(err, ErrInvalidTarget) || !strings.Contains(err.Error(), "host:port") {
		t.Errorf("address without port: %v, want InvalidTarget explaining host:port", err)
	}
}

// A host that dies mid-BACKUP: the progress seen so far is reported and the
// error says the instance is unreachable (retry with a new sequence).
func TestRunConnectionLostMidStatement(t *testing.T) {
	_, _, target := startScripted(t, map[string]func(context.Context, tds.Request, tds.ResultWriter) error{
		"BACKUP": func(_ context.Context, _ tds.Request, w tds.ResultWriter) error {
			for p := 10; p <= 40; p += 10 {
				if err := w.Info(3211, 0, strconv.Itoa(p)+" percent processed."); err != nil {
					return err
				}
			}
			return tds.ErrKillConnection
		},
	})
	db, err := Open(testCtx(t), target)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	res, err := db.Run(testCtx(t), "BACKUP DATABASE", "BACKUP DATABASE [Sales]", nil)
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("error %v, want Unreachable", err)
	}
	if res.Percent != 40 {
		t.Errorf("last percent %d, want 40", res.Percent)
	}
}

// A connection dropped before the first reply packet: the driver queues no
// message at all; Run must still return (and say the host is unreachable).
func TestRunConnectionLostBeforeAnyReply(t *testing.T) {
	_, _, target := startScripted(t, map[string]func(context.Context, tds.Request, tds.ResultWriter) error{
		"BACKUP": func(context.Context, tds.Request, tds.ResultWriter) error { return tds.ErrKillConnection },
	})
	db, err := Open(testCtx(t), target)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = db.Run(ctx, "BACKUP DATABASE", "BACKUP DATABASE [Sales]", nil)
	if !errors.Is(err, ErrUnreachable) || ctx.Err() != nil || !strings.Contains(err.Error(), "lost") {
		t.Fatalf("error %v (ctx %v), want Unreachable saying the connection was lost, at once", err, ctx.Err())
	}
}

// Pings failing on other connections (a network blip, a listener that
// refuses new connections) never end a statement whose own connection is
// healthy: it runs to its end.
func TestRunLostPingsDoNotCancel(t *testing.T) {
	release := make(chan struct{})
	h := &scripted{answers: map[string]func(context.Context, tds.Request, tds.ResultWriter) error{
		"BACKUP": func(ctx context.Context, _ tds.Request, w tds.ResultWriter) error {
			if err := w.Info(3211, 0, "10 percent processed."); err != nil {
				return err
			}
			select { // silent, connection open, no new connection possible
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
			return w.Info(3014, 0, "BACKUP DATABASE successfully processed 100 pages in 1.000 seconds (0.781 MB/sec).")
		},
	}}
	srv := tds.NewServer(h, tds.Options{ServerName: "sql01"}, nil)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	target := Target{Instance: "sql01", Address: l.Addr().String(), User: "sa", Password: "p'w ö", Database: "master",
		Encrypt: "disable", ConnectTimeout: 2 * time.Second}
	db, err := Open(testCtx(t), target)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	go func() {
		time.Sleep(100 * time.Millisecond)
		_ = l.Close() // new connections (pings) now fail; the BACKUP's stays
		pctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		for i := 0; i < 3; i++ { // three failed pings, as a liveness check would see them
			db.SetMaxIdleConns(0)
			if err := db.PingContext(pctx); err == nil {
				t.Errorf("ping %d succeeded with the listener closed", i+1)
			}
		}
		time.Sleep(300 * time.Millisecond)
		close(release)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := db.Run(ctx, "BACKUP DATABASE", "BACKUP DATABASE [Sales]", nil)
	if err != nil || res.Summary == nil || res.Summary.Pages != 100 {
		t.Fatalf("BACKUP with failing pings: %v (summary %+v); want it to run to its end", err, res.Summary)
	}
}

func TestHeaderAndFileListScanByName(t *testing.T) {
	start := time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)
	_, _, target := startScripted(t, map[string]func(context.Context, tds.Request, tds.ResultWriter) error{
		"RESTORE HEADERONLY": func(_ context.Context, _ tds.Request, w tds.ResultWriter) error {
			// Columns in an order of their own, plus one this package does not know.
			cols := []tds.Column{
				{Name: "BackupName", Type: tds.TypeNVarChar, Size: 128, Nullable: true},
				{Name: "SomethingNew", Type: tds.TypeInt},
				{Name: "DatabaseName", Type: tds.TypeNVarChar, Size: 128},
				{Name: "BackupType", Type: tds.TypeTinyInt},
				{Name: "FirstLSN", Type: tds.TypeNumeric, Precision: 25},
				{Name: "LastLSN", Type: tds.TypeNumeric, Precision: 25},
				{Name: "BackupSize", Type: tds.TypeNumeric, Precision: 20},
				{Name: "CompressedBackupSize", Type: tds.TypeBigInt},
				{Name: "BackupStartDate", Type: tds.TypeDateTime},
				{Name: "BackupFinishDate", Type: tds.TypeDateTime},
				{Name: "HasBackupChecksums", Type: tds.TypeBit},
				{Name: "Compressed", Type: tds.TypeBit},
				{Name: "BackupSetGUID", Type: tds.TypeUniqueIdentifier},
			}
			if err := w.Columns(cols); err != nil {
				return err
			}
			guid := [16]byte{0x6F, 0x9A, 0x2B, 0x10, 0x3C, 0x4D, 0x4E, 0x5F, 0x80, 0x91, 0xA2, 0xB3, 0xC4, 0xD5, 0xE6, 0xF7}
			if err := w.Row(nil, int64(9), "Sales]; DROP DATABASE x--", int64(1), "34000000012300037", "34000000045600001",
				int64(8437760), int64(2109440), start, start.Add(90*time.Second), true, true, guid); err != nil {
				return err
			}
			return w.StatementDone(tds.CmdSelect, 1, true)
		},
		"RESTORE FILELISTONLY": func(_ context.Context, _ tds.Request, w tds.ResultWriter) error {
			cols := []tds.Column{
				{Name: "LogicalName", Type: tds.TypeNVarChar, Size: 128},
				{Name: "PhysicalName", Type: tds.TypeNVarChar, Size: 260},
				{Name: "Type", Type: tds.TypeChar, Size: 1},
				{Name: "FileGroupName", Type: tds.TypeNVarChar, Size: 128, Nullable: true},
				{Name: "Size", Type: tds.TypeNumeric, Precision: 20},
				{Name: "FileID", Type: tds.TypeBigInt},
			}
			if err := w.Columns(cols); err != nil {
				return err
			}
			if err := w.Row("Sales'data", `D:\data\Sales.mdf`, "D", "PRIMARY", int64(104857600), int64(1)); err != nil {
				return err
			}
			if err := w.Row("Sales_log", `L:\log\Sales.ldf`, "L", nil, int64(8388608), int64(2)); err != nil {
				return err
			}
			return w.StatementDone(tds.CmdSelect, 2, true)
		},
	})
	db, err := Open(testCtx(t), target)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	hs, err := db.HeaderOnly(testCtx(t), "RESTORE HEADERONLY FROM DISK = N'x'")
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 1 {
		t.Fatalf("%d headers, want 1", len(hs))
	}
	h := hs[0]
	if h.DatabaseName != "Sales]; DROP DATABASE x--" || h.BackupType != 1 || h.FirstLSN != "34000000012300037" ||
		h.LastLSN != "34000000045600001" || h.BackupSize != 8437760 || h.CompressedBackupSize != 2109440 ||
		!h.BackupStartDate.Equal(start) || !h.BackupFinishDate.Equal(start.Add(90*time.Second)) ||
		!h.HasBackupChecksums || !h.Compressed || h.BackupName != "" {
		t.Errorf("header %+v does not match the row sent", h)
	}
	if h.BackupSetGUID != "6F9A2B10-3C4D-4E5F-8091-A2B3C4D5E6F7" {
		t.Errorf("BackupSetGUID %q, want 6F9A2B10-3C4D-4E5F-8091-A2B3C4D5E6F7", h.BackupSetGUID)
	}
	fl, err := db.FileListOnly(testCtx(t), "RESTORE FILELISTONLY FROM DISK = N'x'")
	if err != nil {
		t.Fatal(err)
	}
	if len(fl) != 2 || fl[0].LogicalName != "Sales'data" || fl[0].Type != "D" || fl[0].Size != 104857600 ||
		fl[0].FileGroupName != "PRIMARY" || fl[1].Type != "L" || fl[1].FileID != 2 || fl[1].PhysicalName != `L:\log\Sales.ldf` {
		t.Errorf("file list %+v does not match the rows sent", fl)
	}
}

func TestRequestsAndRestoreHistory(t *testing.T) {
	started := time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	polls := 0
	_, _, target := startScripted(t, map[string]func(context.Context, tds.Request, tds.ResultWriter) error{
		"SELECT session_id": func(_ context.Context, req tds.Request, w tds.ResultWriter) error {
			if len(req.Params) == 0 || req.Params[0].Value != "Sales]x" {
				return &tds.Error{Number: 50000, Class: 16, Message: "database parameter not passed"}
			}
			if err := w.Columns([]tds.Column{
				{Name: "session_id", Type: tds.TypeSmallInt}, {Name: "command", Type: tds.TypeNVarChar, Size: 32},
				{Name: "percent_complete", Type: tds.TypeReal}, {Name: "database_id", Type: tds.TypeInt},
				{Name: "estimated_completion_time", Type: tds.TypeBigInt}, {Name: "start_time", Type: tds.TypeDateTime},
			}); err != nil {
				return err
			}
			mu.Lock()
			polls++
			n := polls
			mu.Unlock()
			if n <= 2 { // the statement runs for two polls, then it is gone
				_ = w.Row(int64(53), "BACKUP DATABASE", 20.0*float64(n), int64(7), int64(1000), started)
			}
			return w.StatementDone(tds.CmdSelect, 1, true)
		},
		"SELECT TOP (1) restore_history_id": func(_ context.Context, req tds.Request, w tds.ResultWriter) error {
			if err := w.Columns([]tds.Column{
				{Name: "restore_history_id", Type: tds.TypeInt}, {Name: "restore_date", Type: tds.TypeDateTime},
				{Name: "destination_database_name", Type: tds.TypeNVarChar, Size: 128}, {Name: "restore_type", Type: tds.TypeChar, Size: 1},
			}); err != nil {
				return err
			}
			if req.Params[0].Value == "Sales_verify" {
				_ = w.Row(int64(12), started, "Sales_verify", "D")
			}
			return w.StatementDone(tds.CmdSelect, 1, true)
		},
	})
	db, err := Open(testCtx(t), target)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	q, args, err := tsql.InFlightRequests("Sales]x", tsql.CommandBackupDatabase)
	if err != nil {
		t.Fatal(err)
	}
	reqs, err := db.Requests(testCtx(t), q, args...)
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 1 || reqs[0].SessionID != 53 || reqs[0].Command != "BACKUP DATABASE" || reqs[0].Percent != 20 ||
		reqs[0].DatabaseID != 7 || !reqs[0].StartTime.Equal(started) {
		t.Fatalf("requests %+v, want session 53 BACKUP DATABASE at 20 %%", reqs)
	}
	var seen []float64
	if err := db.WaitRequest(testCtx(t), 53, time.Millisecond, func(p float64) { seen = append(seen, p) }, q, args...); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 || seen[0] != 40 {
		t.Errorf("progress while waiting %v, want [40] (poll 2; poll 3 finds it gone)", seen)
	}

	q, args, err = tsql.LastRestore("Sales_verify")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := db.LastRestore(testCtx(t), q, args...)
	if err != nil || rec == nil || rec.ID != 12 || rec.Type != "D" || !rec.RestoreDate.Equal(started) {
		t.Fatalf("last restore %+v, %v; want id 12", rec, err)
	}
	q, args, _ = tsql.LastRestore("Other")
	if rec, err := db.LastRestore(testCtx(t), q, args...); err != nil || rec != nil {
		t.Errorf("last restore of a database never restored: %+v, %v; want none", rec, err)
	}
}

func TestTargetNeverShowsPassword(t *testing.T) {
	tg := Target{Instance: "sql01", Address: "10.0.0.1:1433", User: "sa", Password: "s3cret"}
	if s := tg.String(); strings.Contains(s, "s3cret") || !strings.Contains(s, "sql01") {
		t.Errorf("String() = %q", s)
	}
}

// A server that takes the connection and never answers the prelogin:
// Open gives up after the connect timeout (go-mssqldb alone would wait
// forever) and says the instance is unreachable.
func TestOpenGivesUpOnASilentServer(t *testing.T) {
	target := Target{Instance: "verify01", Address: sitetest.SilentServer(t), User: "sa", Password: "x", Database: "master",
		Encrypt: "disable", ConnectTimeout: time.Second}
	type result struct {
		err  error
		took time.Duration
	}
	done := make(chan result, 1)
	go func() {
		began := time.Now()
		db, err := Open(testCtx(t), target)
		if db != nil {
			_ = db.Close()
		}
		done <- result{err, time.Since(began)}
	}()
	select {
	case r := <-done:
		if !errors.Is(r.err, ErrUnreachable) {
			t.Errorf("silent server: %v, want Unreachable", r.err)
		}
		if r.took > 3*time.Second {
			t.Errorf("Open gave up after %s, want about the connect timeout (1s)", r.took)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Open still waits for the prelogin reply of a silent server after 10s (connect timeout 1s)")
	}
}

// The login's deadline is lifted once the login is in: a statement on the
// pool's connection may take longer than the connect timeout.
func TestOpenLoginDeadlineLifted(t *testing.T) {
	_, _, target := startScripted(t, map[string]func(context.Context, tds.Request, tds.ResultWriter) error{
		"SELECT 2": func(ctx context.Context, _ tds.Request, w tds.ResultWriter) error {
			time.Sleep(2 * time.Second)
			return w.StatementDone(tds.CmdSelect, 0, false)
		},
	})
	target.ConnectTimeout = time.Second
	db, err := Open(testCtx(t), target)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // the connection the login check dialled
	if _, err := db.ExecContext(testCtx(t), "SELECT 2"); err != nil {
		t.Errorf("a 2s statement after a 1s connect timeout: %v", err)
	}
}
