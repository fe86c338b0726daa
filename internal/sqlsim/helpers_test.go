package sqlsim

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-sql/sqlexp"
	mssql "github.com/microsoft/go-mssqldb"
)

const testPass = "S3cret!pw"

// testEnv is a running instance with a backup share and a restore drive.
type testEnv struct {
	in         *Instance
	db         *sql.DB
	shareDir   string // \\bak01\backup
	restoreDir string // R:\restore
}

func newEnv(t testing.TB, mod ...func(*Config)) *testEnv {
	t.Helper()
	root := t.TempDir()
	e := &testEnv{shareDir: filepath.Join(root, "share"), restoreDir: filepath.Join(root, "restore")}
	for _, d := range []string{e.shareDir, e.restoreDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg := Config{Name: "sql01", DataDir: filepath.Join(root, "data"), Logins: map[string]string{"sa": testPass},
		Shares: map[string]string{`\\bak01\backup`: e.shareDir, `R:\restore`: e.restoreDir}}
	e.start(t, cfg, mod...)
	return e
}

// start runs an instance of cfg changed by mod as e's, with a session to
// master.
func (e *testEnv) start(t testing.TB, cfg Config, mod ...func(*Config)) {
	t.Helper()
	for _, m := range mod {
		m(&cfg)
	}
	in, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Stop() })
	e.in = in
	e.db = e.open(t, "master")
}

// restartWith stops e's instance and starts it again on the same data with
// its configuration changed by mod (another time zone, edition, ...).
func (e *testEnv) restartWith(t testing.TB, mod func(*Config)) {
	t.Helper()
	cfg := e.in.cfg
	cfg.ListenAddr = "127.0.0.1:0"
	if err := e.in.Stop(); err != nil {
		t.Fatal(err)
	}
	e.start(t, cfg, mod)
}

func (e *testEnv) open(t testing.TB, db string) *sql.DB {
	t.Helper()
	conn, err := sql.Open("sqlserver", e.in.DSN("sa", testPass, db))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func (e *testEnv) create(t testing.TB, spec DatabaseSpec) {
	t.Helper()
	if err := e.in.CreateDatabase(spec); err != nil {
		t.Fatal(err)
	}
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// result is what a statement produced through the driver's message queue:
// INFO messages, errors and rows, in arrival order.
type result struct {
	infos  []mssql.Error
	errs   []mssql.Error
	rows   [][]any
	cols   []string
	events []string // "info:<n>", "row", "error:<n>"
}

func (r *result) errNums() []int32 {
	var out []int32
	for _, e := range r.errs {
		out = append(out, e.Number)
	}
	return out
}

func (r *result) infoNums() []int32 {
	var out []int32
	for _, e := range r.infos {
		out = append(out, e.Number)
	}
	return out
}

// value is the first row's value of the column name.
func (r *result) value(t testing.TB, name string) any {
	t.Helper()
	for i, c := range r.cols {
		if c == name && len(r.rows) > 0 {
			return r.rows[0][i]
		}
	}
	t.Fatalf("no column %s (or no row) in %v", name, r.cols)
	return nil
}

func (r *result) lastErr() int32 {
	if len(r.errs) == 0 {
		return 0
	}
	return r.errs[len(r.errs)-1].Number
}

// run executes a statement the way the product does (sqlexp messages) and
// collects everything. onInfo, if set, sees every INFO as it arrives.
//
// Note (go-mssqldb v1.11.2): when the connection dies before the first
// reply packet, the error reaches only the token channel, not the message
// queue, so retmsg.Message blocks until ctx ends. Crash tests therefore let
// a progress message arrive first.
func run(ctx context.Context, db queryer, onInfo func(mssql.Error), query string, args ...any) (*result, error) {
	var retmsg sqlexp.ReturnMessage
	rows, err := db.QueryContext(ctx, query, append([]any{&retmsg}, args...)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	r := &result{}
	for {
		switch m := retmsg.Message(ctx).(type) {
		case sqlexp.MsgNotice:
			if me, ok := m.Message.(mssql.Error); ok {
				r.infos = append(r.infos, me)
				r.events = append(r.events, fmt.Sprintf("info:%d", me.Number))
				if onInfo != nil {
					onInfo(me)
				}
			}
		case sqlexp.MsgError:
			var me mssql.Error
			if errors.As(m.Error, &me) {
				r.errs = append(r.errs, me)
				r.events = append(r.events, fmt.Sprintf("error:%d", me.Number))
			} else {
				return r, m.Error
			}
		case sqlexp.MsgNext:
			cols, err := rows.Columns()
			if err != nil {
				return r, err
			}
			r.cols = cols
			for rows.Next() {
				vals := make([]any, len(cols))
				ptrs := make([]any, len(cols))
				for i := range vals {
					ptrs[i] = &vals[i]
				}
				if err := rows.Scan(ptrs...); err != nil {
					return r, err
				}
				r.rows = append(r.rows, vals)
				r.events = append(r.events, "row")
			}
		case sqlexp.MsgNextResultSet:
			if !rows.NextResultSet() {
				return r, rows.Err()
			}
		case nil:
			return r, ctx.Err()
		}
	}
}

// queryer is a pool or one pinned connection.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// mustRun runs a statement that must succeed without SQL errors.
func mustRun(t testing.TB, db *sql.DB, query string, args ...any) *result {
	t.Helper()
	r, err := run(testCtx(t), db, nil, query, args...)
	if err != nil {
		t.Fatalf("%s: %v", short(query), err)
	}
	if len(r.errs) > 0 {
		t.Fatalf("%s: SQL errors %v: %s", short(query), r.errNums(), r.errs[len(r.errs)-1].Message)
	}
	return r
}

// mustFail runs a statement that must fail with the given last error number.
func mustFail(t testing.TB, db *sql.DB, want int32, query string, args ...any) *result {
	t.Helper()
	r, err := run(testCtx(t), db, nil, query, args...)
	if err != nil {
		t.Fatalf("%s: %v", short(query), err)
	}
	if r.lastErr() != want {
		t.Fatalf("%s: errors %v (%v), want last %d", short(query), r.errNums(), r.errs, want)
	}
	return r
}

func short(s string) string {
	if len(s) > 120 {
		return s[:117] + "..."
	}
	return s
}

// errNumber extracts the SQL Server error number from a driver error.
func errNumber(err error) int32 {
	var me mssql.Error
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

func qi(s string) string { return "[" + strings.ReplaceAll(s, "]", "]]") + "]" }

func ql(s string) string { return "N'" + strings.ReplaceAll(s, "'", "''") + "'" }

func asInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case int32:
		return int64(x)
	case []byte:
		var n int64
		fmt.Sscan(string(x), &n)
		return n
	case string:
		var n int64
		fmt.Sscan(x, &n)
		return n
	}
	return -1
}
