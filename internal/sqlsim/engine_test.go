package sqlsim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/sqlsim/tds"
)

// recorder is a tds.ResultWriter that keeps what the engine wrote.
type recorder struct {
	infos []string
	cols  [][]tds.Column
	rows  [][]any
	dones int
}

func (r *recorder) Info(n int32, _ uint8, msg string) error {
	r.infos = append(r.infos, fmt.Sprintf("%d:%s", n, msg))
	return nil
}
func (r *recorder) Error(*tds.Error) error                  { return nil }
func (r *recorder) Columns(c []tds.Column) error            { r.cols = append(r.cols, c); return nil }
func (r *recorder) Row(v ...any) error                      { r.rows = append(r.rows, v); return nil }
func (r *recorder) StatementDone(uint16, int64, bool) error { r.dones++; return nil }
func (r *recorder) Flush() error                            { return nil }

func engineSession(t *testing.T) (*Instance, tds.Session) {
	t.Helper()
	in, err := New(Config{DataDir: filepath.Join(t.TempDir(), "data"), Logins: map[string]string{"sa": "pw"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := in.CreateDatabase(DatabaseSpec{Name: "Sales", Size: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	s, err := in.Login(context.Background(), tds.Login{User: "sa", Password: "pw", SPID: 51, RemoteAddr: &net.TCPAddr{}})
	if err != nil {
		t.Fatal(err)
	}
	return in, s
}

func TestLexer(t *testing.T) {
	toks, err := lex(`SELECT [a]]b], N'it''s', 'x', "q""d", @p1, @@VERSION, 12, 1.5 -- comment
	/* block /* nested */ */ FROM t;`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tk := range toks {
		got = append(got, fmt.Sprintf("%d:%s", tk.kind, tk.text))
	}
	want := "[1:SELECT 2:a]b 7:, 3:it's 7:, 3:x 7:, 2:q\"d 7:, 5:@p1 7:, 6:@@VERSION 7:, 4:12 7:, 4:1.5 1:FROM 1:t 7:; 0:]"
	if fmt.Sprint(got) != want {
		t.Fatalf("tokens\n%v\nwant\n%v", got, want)
	}
	for _, bad := range []string{"SELECT 'open", "SELECT [open", "/* open", "SELECT \x01"} {
		if _, err := lex(bad); err == nil {
			t.Errorf("lex(%q) accepted", bad)
		}
	}
}

// TestEngineExec drives the engine without the wire protocol.
func TestEngineExec(t *testing.T) {
	_, s := engineSession(t)
	ctx := context.Background()
	r := &recorder{}
	if err := s.Exec(ctx, tds.Request{SQL: "SELECT name, database_id FROM sys.databases WHERE name = @db", Params: []tds.Param{{Name: "@db", Value: "SALES"}}, RPC: true}, r); err != nil {
		t.Fatal(err)
	}
	if len(r.rows) != 1 || r.rows[0][0] != "Sales" || r.rows[0][1] != int64(5) || r.cols[0][1].Type != tds.TypeInt {
		t.Fatalf("rows %v cols %v", r.rows, r.cols)
	}
	r = &recorder{}
	if err := s.Exec(ctx, tds.Request{SQL: "USE [Sales]; SELECT DB_NAME(), COUNT_BIG(*) FROM Orders"}, r); err != nil {
		t.Fatal(err)
	}
	if s.Database() != "Sales" || r.rows[0][0] != "Sales" || r.infos[0] != "5701:Changed database context to 'Sales'." {
		t.Fatalf("after USE: db %s rows %v infos %v", s.Database(), r.rows, r.infos)
	}
	s.Reset()
	if s.Database() != "master" {
		t.Fatalf("Reset left database %s", s.Database())
	}
	r = &recorder{}
	err := s.Exec(ctx, tds.Request{SQL: "SELECT COUNT_BIG(*) FROM Orders"}, r)
	var te *tds.Error
	if !errors.As(err, &te) || te.Number != 208 || te.Message != "Invalid object name 'Orders'." {
		t.Fatalf("in master: %v", err)
	}
	r = &recorder{}
	err = s.Exec(ctx, tds.Request{SQL: "SELECT @nope"}, r)
	if !errors.As(err, &te) || te.Number != 137 {
		t.Fatalf("undeclared variable: %v", err)
	}
	r = &recorder{}
	if err := s.Exec(ctx, tds.Request{SQL: "SELECT name FROM sys.databases WHERE name LIKE 'm%' AND NOT name = 'model' ORDER BY database_id DESC"}, r); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(r.rows) != "[[msdb] [master]]" {
		t.Fatalf("LIKE/ORDER BY rows %v", r.rows)
	}
}

func TestEngineCancel(t *testing.T) {
	in, s := engineSession(t)
	in.SetThrottle(1 << 20)
	ctx, cancel := context.WithCancel(context.Background())
	r := &infoCanceller{cancel: cancel}
	err := s.Exec(ctx, tds.Request{SQL: "BACKUP DATABASE Sales TO DISK = 'x.bak' WITH INIT, STATS = 1"}, r)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled backup returned %v", err)
	}
}

type infoCanceller struct {
	recorder
	cancel func()
}

func (r *infoCanceller) Info(n int32, c uint8, msg string) error {
	if n == 3211 {
		r.cancel()
	}
	return r.recorder.Info(n, c, msg)
}

// FuzzParse: the parser never panics and reports failures as SQL errors.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"SELECT 1", "select 1;", "BACKUP DATABASE [a]]b] TO DISK = N'x''y' WITH CHECKSUM, STATS = 10",
		"RESTORE DATABASE x FROM DISK = @p1 WITH MOVE @p2 TO @p3, REPLACE",
		"IF OBJECT_ID(N'[a].[b].[c]', N'U') IS NULL CREATE TABLE [a].[b].[c] (Number int NOT NULL, CONSTRAINT ck CHECK (ID = 1))",
		"UPDATE t SET @n = Number = Number + 1 OUTPUT inserted.Number WHERE ID = 1",
		"SELECT r.session_id FROM sys.dm_exec_requests r CROSS APPLY sys.dm_exec_sql_text(r.sql_handle) t",
		"DBCC CHECKDB([x]) WITH NO_INFOMSGS", "/* x */ -- y", "SELECT (SELECT 1)", "SELECT CAST(1 AS nvarchar(8))",
		"IF DB_ID(N'x') IS NOT NULL BEGIN ALTER DATABASE [x] SET SINGLE_USER WITH ROLLBACK IMMEDIATE; DROP DATABASE [x]; END",
		"SELECT TOP (1) rh.restore_history_id, bs.name FROM msdb.dbo.restorehistory AS rh JOIN msdb.dbo.backupset AS bs " +
			"ON bs.backup_set_id = rh.backup_set_id WHERE rh.destination_database_name = @p1 ORDER BY rh.restore_history_id DESC",
		"SELECT a.* FROM t a LEFT OUTER JOIN u b ON a.x = b.y CROSS JOIN v", "WAITFOR DELAY '00:00:03'; SELECT 1",
		"WAITFOR TIME @t",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sql string) {
		_, err := parse(sql)
		if err != nil {
			var te *tds.Error
			if !errors.As(err, &te) || te.Number == 0 || strings.TrimSpace(te.Message) == "" {
				t.Fatalf("parse(%q) error %v is not a SQL error", sql, err)
			}
		}
	})
}

// TestLimiterAccounting: a limiter shared by streams books their bytes
// one after the other at its rate (checked on its schedule, without
// sleeping: the context is already cancelled).
func TestLimiterAccounting(t *testing.T) {
	l := &limiter{rate: 1 << 20}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	before := time.Now()
	for i := 0; i < 3; i++ {
		if err := l.wait(ctx, 1<<20); err == nil {
			t.Fatal("a wait of 1 s returned at once")
		}
	}
	if ahead := l.next.Sub(before); ahead < 2900*time.Millisecond || ahead > 3500*time.Millisecond {
		t.Fatalf("3 MiB at 1 MiB/s booked %v ahead, want about 3 s", ahead)
	}
	l.setRate(0)
	if err := l.wait(ctx, 1<<30); err != nil {
		t.Fatalf("unlimited wait: %v", err)
	}
	var nilLimiter *limiter
	if err := nilLimiter.wait(ctx, 1); err != nil {
		t.Fatalf("nil limiter: %v", err)
	}
}
