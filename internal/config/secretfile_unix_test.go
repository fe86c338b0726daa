//go:build unix

package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A password_file is read only when it is a regular file its owner alone
// may read, owned by the worker's user or root, and of a password's size:
// a FIFO or a device would block or never end, a file others can read has
// leaked already, a long file is not a password.
func TestResolveSecretFileChecks(t *testing.T) {
	const value = "Pa55-w0rd-file"
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // whatever the umask
			t.Fatal(err)
		}
		return p
	}
	owner := write("owner-only", value+"\n", 0o600)
	readOnly := write("read-only", value, 0o400)
	exactly := write("exactly-4KiB", value+"\n"+strings.Repeat("x", MaxSecretFileSize-len(value)-1), 0o600)
	worldReadable := write("world-readable", value+"\n", 0o644)
	groupReadable := write("group-readable", value+"\n", 0o640)
	groupWritable := write("group-writable", value+"\n", 0o620)
	tooLong := write("too-long", value+"\n"+strings.Repeat("x", MaxSecretFileSize), 0o600)
	otherOwner := write("other-owner", value+"\n", 0o600)
	if err := os.Chown(otherOwner, os.Geteuid()+4242, -1); err != nil {
		t.Fatalf("chown (the tests run as root): %v", err)
	}
	link := filepath.Join(dir, "link") // Kubernetes mounts secrets as symbolic links
	if err := os.Symlink(owner, link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name   string
		file   string
		errHas string // "": resolves to value
	}{
		{"owner only", owner, ""},
		{"read-only", readOnly, ""},
		{"4 KiB", exactly, ""},
		{"symbolic link to a good file", link, ""},
		{"world-readable", worldReadable, "password_file " + worldReadable + " has mode 0644: other users of this host may read it: chmod 0600"},
		{"group-readable", groupReadable, "has mode 0640"},
		{"group-writable", groupWritable, "has mode 0620"},
		{"larger than 4 KiB", tooLong, "password_file " + tooLong + " is larger than 4 KiB"},
		{"another user's", otherOwner, "is owned by uid"},
		{"FIFO", fifo, "password_file " + fifo + " is not a regular file"},
		{"device", "/dev/zero", "password_file /dev/zero is not a regular file"},
		{"directory", dir, "is not a regular file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			type result struct {
				v   string
				err error
			}
			done := make(chan result, 1)
			go func() {
				v, err := ResolveSecret(SecretRef{File: c.file})
				done <- result{v, err}
			}()
			var r result
			select {
			case r = <-done:
			case <-time.After(5 * time.Second):
				t.Fatalf("ResolveSecret(%s) still reading after 5s", c.file)
			}
			if c.errHas == "" {
				if r.err != nil || r.v != value {
					t.Fatalf("got %q, %v; want the password", r.v, r.err)
				}
				return
			}
			if r.err == nil {
				t.Fatalf("read %d bytes, want an error containing %q", len(r.v), c.errHas)
			}
			if !errors.Is(r.err, ErrSecretUnavailable) || !strings.Contains(r.err.Error(), c.errHas) {
				t.Errorf("error %q: want ErrSecretUnavailable containing %q", r.err, c.errHas)
			}
			if strings.Contains(r.err.Error(), value) {
				t.Errorf("error leaks the secret: %v", r.err)
			}
		})
	}
}
