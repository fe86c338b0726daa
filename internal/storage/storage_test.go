package storage_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/storage/local"
)

func TestCredentialsHidePassword(t *testing.T) {
	c := storage.Credentials{User: "bak", Password: "hunter2", Domain: "CORP"}
	js, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{fmt.Sprint(c), fmt.Sprintf("%v %+v %#v %s", c, c, c, c), string(js)} {
		if strings.Contains(s, "hunter2") || !strings.Contains(s, "bak") {
			t.Fatalf("formatted credentials %q leak the password or lose the user", s)
		}
	}
}

func TestIsRetryable(t *testing.T) {
	wrap := func(kind error) error {
		return fmt.Errorf("activity: %w", &storage.Error{Op: "write", Location: "smb://bak01:445/backup", Name: "x.bak", Kind: kind, Err: errors.New("boom")})
	}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{wrap(storage.ErrConnection), true},
		{wrap(nil), true}, // unclassified I/O error: let the retry policy decide
		{context.DeadlineExceeded, true},
		{wrap(storage.ErrAuth), false},
		{wrap(storage.ErrShareNotFound), false},
		{wrap(storage.ErrNotFound), false},
		{wrap(storage.ErrExists), false},
		{wrap(storage.ErrNoSpace), false},
		{wrap(storage.ErrPermission), false},
		{wrap(storage.ErrInvalidName), false},
		{wrap(storage.ErrCorrupt), false},
		{wrap(storage.ErrNotRegular), false},
		{wrap(storage.ErrTooLarge), false},
		{context.Canceled, false},
		{nil, false},
		{errors.Join(wrap(storage.ErrConnection), wrap(storage.ErrExists)), false},
		{errors.Join(wrap(storage.ErrConnection), context.Canceled), true},
	} {
		if got := storage.IsRetryable(tc.err); got != tc.want {
			t.Errorf("IsRetryable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	if k := storage.Kind(wrap(storage.ErrNoSpace)); k != storage.ErrNoSpace {
		t.Errorf("Kind = %v, want ErrNoSpace", k)
	}
	if et := storage.ErrorType(wrap(storage.ErrNoSpace)); et != "StorageNoSpace" {
		t.Errorf("ErrorType = %q, want StorageNoSpace", et)
	}
	if et := storage.ErrorType(errors.New("x")); et != "StorageError" {
		t.Errorf("ErrorType of an unclassified error = %q", et)
	}
}

func TestErrorMessage(t *testing.T) {
	err := &storage.Error{Op: "create", Location: "smb://bak01:445/backup/sql", Name: "Sales_00000007_1of4.bak", Kind: storage.ErrAuth, Err: errors.New("logon failure")}
	want := `create "Sales_00000007_1of4.bak" on smb://bak01:445/backup/sql: authentication failed: logon failure (check the user and the password the credential reference points to)`
	if err.Error() != want {
		t.Fatalf("message:\n got %s\nwant %s", err, want)
	}
	if !errors.Is(err, storage.ErrAuth) {
		t.Fatal("errors.Is(ErrAuth) = false")
	}
}

func TestCheckName(t *testing.T) {
	for _, ok := range []string{"a.bak", "sql/Sales_00000001_1of4.bak", "dir with space/ü.bak", "x$.bak"} {
		if err := storage.CheckName("stat", "file:///x", ok); err != nil {
			t.Errorf("CheckName(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "/abs", "../up", "a/../b", "a/./b", "a//b", "a/", `a\b`, "a:b", "a*b", "a?b", `a"b`, "a<b", "a>b", "a|b", "a\x00b", "a\nb"} {
		err := storage.CheckName("stat", "file:///x", bad)
		if !errors.Is(err, storage.ErrInvalidName) || !strings.Contains(err.Error(), "file:///x") {
			t.Errorf("CheckName(%q) = %v, want ErrInvalidName naming the location", bad, err)
		}
	}
}

// TestReadFileRefusesLargeFiles: ReadFile is for small files (manifests,
// sequence files): one over MaxSmallFile is refused with StorageTooLarge,
// naming it, before any of it is read; a sparse 64 GiB file costs its
// writer nothing and must not cost the reader its memory.
func TestReadFileRefusesLargeFiles(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	st, err := local.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for name, size := range map[string]int64{"huge.manifest.json": 64 << 30, "over.manifest.json": 1<<20 + 1, "fits.manifest.json": 1 << 20} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(filepath.Join(dir, name), size); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"huge.manifest.json", "over.manifest.json"} {
		_, err := storage.ReadFile(ctx, st, name)
		if storage.ErrorType(err) != "StorageTooLarge" || !strings.Contains(err.Error(), name) || storage.IsRetryable(err) {
			t.Errorf("ReadFile(%s) = %v (%s), want a non-retryable StorageTooLarge naming it", name, err, storage.ErrorType(err))
		}
	}
	if data, err := storage.ReadFile(ctx, st, "fits.manifest.json"); err != nil || len(data) != 1<<20 {
		t.Errorf("ReadFile of 1 MiB: %d bytes, %v", len(data), err)
	}
}
