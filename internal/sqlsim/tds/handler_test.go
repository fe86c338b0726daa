package tds

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
)

// testHandler is a scripted engine: the first word of the SQL text picks
// a behaviour (see exec). It records what the server handed it.
type testHandler struct {
	srv *Server

	mu       sync.Mutex
	requests []Request
	resets   atomic.Int32
	closed   atomic.Int32
	inExec   chan string   // receives the SQL of statements that block
	step     chan struct{} // "progress" waits on it before each message
}

func newTestHandler() *testHandler {
	return &testHandler{inExec: make(chan string, 16), step: make(chan struct{})}
}

func (h *testHandler) Login(ctx context.Context, l Login) (Session, error) {
	if l.User != "sa" || l.Password != "p@ss wörd" {
		return nil, &Error{Number: 18456, State: 8, Class: 14, Message: fmt.Sprintf("Login failed for user '%s'.", l.User)}
	}
	db := l.Database
	if db == "" {
		db = "master"
	}
	if db != "master" && db != "Sales" {
		return nil, &Error{Number: 4060, State: 1, Class: 11,
			Message: fmt.Sprintf("Cannot open database \"%s\" requested by the login. The login failed.", db)}
	}
	if l.SPID < firstSPID || l.PacketSize < minPacketSize {
		return nil, fmt.Errorf("bad login record: %+v", l)
	}
	return &testSession{h: h, login: db, db: db}, nil
}

func (h *testHandler) lastRequest() Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.requests[len(h.requests)-1]
}

type testSession struct {
	h         *testHandler
	login, db string
}

func (s *testSession) Database() string { return s.db }
func (s *testSession) Reset()           { s.h.resets.Add(1); s.db = s.login }
func (s *testSession) Close()           { s.h.closed.Add(1) }

// allTypesColumns is one column of every ColumnType.
var allTypesColumns = []Column{
	{Name: "i", Type: TypeInt, Nullable: true},
	{Name: "bi", Type: TypeBigInt, Nullable: true},
	{Name: "si", Type: TypeSmallInt, Nullable: true},
	{Name: "ti", Type: TypeTinyInt, Nullable: true},
	{Name: "b", Type: TypeBit, Nullable: true},
	{Name: "nv", Type: TypeNVarChar, Size: 20, Nullable: true},
	{Name: "nvmax", Type: TypeNVarChar, Nullable: true},
	{Name: "c", Type: TypeChar, Size: 1, Nullable: true},
	{Name: "dt", Type: TypeDateTime, Nullable: true},
	{Name: "dt2", Type: TypeDateTime2, Nullable: true},
	{Name: "num", Type: TypeNumeric, Precision: 20, Scale: 2, Nullable: true},
	{Name: "guid", Type: TypeUniqueIdentifier, Nullable: true},
	{Name: "r", Type: TypeReal, Nullable: true},
	{Name: "f", Type: TypeFloat, Nullable: true},
	{Name: "vb", Type: TypeVarBinary, Size: 16, Nullable: true},
	{Name: "vbmax", Type: TypeVarBinary, Nullable: true},
	{Name: "var", Type: TypeVariant, Nullable: true},
}

var (
	testTime = time.Date(2026, 11, 29, 19, 30, 15, 123456700, time.UTC)
	testGUID = [16]byte{0x6F, 0x96, 0x19, 0xFF, 0x8B, 0x86, 0xD0, 0x11, 0xB4, 0x2D, 0x00, 0xC0, 0x4F, 0xC9, 0x64, 0xFF}
	typesRow = []any{int32(-7), int64(1) << 40, int16(-300), uint8(200), true, "héllo wörld", "max ✓ 𝄞",
		"D", testTime, testTime, "-12345.67", testGUID, 1.5, 2.25, []byte{1, 2, 3}, []byte("blob"), "16.0.4135.4"}
	nullTypes = make([]any, len(allTypesColumns))
)

func (s *testSession) Exec(ctx context.Context, req Request, w ResultWriter) error {
	s.h.mu.Lock()
	s.h.requests = append(s.h.requests, req)
	s.h.mu.Unlock()
	words := strings.Fields(strings.TrimSuffix(strings.TrimSpace(req.SQL), ";"))
	if len(words) == 0 {
		return nil
	}
	arg := func(i int) int {
		n, _ := strconv.Atoi(words[i])
		return n
	}
	switch strings.ToLower(words[0]) {
	case "select": // db.Ping sends "select 1;"
		if err := w.Columns([]Column{{Name: "", Type: TypeInt}}); err != nil {
			return err
		}
		if err := w.Row(1); err != nil {
			return err
		}
		return w.StatementDone(CmdSelect, 1, true)
	case "types":
		if err := w.Columns(allTypesColumns); err != nil {
			return err
		}
		if err := w.Row(typesRow...); err != nil {
			return err
		}
		if err := w.Row(nullTypes...); err != nil {
			return err
		}
		return w.StatementDone(CmdSelect, 2, true)
	case "rows": // rows N: N rows of (int, nvarchar(40))
		if err := w.Columns([]Column{{Name: "id", Type: TypeInt}, {Name: "name", Type: TypeNVarChar, Size: 40}}); err != nil {
			return err
		}
		n := arg(1)
		for i := 0; i < n; i++ {
			if err := w.Row(i, "row number "+strconv.Itoa(i)); err != nil {
				return err
			}
		}
		return w.StatementDone(CmdSelect, int64(n), true)
	case "text": // text N: one nvarchar(max) of N characters
		if err := w.Columns([]Column{{Name: "t", Type: TypeNVarChar}}); err != nil {
			return err
		}
		if err := w.Row(longText(arg(1))); err != nil {
			return err
		}
		return w.StatementDone(CmdSelect, 1, true)
	case "blob": // blob N: one nvarchar(max) of N ASCII characters (benchmarks)
		if err := w.Columns([]Column{{Name: "t", Type: TypeNVarChar}}); err != nil {
			return err
		}
		if err := w.Row(strings.Repeat("abcdefgh", arg(1)/8)); err != nil {
			return err
		}
		return w.StatementDone(CmdSelect, 1, true)
	case "multi": // two result sets and an update count
		for i := 1; i <= 2; i++ {
			if err := w.Columns([]Column{{Name: "n", Type: TypeInt}}); err != nil {
				return err
			}
			for j := 0; j < i; j++ {
				if err := w.Row(10*i + j); err != nil {
					return err
				}
			}
			if err := w.StatementDone(CmdSelect, int64(i), true); err != nil {
				return err
			}
		}
		return w.StatementDone(CmdUpdate, 5, true)
	case "update":
		return w.StatementDone(CmdUpdate, int64(arg(1)), true)
	case "progress": // progress N: N INFO messages, each after a step from the test
		for i := 1; i <= arg(1); i++ {
			select {
			case <-s.h.step:
			case <-ctx.Done():
				return ctx.Err()
			}
			if err := w.Info(3211, 0, fmt.Sprintf("%d percent processed.", i*10)); err != nil {
				return err
			}
		}
		return w.StatementDone(CmdExecute, 0, false)
	case "infos": // infos N: N INFO messages as fast as the client takes them
		for i := 1; i <= arg(1); i++ {
			if err := w.Info(4035, 0, fmt.Sprintf("Processed %d pages for database 'Sales', file 'Sales' on file 1.", i)); err != nil {
				return err
			}
		}
		return w.StatementDone(CmdExecute, 0, false)
	case "backupfail":
		if err := w.Error(&Error{Number: 3201, State: 2, Class: 16,
			Message: `Cannot open backup device '\\bak01\backup\x.bak'. Operating system error 53.`}); err != nil {
			return err
		}
		return &Error{Number: 3013, State: 1, Class: 16, Message: "BACKUP DATABASE is terminating abnormally."}
	case "fail":
		return errors.New("engine exploded")
	case "sleep": // blocks until cancelled
		s.h.inExec <- req.SQL
		<-ctx.Done()
		return ctx.Err()
	case "flood": // writes rows until cancelled: exercises blocked writes
		if err := w.Columns([]Column{{Name: "t", Type: TypeNVarChar, Size: 1000}}); err != nil {
			return err
		}
		s.h.inExec <- req.SQL
		row := strings.Repeat("x", 1000)
		for {
			if err := w.Row(row); err != nil {
				return err
			}
		}
	case "rowsfail": // rows, then an error in the middle of the result set
		if err := w.Columns([]Column{{Name: "n", Type: TypeInt}}); err != nil {
			return err
		}
		if err := w.Row(1); err != nil {
			return err
		}
		return &Error{Number: 824, State: 2, Class: 24, Message: "SQL Server detected a logical consistency-based I/O error: incorrect checksum."}
	case "panic":
		panic("handler bug")
	case "kill":
		return ErrKillConnection
	case "drop":
		s.h.srv.DropConnections()
		<-ctx.Done()
		return ctx.Err()
	case "db":
		if err := w.Columns([]Column{{Name: "db", Type: TypeNVarChar, Size: 128}}); err != nil {
			return err
		}
		if err := w.Row(s.db); err != nil {
			return err
		}
		return w.StatementDone(CmdSelect, 1, true)
	case "use":
		s.db = words[1]
		return nil
	case "badrow": // a value that does not fit its column must be refused
		if err := w.Columns([]Column{{Name: "t", Type: TypeNVarChar, Size: 2}}); err != nil {
			return err
		}
		return w.Row("too long")
	case "params":
		return w.StatementDone(CmdSelect, int64(len(req.Params)), true)
	}
	return &Error{Number: 102, State: 1, Class: 15, Message: fmt.Sprintf("Incorrect syntax near '%s'.", words[0])}
}

// longText is n characters mixing ASCII, Latin-1 and a surrogate pair.
func longText(n int) string {
	const pattern = "abcdefghij-é-𝄞-0123456789 "
	var b strings.Builder
	for b.Len() < 4*n {
		b.WriteString(pattern)
	}
	r := []rune(b.String())
	var out []rune
	units := 0
	for _, c := range r {
		w := 1
		if c >= 0x10000 {
			w = 2
		}
		if units+w > n {
			break
		}
		out = append(out, c)
		units += w
	}
	for units < n {
		out = append(out, 'z')
		units++
	}
	return string(out)
}

// startServer serves a testHandler on a free loopback port.
func startServer(t testing.TB, opts Options) (*Server, *testHandler, string) {
	t.Helper()
	h := newTestHandler()
	var srv *Server
	if tt, ok := t.(*testing.T); ok {
		srv = NewServer(h, opts, zaptest.NewLogger(tt))
	} else {
		srv = NewServer(h, opts, nil)
	}
	h.srv = srv
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("Serve returned %v after Close, want nil", err)
		}
	})
	return srv, h, l.Addr().String()
}
