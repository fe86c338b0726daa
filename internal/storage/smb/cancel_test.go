package smb_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/sambatest"
	"github.com/backupcycle/backupcycle/internal/storage"
)

// Calls cancelled while in flight (a copy stopped by a failure elsewhere)
// leave their connection: the library answers such a call before its
// request is written, and a later call on that connection would encode into
// the buffer still being sent (a data race the -race pass of make test
// reports). Writers and readers are cancelled at random moments on one
// connection, and every call after them still works.
func TestCancelledCallsLeaveTheConnection(t *testing.T) {
	srv := sambatest.Start(t, sambatest.Options{})
	s, err := open(t, srv, srv.URL("backup")+"?conns=1", creds(srv))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	payload := bytes.Repeat([]byte("backupcycle "), 1<<17) // 1.5 MiB
	bg := context.Background()
	w, err := s.Create(bg, "cancel.bak")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteAt(payload, 0); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for round := range 20 {
		ctx, cancel := context.WithCancel(bg)
		r, err := s.OpenRead(ctx, "cancel.bak")
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for k := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]byte, 1<<20)
				for ctx.Err() == nil {
					_, _ = r.ReadAt(buf, int64(k)*(1<<18))
				}
			}()
		}
		time.Sleep(time.Duration(1+round%5) * time.Millisecond)
		cancel()
		wg.Wait()
		_ = r.Close()
		// The next calls, on whatever connection, work.
		if fi, err := s.Stat(bg, "cancel.bak"); err != nil || fi.Size != int64(len(payload)) {
			t.Fatalf("round %d: stat after cancelled reads: %+v %v", round, fi, err)
		}
		r2, err := s.OpenRead(bg, "cancel.bak")
		if err != nil {
			t.Fatalf("round %d: open after cancelled reads: %v", round, err)
		}
		got := make([]byte, 1024)
		if _, err := r2.ReadAt(got, 0); err != nil || !bytes.Equal(got, payload[:1024]) {
			t.Fatalf("round %d: read after cancelled reads: %v", round, err)
		}
		_ = r2.Close()
	}
}

// A call cancelled in flight must not garble the calls of others on the same
// connection: while one writer's context ends at a random moment, another
// writer with a live context keeps writing on that connection. Every write
// of the live writer either succeeds or fails as a dropped connection, and
// its file reads back exactly as written (the -race pass reports the shared
// buffer the library would otherwise encode into while sending).
func TestCancelledCallSpoilsNoOtherCall(t *testing.T) {
	srv := sambatest.Start(t, sambatest.Options{})
	s, err := open(t, srv, srv.URL("backup")+"?conns=1", creds(srv))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	bg := context.Background()
	block := bytes.Repeat([]byte("0123456789abcdef"), 1<<18) // 4 MiB
	for round := range 30 {
		ctx, cancel := context.WithCancel(bg)
		doomed, err := s.Create(ctx, fmt.Sprintf("doomed%d.bak", round))
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("live%d.bak", round)
		live, err := s.Create(bg, name)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for k := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					_, _ = doomed.WriteAt(block, int64(k)*int64(len(block)))
				}
			}()
		}
		liveErr := make(chan error, 1)
		go func() {
			var first error
			for k := range 4 {
				for {
					_, err := live.WriteAt(block, int64(k)*int64(len(block)))
					if err == nil {
						break
					}
					if !storage.IsRetryable(err) {
						first = err
						break
					}
				}
			}
			liveErr <- first
		}()
		time.Sleep(time.Duration(2+round%9) * time.Millisecond)
		cancel()
		wg.Wait()
		if err := <-liveErr; err != nil {
			t.Fatalf("round %d: the live writer failed beside a cancelled one: %v", round, err)
		}
		_ = doomed.Close()
		if err := live.Close(); err != nil {
			t.Fatalf("round %d: close: %v", round, err)
		}
		r, err := s.OpenRead(bg, name)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 4*len(block))
		if n, err := r.ReadAt(got, 0); n != len(got) || (err != nil && err != io.EOF) {
			t.Fatalf("round %d: read back %d bytes: %v", round, n, err)
		}
		_ = r.Close()
		if !bytes.Equal(got, bytes.Repeat(block, 4)) {
			t.Fatalf("round %d: the live writer's file differs from what it wrote", round)
		}
	}
}
