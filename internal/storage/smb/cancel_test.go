package smb_test

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/sambatest"
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
