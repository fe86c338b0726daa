package tds

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-sql/sqlexp"
	mssql "github.com/microsoft/go-mssqldb"
)

// dsn builds a go-mssqldb connection string for the test server.
func dsn(addr, user, password, database string, extra ...string) string {
	u := url.URL{Scheme: "sqlserver", User: url.UserPassword(user, password), Host: addr}
	q := url.Values{}
	q.Set("database", database)
	q.Set("encrypt", "disable")
	q.Set("connection timeout", "5")
	for i := 0; i+1 < len(extra); i += 2 {
		q.Set(extra[i], extra[i+1])
	}
	u.RawQuery = q.Encode()
	return u.String()
}

func openDB(t testing.TB, addr string, extra ...string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlserver", dsn(addr, "sa", "p@ss wörd", "master", extra...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestPing(t *testing.T) {
	_, _, addr := startServer(t, Options{})
	db := openDB(t, addr)
	if err := db.PingContext(ctxT(t)); err != nil {
		t.Fatalf("ping: %v", err)
	}
}

func TestLoginErrors(t *testing.T) {
	_, _, addr := startServer(t, Options{})
	for _, tc := range []struct {
		name, user, password, db string
		want                     int32
	}{
		{"wrong password", "sa", "nope", "master", 18456},
		{"unknown user", "bob", "p@ss wörd", "master", 18456},
		{"unknown database", "sa", "p@ss wörd", "Nowhere", 4060},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, err := sql.Open("sqlserver", dsn(addr, tc.user, tc.password, tc.db))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			err = db.PingContext(ctxT(t))
			var me mssql.Error
			if !errors.As(err, &me) {
				t.Fatalf("ping error = %v (%T), want mssql.Error %d", err, err, tc.want)
			}
			if me.Number != tc.want {
				t.Fatalf("error number = %d (%q), want %d", me.Number, me.Message, tc.want)
			}
		})
	}
}

func TestLoginDatabaseAndEncryption(t *testing.T) {
	_, _, addr := startServer(t, Options{})
	db, err := sql.Open("sqlserver", dsn(addr, "sa", "p@ss wörd", "Sales", "encrypt", "false"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var name string
	if err := db.QueryRowContext(ctxT(t), "db now").Scan(&name); err != nil {
		t.Fatal(err)
	}
	if name != "Sales" {
		t.Fatalf("database = %q, want Sales", name)
	}

	// encrypt=true must fail clearly: the emulator has no TLS.
	tlsDB, err := sql.Open("sqlserver", dsn(addr, "sa", "p@ss wörd", "master", "encrypt", "true"))
	if err != nil {
		t.Fatal(err)
	}
	defer tlsDB.Close()
	if err := tlsDB.PingContext(ctxT(t)); err == nil || !strings.Contains(err.Error(), "encryption") {
		t.Fatalf("ping with encrypt=true: %v, want an encryption error", err)
	}
}

func TestAllColumnTypes(t *testing.T) {
	for _, size := range []string{"512", "4096", "32767"} {
		t.Run("packet size "+size, func(t *testing.T) {
			_, _, addr := startServer(t, Options{})
			db := openDB(t, addr, "packet size", size)
			rows, err := db.QueryContext(ctxT(t), "types now")
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			cols, _ := rows.Columns()
			if len(cols) != len(allTypesColumns) || cols[0] != "i" || cols[16] != "var" {
				t.Fatalf("columns = %v", cols)
			}
			var (
				i, bi, si, ti sql.NullInt64
				b             sql.NullBool
				nv, nvmax, c  sql.NullString
				dt, dt2       sql.NullTime
				num           sql.NullString
				guid          mssql.NullUniqueIdentifier
				r, f          sql.NullFloat64
				vb, vbmax     []byte
				variant       any
				dest          = []any{&i, &bi, &si, &ti, &b, &nv, &nvmax, &c, &dt, &dt2, &num, &guid, &r, &f, &vb, &vbmax, &variant}
			)
			if !rows.Next() {
				t.Fatalf("no first row: %v", rows.Err())
			}
			if err := rows.Scan(dest...); err != nil {
				t.Fatal(err)
			}
			check := func(name string, got, want any) {
				t.Helper()
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("%s = %v, want %v", name, got, want)
				}
			}
			check("int", i.Int64, -7)
			check("bigint", bi.Int64, int64(1)<<40)
			check("smallint", si.Int64, -300)
			check("tinyint", ti.Int64, 200)
			check("bit", b.Bool, true)
			check("nvarchar", nv.String, "héllo wörld")
			check("nvarchar(max)", nvmax.String, "max ✓ 𝄞")
			check("char", c.String, "D")
			check("datetime", dt.Time.UTC().Format(time.RFC3339Nano), "2026-11-29T19:30:15.123Z")
			check("datetime2", dt2.Time.UTC().Format(time.RFC3339Nano), testTime.Format(time.RFC3339Nano))
			check("numeric", num.String, "-12345.67")
			check("uniqueidentifier", guid.UUID.String(), "6F9619FF-8B86-D011-B42D-00C04FC964FF")
			check("real", r.Float64, 1.5)
			check("float", f.Float64, 2.25)
			check("varbinary", vb, []byte{1, 2, 3})
			check("varbinary(max)", string(vbmax), "blob")
			check("sql_variant", variant, "16.0.4135.4")

			if !rows.Next() {
				t.Fatalf("no NULL row: %v", rows.Err())
			}
			if err := rows.Scan(dest...); err != nil {
				t.Fatal(err)
			}
			for k, v := range []bool{i.Valid, bi.Valid, si.Valid, ti.Valid, b.Valid, nv.Valid, nvmax.Valid, c.Valid,
				dt.Valid, dt2.Valid, num.Valid, guid.Valid, r.Valid, f.Valid, vb != nil, vbmax != nil, variant != nil} {
				if v {
					t.Errorf("column %s: want NULL", cols[k])
				}
			}
			if rows.Next() {
				t.Fatal("unexpected third row")
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestLongStrings(t *testing.T) {
	for _, size := range []string{"512", "32767"} {
		t.Run("packet size "+size, func(t *testing.T) {
			_, _, addr := startServer(t, Options{})
			db := openDB(t, addr, "packet size", size)
			for _, n := range []int{0, 1, 255, 256, 4000, 100_000, 1 << 20} {
				var got string
				if err := db.QueryRowContext(ctxT(t), fmt.Sprintf("text %d", n)).Scan(&got); err != nil {
					t.Fatalf("text %d: %v", n, err)
				}
				if want := longText(n); got != want {
					t.Fatalf("text %d: got %d bytes, want %d (equal prefix: %v)", n, len(got), len(want), strings.HasPrefix(want, got))
				}
			}
			// Many rows crossing packet boundaries.
			rows, err := db.QueryContext(ctxT(t), "rows 5000")
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			n := 0
			for rows.Next() {
				var id int
				var name string
				if err := rows.Scan(&id, &name); err != nil {
					t.Fatal(err)
				}
				if id != n || name != fmt.Sprintf("row number %d", n) {
					t.Fatalf("row %d = (%d, %q)", n, id, name)
				}
				n++
			}
			if err := rows.Err(); err != nil || n != 5000 {
				t.Fatalf("got %d rows, err %v", n, err)
			}
		})
	}
}

func TestRPCParameters(t *testing.T) {
	_, h, addr := startServer(t, Options{})
	db := openDB(t, addr)
	long := longText(5000)
	when := time.Date(2026, 3, 4, 5, 6, 7, 123456700, time.FixedZone("", 2*3600))
	args := []any{int64(-42), int32(7), true, "short ünïcode", long, "", when, nil, []byte{0, 1, 2, 255},
		2.5, sql.Named("FileName", `\\bak01\backup\x.bak`), sql.NullInt64{}, mssql.UniqueIdentifier(testGUID)}
	res, err := db.ExecContext(ctxT(t), "params @p1 @p2 @p3 @p4 @p5 @p6 @p7 @p8 @p9 @p10 @FileName @p12 @p13", args...)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != int64(len(args)) {
		t.Fatalf("rows affected = %d, want %d (DONEINPROC count)", n, len(args))
	}
	req := h.lastRequest()
	if !req.RPC || !strings.HasPrefix(req.SQL, "params @p1") {
		t.Fatalf("request = %+v", req)
	}
	want := []struct {
		name  string
		value any
	}{
		{"@p1", int64(-42)}, {"@p2", int64(7)}, {"@p3", true}, {"@p4", "short ünïcode"}, {"@p5", long},
		{"@p6", ""}, {"@p7", when}, {"@p8", nil}, {"@p9", []byte{0, 1, 2, 255}}, {"@p10", 2.5},
		{"@FileName", `\\bak01\backup\x.bak`}, {"@p12", nil}, {"@p13", "6F9619FF-8B86-D011-B42D-00C04FC964FF"},
	}
	if len(req.Params) != len(want) {
		t.Fatalf("got %d params, want %d: %+v", len(req.Params), len(want), req.Params)
	}
	for i, w := range want {
		p := req.Params[i]
		if p.Name != w.name {
			t.Errorf("param %d name = %q, want %q", i, p.Name, w.name)
		}
		switch wv := w.value.(type) {
		case time.Time:
			got, ok := p.Value.(time.Time)
			_, off := got.Zone()
			if !ok || !got.Equal(wv) || off != 7200 {
				t.Errorf("%s = %v, want %v", w.name, p.Value, wv)
			}
		case []byte:
			if got, ok := p.Value.([]byte); !ok || !bytes.Equal(got, wv) {
				t.Errorf("%s = %v, want %v", w.name, p.Value, wv)
			}
		default:
			if p.Value != w.value {
				t.Errorf("%s = %#v (%T), want %#v", w.name, p.Value, p.Value, w.value)
			}
		}
	}
}

func TestUnknownProcedureAndErrors(t *testing.T) {
	_, _, addr := startServer(t, Options{})
	db := openDB(t, addr)
	ctx := ctxT(t)

	// A single bare word is sent by the driver as an RPC by name.
	_, err := db.ExecContext(ctx, "sp_who2")
	var me mssql.Error
	if !errors.As(err, &me) || me.Number != 2812 || !strings.Contains(me.Message, "sp_who2") {
		t.Fatalf("unknown procedure: %v", err)
	}

	_, err = db.ExecContext(ctx, "backupfail now")
	if !errors.As(err, &me) || me.Number != 3013 || len(me.All) != 2 || me.All[0].Number != 3201 {
		t.Fatalf("backup failure: %v (%+v)", err, me)
	}
	if me.Class != 16 || me.State != 1 {
		t.Fatalf("class/state = %d/%d", me.Class, me.State)
	}

	_, err = db.ExecContext(ctx, "fail now")
	if !errors.As(err, &me) || me.Number != 50000 || !strings.Contains(me.Message, "engine exploded") {
		t.Fatalf("generic error: %v", err)
	}

	_, err = db.ExecContext(ctx, "nonsense here")
	if !errors.As(err, &me) || me.Number != 102 {
		t.Fatalf("syntax error: %v", err)
	}

	// A row value longer than its column is refused by the server, not
	// sent to make the driver panic; the connection stays usable.
	_, err = db.ExecContext(ctx, "badrow now")
	if !errors.As(err, &me) || !strings.Contains(me.Message, "does not fit nvarchar(2)") {
		t.Fatalf("bad row: %v", err)
	}
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("ping after errors: %v", err)
	}
}

func TestErrorAfterRows(t *testing.T) {
	_, _, addr := startServer(t, Options{})
	db := openDB(t, addr)
	rows, err := db.QueryContext(ctxT(t), "rowsfail now")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		n++
	}
	var me mssql.Error
	if !errors.As(rows.Err(), &me) || me.Number != 824 || n != 1 {
		t.Fatalf("after %d rows: %v, want error 824", n, rows.Err())
	}
}

func TestHandlerPanic(t *testing.T) {
	_, h, addr := startServer(t, Options{})
	db := openDB(t, addr)
	ctx := ctxT(t)
	var me mssql.Error
	if _, err := db.ExecContext(ctx, "panic now"); err == nil || errors.As(err, &me) {
		t.Fatalf("panic: %v, want a connection error", err)
	}
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("ping after a handler panic: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for h.closed.Load() < 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if h.closed.Load() < 1 {
		t.Fatal("the panicking connection's session was not closed")
	}
}

func TestMultipleResultSets(t *testing.T) {
	_, _, addr := startServer(t, Options{})
	db := openDB(t, addr)
	rows, err := db.QueryContext(ctxT(t), "multi now")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var sets [][]int
	for {
		var set []int
		for rows.Next() {
			var n int
			if err := rows.Scan(&n); err != nil {
				t.Fatal(err)
			}
			set = append(set, n)
		}
		sets = append(sets, set)
		if !rows.NextResultSet() {
			break
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(sets) != "[[10] [20 21]]" {
		t.Fatalf("result sets = %v", sets)
	}
	res, err := db.ExecContext(ctxT(t), "multi again")
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 8 {
		t.Fatalf("rows affected = %d, want 1+2+5", n)
	}
}

// TestProgressStreaming proves INFO messages reach the client while the
// statement still runs: the handler sends message N+1 only after the
// test received message N.
func TestProgressStreaming(t *testing.T) {
	_, h, addr := startServer(t, Options{})
	db := openDB(t, addr)
	ctx := ctxT(t)
	var retmsg sqlexp.ReturnMessage
	rows, err := db.QueryContext(ctx, "progress 5", &retmsg)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	h.step <- struct{}{}
	done := false
	for !done {
		switch m := retmsg.Message(ctx).(type) {
		case sqlexp.MsgNotice:
			got = append(got, m.Message.String())
			if len(got) < 5 {
				h.step <- struct{}{} // only now may the handler send the next one
			}
		case sqlexp.MsgError:
			t.Fatalf("error: %v", m.Error)
		case sqlexp.MsgNextResultSet:
			done = !rows.NextResultSet()
		case sqlexp.MsgNext:
			for rows.Next() {
			}
		}
	}
	if want := "[10 percent processed. 20 percent processed. 30 percent processed. 40 percent processed. 50 percent processed.]"; fmt.Sprint(got) != want {
		t.Fatalf("messages = %v", got)
	}
}

// TestSlowMessageReader: many INFO messages to a client that reads them
// slowly (the driver's queue holds 15, then it stops reading the socket).
// Every message arrives, in order, and the connection stays usable.
func TestSlowMessageReader(t *testing.T) {
	_, _, addr := startServer(t, Options{})
	db := openDB(t, addr, "packet size", "512")
	db.SetMaxOpenConns(1)
	ctx := ctxT(t)
	const n = 3000
	var retmsg sqlexp.ReturnMessage
	rows, err := db.QueryContext(ctx, fmt.Sprintf("infos %d", n), &retmsg)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := 0
	for done := false; !done; {
		switch m := retmsg.Message(ctx).(type) {
		case sqlexp.MsgNotice:
			got++
			if want := fmt.Sprintf("Processed %d pages", got); !strings.HasPrefix(m.Message.String(), want) {
				t.Fatalf("message %d = %q", got, m.Message)
			}
			if got%100 == 0 {
				time.Sleep(20 * time.Millisecond) // let the queue and the socket fill up
			}
		case sqlexp.MsgError:
			t.Fatal(m.Error)
		case sqlexp.MsgNextResultSet:
			done = !rows.NextResultSet()
		}
	}
	if got != n {
		t.Fatalf("got %d messages, want %d", got, n)
	}
	if err := db.PingContext(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestErrorMessagesStreamed checks the MsgError path the product uses for
// BACKUP failures: both errors arrive, the last is 3013.
func TestErrorMessagesStreamed(t *testing.T) {
	_, _, addr := startServer(t, Options{})
	db := openDB(t, addr)
	ctx := ctxT(t)
	var retmsg sqlexp.ReturnMessage
	rows, err := db.QueryContext(ctx, "backupfail now", &retmsg)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var nums []int32
	for done := false; !done; {
		switch m := retmsg.Message(ctx).(type) {
		case sqlexp.MsgError:
			var me mssql.Error
			if errors.As(m.Error, &me) {
				nums = append(nums, me.Number)
			}
		case sqlexp.MsgNextResultSet:
			done = !rows.NextResultSet()
		}
	}
	if fmt.Sprint(nums) != "[3201 3013]" {
		t.Fatalf("errors = %v", nums)
	}
}

func TestCancelMidStatement(t *testing.T) {
	_, h, addr := startServer(t, Options{})
	db := openDB(t, addr)
	db.SetMaxOpenConns(1)
	for _, stmt := range []string{"sleep now", "flood now"} {
		t.Run(stmt, func(t *testing.T) {
			ctx, cancel := context.WithCancel(ctxT(t))
			errc := make(chan error, 1)
			go func() {
				rows, err := db.QueryContext(ctx, stmt)
				if err == nil {
					// flood: rows arrive; stop reading and wait for cancel
					<-ctx.Done()
					for rows.Next() {
					}
					err = rows.Err()
					rows.Close()
				}
				errc <- err
			}()
			<-h.inExec
			cancel()
			// context.Canceled (not a StreamError) proves the server
			// acknowledged the attention within the driver's 5 s drain.
			if err := <-errc; !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled query: %v, want context.Canceled", err)
			}
			var n int
			if err := db.QueryRowContext(ctxT(t), "select 1").Scan(&n); err != nil || n != 1 {
				t.Fatalf("connection not reusable after cancel: %v", err)
			}
		})
	}
}

// TestIdleAttention: QueryRow + Rows.Close cancel their own context after
// the response ended; the server must answer that idle attention.
func TestIdleAttention(t *testing.T) {
	_, _, addr := startServer(t, Options{})
	db := openDB(t, addr)
	db.SetMaxOpenConns(1)
	ctx := ctxT(t)
	for i := 0; i < 20; i++ {
		var n int
		if err := db.QueryRowContext(ctx, "select 1").Scan(&n); err != nil {
			t.Fatalf("iteration %d: %v", i, err)
		}
		rows, err := db.QueryContext(ctx, "rows 3")
		if err != nil {
			t.Fatal(err)
		}
		rows.Next()
		if err := rows.Close(); err != nil {
			t.Fatalf("close: %v", err)
		}
	}
}

func TestConcurrentConnections(t *testing.T) {
	srv, _, addr := startServer(t, Options{})
	db := openDB(t, addr)
	db.SetMaxOpenConns(10)
	ctx := ctxT(t)
	var wg sync.WaitGroup
	errs := make(chan error, 10)
	start := make(chan struct{})
	for g := 0; g < 10; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := db.Conn(ctx)
			if err != nil {
				errs <- err
				return
			}
			defer conn.Close()
			<-start
			for i := 0; i < 30; i++ {
				var n int
				if err := conn.QueryRowContext(ctx, "select 1").Scan(&n); err != nil {
					errs <- err
					return
				}
				rows, err := conn.QueryContext(ctx, "rows 200")
				if err != nil {
					errs <- err
					return
				}
				c := 0
				for rows.Next() {
					c++
				}
				rows.Close()
				if c != 200 {
					errs <- fmt.Errorf("got %d rows", c)
					return
				}
			}
		}()
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(srv.SPIDs()) < 10 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := len(srv.SPIDs()); n != 10 {
		t.Errorf("server has %d sessions, want 10", n)
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestKillAndDropConnections(t *testing.T) {
	srv, h, addr := startServer(t, Options{})
	db := openDB(t, addr)
	ctx := ctxT(t)
	var me mssql.Error
	if _, err := db.ExecContext(ctx, "kill now"); err == nil || errors.As(err, &me) {
		t.Fatalf("kill: %v, want a connection error", err)
	}
	if _, err := db.ExecContext(ctx, "drop now"); err == nil || errors.As(err, &me) {
		t.Fatalf("drop: %v, want a connection error", err)
	}
	// The server still accepts connections afterwards.
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("ping after drop: %v", err)
	}
	// Each dropped connection's session was closed.
	deadline := time.Now().Add(5 * time.Second)
	for h.closed.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if h.closed.Load() < 2 {
		t.Fatalf("sessions closed = %d, want >= 2", h.closed.Load())
	}
	_ = srv
}

func TestResetConnection(t *testing.T) {
	_, h, addr := startServer(t, Options{})
	db := openDB(t, addr)
	db.SetMaxOpenConns(1)
	ctx := ctxT(t)
	if _, err := db.ExecContext(ctx, "use Sales"); err != nil {
		t.Fatal(err)
	}
	// The pool resets the session before reusing the connection.
	var name string
	if err := db.QueryRowContext(ctx, "db now").Scan(&name); err != nil {
		t.Fatal(err)
	}
	if name != "master" {
		t.Fatalf("database after reset = %q, want master", name)
	}
	if h.resets.Load() == 0 {
		t.Fatal("Session.Reset was not called")
	}
	// On one pinned connection no reset happens between statements.
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "use Sales"); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRowContext(ctx, "db now").Scan(&name); err != nil || name != "Sales" {
		t.Fatalf("database on pinned connection = %q, %v", name, err)
	}
}

func TestTransactions(t *testing.T) {
	_, _, addr := startServer(t, Options{})
	db := openDB(t, addr)
	ctx := ctxT(t)
	for _, commit := range []bool{true, false} {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, "update 3"); err != nil {
			t.Fatal(err)
		}
		if commit {
			err = tx.Commit()
		} else {
			err = tx.Rollback()
		}
		if err != nil {
			t.Fatalf("commit=%v: %v", commit, err)
		}
	}
}

// TestGarbageDoesNotHurtServer sends malformed bytes on raw sockets and
// checks the server still serves the next client.
func TestGarbageDoesNotHurtServer(t *testing.T) {
	_, _, addr := startServer(t, Options{ReadTimeout: 2 * time.Second})
	garbage := [][]byte{
		[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
		{0x12, 0x01, 0x00, 0x04, 0, 0, 0, 0},                         // length shorter than the header
		{0x12, 0x01, 0xFF, 0xFF, 0, 0, 0, 0, 1, 2, 3},                // longer than any packet
		{0x12, 0x01, 0x00, 0x0A, 0, 0, 1, 0, 0x00, 0x00},             // PRELOGIN without terminator
		{0x16, 0x03, 0x01, 0x00, 0x10, 0x01, 0x00, 0x00},             // TLS ClientHello (encrypt=strict)
		{0x10, 0x01, 0x00, 0x10, 0, 0, 1, 0, 1, 2, 3, 4, 5, 6, 7, 8}, // LOGIN7 first
		{0x12, 0x00, 0x00, 0x09, 0, 0, 1, 0, 0xFF},                   // unfinished message, then EOF
	}
	for i, g := range garbage {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = c.Write(g)
		_ = c.(*net.TCPConn).CloseWrite() // the server sees EOF where the bytes end
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 512)
		_, err = c.Read(buf)
		if err == nil {
			t.Errorf("garbage %d: server answered instead of closing", i)
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Errorf("garbage %d: connection still open after 5 s", i)
		}
		c.Close()
	}
	db := openDB(t, addr)
	if err := db.PingContext(ctxT(t)); err != nil {
		t.Fatalf("ping after garbage: %v", err)
	}
}
