package tds

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// -capture rewrites the fuzz seed corpus under testdata/fuzz from real
// go-mssqldb traffic: go test -run TestCapturedTraffic -capture
var capture = flag.Bool("capture", false, "rewrite the fuzz seed corpus from captured driver traffic")

// recordingListener keeps a copy of every byte clients send.
type recordingListener struct {
	net.Listener
	mu    sync.Mutex
	conns []*recordingConn
}

type recordingConn struct {
	net.Conn
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	rc := &recordingConn{Conn: c}
	l.mu.Lock()
	l.conns = append(l.conns, rc)
	l.mu.Unlock()
	return rc, nil
}

func (c *recordingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.buf.Write(p[:n])
	c.mu.Unlock()
	return n, err
}

func (c *recordingConn) bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.buf.Bytes())
}

// TestCapturedTraffic drives the server with the real driver, records what
// the driver sent, and checks that the decoders read it back: packet
// reassembly (including a RESETCONNECTION message and an attention),
// LOGIN7 with the de-obfuscated password, a batch and an RPC.
func TestCapturedTraffic(t *testing.T) {
	h := newTestHandler()
	srv := NewServer(h, Options{}, nil)
	h.srv = srv
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rl := &recordingListener{Listener: inner}
	go func() { _ = srv.Serve(rl) }()
	defer srv.Close()

	db, err := sql.Open("sqlserver", dsn(inner.Addr().String(), "sa", "p@ss wörd", "master", "packet size", "512"))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	ctx := ctxT(t)
	if _, err := db.ExecContext(ctx, "multi now"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "params @p1 @p2 @p3 @p4 @p5 @p6", int64(5), "ünï", true, 1.5,
		time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), []byte{1, 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "params @p1", longText(3000)); err != nil { // PLP over several packets
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	go func() { <-h.inExec; cancel() }()
	if _, err := db.ExecContext(cctx, "sleep now"); !errors.Is(err, context.Canceled) {
		t.Fatalf("sleep: %v", err)
	}
	_ = db.Close()
	srv.Close()

	rl.mu.Lock()
	stream := rl.conns[0].bytes()
	rl.mu.Unlock()
	msgs, err := decodeMessages(stream, maxPacketSize)
	if err != nil {
		t.Fatalf("captured stream does not decode: %v", err)
	}
	var kinds []byte
	var login, rpc []byte
	resets := 0
	for _, m := range msgs {
		kinds = append(kinds, m.typ)
		if m.reset {
			resets++
		}
		switch m.typ {
		case packetLogin7:
			login = m.data
		case packetRPC:
			if rpc == nil {
				rpc = m.data
			}
		}
	}
	if want := []byte{packetPrelogin, packetLogin7, packetSQLBatch, packetRPC, packetRPC, packetSQLBatch, packetAttention}; !bytes.Equal(kinds, want) {
		t.Fatalf("message types = % x, want % x", kinds, want)
	}
	if resets < 3 {
		t.Fatalf("%d messages carry RESETCONNECTION, want at least 3 (every reuse from the pool)", resets)
	}
	l7, err := decodeLogin7(login)
	if err != nil || l7.User != "sa" || l7.Password != "p@ss wörd" || l7.Database != "master" || l7.PacketSize != 512 {
		t.Fatalf("LOGIN7 = %+v, %v", l7, err)
	}
	call, err := decodeRPC(rpc, true)
	if err != nil || !call.isExecuteSQL() || len(call.Params) != 8 {
		t.Fatalf("RPC = %+v, %v", call, err)
	}

	if *capture {
		writeCorpus(t, "FuzzDecodeMessages", stream)
		writeCorpus(t, "FuzzDecodeLogin7", login)
		writeCorpus(t, "FuzzDecodeRPC", rpc)
	}
}

// writeCorpus stores b and truncated variants as seed inputs.
func writeCorpus(t *testing.T, fuzzName string, b []byte) {
	dir := filepath.Join("testdata", "fuzz", fuzzName)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	variants := map[string][]byte{"captured": b, "truncated-half": b[:len(b)/2], "truncated-1": b[:len(b)-1]}
	for _, cut := range []int{7, 9, 60, 100} {
		if cut < len(b) {
			variants["truncated-"+strconv.Itoa(cut)] = b[:cut]
		}
	}
	for name, v := range variants {
		content := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", v)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// The fuzz targets feed arbitrary bytes to the decoders that see client
// input; they must return an error, never panic or allocate without bound.

func FuzzDecodeMessages(f *testing.F) {
	f.Add([]byte{packetAttention, statusEOM, 0, 8, 0, 0, 1, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		msgs, err := decodeMessages(b, maxPacketSize)
		var pe *protocolError
		if err != nil && !errors.As(err, &pe) {
			t.Fatalf("decodeMessages returned a non-protocol error: %v", err)
		}
		for _, m := range msgs {
			switch m.typ {
			case packetPrelogin:
				_, _ = decodePrelogin(m.data)
			case packetLogin7:
				_, _ = decodeLogin7(m.data)
			default:
				p, err := decodeRequest(m, true)
				if err == nil && p.kind == packetRPC && p.call.isExecuteSQL() {
					_, _ = p.call.request()
				}
			}
		}
	})
}

func FuzzDecodeLogin7(f *testing.F) {
	f.Add(make([]byte, login7FixedSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := decodeLogin7(b)
		if err == nil && len(b) < login7FixedSize71 {
			t.Fatalf("decoded a %d-byte LOGIN7: %+v", len(b), l)
		}
	})
}

func FuzzDecodeRPC(f *testing.F) {
	f.Add([]byte{4, 0, 0, 0, 0xFF, 0xFF, 10, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := decodeRPC(b, true)
		if err != nil {
			return
		}
		for _, p := range c.Params {
			switch p.Value.(type) {
			case nil, int64, bool, float64, string, []byte, time.Time:
			default:
				t.Fatalf("parameter %s has type %T, outside the Param contract", p.Name, p.Value)
			}
		}
	})
}
