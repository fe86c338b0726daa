package smb_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/backupcycle/backupcycle/internal/sambatest"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/storage/smb"
)

// counting is a TCP proxy in front of a server that counts the bytes the
// server sends: what a listing costs on the wire.
type counting struct {
	ln       net.Listener
	received atomic.Int64
	wg       sync.WaitGroup
}

func countingProxy(t *testing.T, target string) *counting {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &counting{ln: ln}
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.wg.Add(2)
			go func() { defer p.wg.Done(); _, _ = io.Copy(s, c); s.Close() }()
			go func() {
				defer p.wg.Done()
				_, _ = io.Copy(countingWriter{c, &p.received}, s)
				c.Close()
			}()
		}
	}()
	return p
}

func (p *counting) addr() string { return p.ln.Addr().String() }

// countingWriter counts what passes through it as it passes.
type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n.Add(int64(n))
	return n, err
}

// TestListSendsThePattern: a directory of many unrelated files (anyone who
// can write the share can make one) costs a listing by prefix next to
// nothing on the wire: the server is sent the pattern and answers with the
// matching entries only. Listing the whole directory and filtering here
// moved every entry, several times per cycle and every 5 minutes for the
// metrics.
func TestListSendsThePattern(t *testing.T) {
	srv := sambatest.Start(t, sambatest.Options{})
	dir := srv.Dir("backup")
	const unrelated = 20000
	for i := range unrelated {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("someone-elses-file-%06d.dat", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"sql01@sales_00000001.manifest.json", "sql01@sales_00000002.manifest.json"}
	for _, n := range append([]string{"sql01@sales_00000002_1of1.bak", "sql01@salesx_00000001.manifest.json"}, want...) {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := countingProxy(t, srv.Addr())
	cfg, err := smb.ParseURL("smb://" + p.addr() + "/backup?conns=1")
	if err != nil {
		t.Fatal(err)
	}
	s, err := smb.Open(context.Background(), cfg, creds(srv))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	before := p.received.Load()
	got, err := s.List(context.Background(), "sql01@sales_", ".manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, fi := range got {
		names = append(names, fi.Name)
	}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("List = %v, want %v", names, want)
	}
	// A directory entry is over 100 bytes on the wire: the whole directory
	// would be about 2.5 MB.
	if n := p.received.Load() - before; n > 64<<10 {
		t.Errorf("the listing received %d bytes from the server for %d matching of %d entries, want under 64 KiB", n, len(want), unrelated+4)
	} else {
		t.Logf("the listing received %d bytes from the server for %d matching of %d entries", n, len(want), unrelated+4)
	}
}

// TestSambaDefaultsFollowLinksInsideTheShare: with Samba's own defaults
// (follow symlinks = yes, wide links = no) a link pointing out of the share
// is neither listed nor read (the server refuses it), but one pointing
// inside it is followed by the server and looks like a regular file to
// every SMB client: why README "Backup shares" asks for follow symlinks =
// no (the conformance suite runs with it).
func TestSambaDefaultsFollowLinksInsideTheShare(t *testing.T) {
	srv := sambatest.Start(t, sambatest.Options{FollowSymlinks: true})
	dir := srv.Dir("backup")
	outside, err := os.MkdirTemp("", "smb-outside-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(outside)
	_ = os.Chmod(outside, 0o755)
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("SECRET"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "real_1of1.bak"), []byte("inside"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"out_1of1.bak": filepath.Join(outside, "secret"), "in_1of1.bak": "real_1of1.bak"} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	s, err := open(t, srv, srv.URL("backup"), creds(srv))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	got, err := s.List(ctx, "", "_1of1.bak")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, fi := range got {
		names = append(names, fi.Name)
	}
	if strings.Join(names, " ") != "in_1of1.bak real_1of1.bak" {
		t.Errorf("List = %v, want in_1of1.bak (followed by the server) and real_1of1.bak, not out_1of1.bak", names)
	}
	if data, err := storage.ReadFile(ctx, s, "out_1of1.bak"); err == nil || bytes.Contains(data, []byte("SECRET")) {
		t.Errorf("ReadFile of the link out of the share: %q, %v; want it refused", data, err)
	} else if !errors.Is(err, storage.ErrPermission) && !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("ReadFile of the link out of the share: %v, want ErrPermission or ErrNotFound", err)
	}
	if data, err := storage.ReadFile(ctx, s, "in_1of1.bak"); err != nil || string(data) != "inside" {
		t.Errorf("ReadFile of the link inside the share: %q, %v; the server follows it", data, err)
	}
}
