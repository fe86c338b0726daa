package sqlsim

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/backupcycle/backupcycle/internal/sqlsim/tds"
)

// target is a path as SQL Server sees it, resolved to the local file system.
type target struct {
	raw   string // as written in the statement
	local string // local path; "" for NUL
	null  bool
	share *shareMap
}

// resolve maps a SQL Server path: NUL, a configured share or drive prefix
// (\\bak01\backup\x.bak), an absolute local path, or a relative name (the
// instance's default backup directory). The returned string is the
// Windows error SQL Server would quote when the path cannot be reached:
// its directory missing is osMissing (3, or 2 on Linux).
func (in *Instance) resolve(p string) (target, string) {
	t, oserr := in.mapPath(p)
	if oserr != "" || t.null {
		return t, oserr
	}
	if st, err := os.Stat(filepath.Dir(t.local)); err != nil || !st.IsDir() {
		return t, in.osMissing()
	}
	if t.share != nil && strings.HasPrefix(t.share.prefix, `\\`) {
		// A file server serves no symbolic link out of its share: Samba
		// refuses it ("wide links = no", the default; "follow symlinks =
		// no" refuses every link), and the Windows SMB client evaluates a
		// remote-to-remote link only when that is enabled, which it is not
		// by default ("fsutil behavior set SymlinkEvaluation", Microsoft
		// Learn; smb.conf(5)). SQL Server then cannot open the device:
		// operating system error 5.
		if fi, err := os.Lstat(t.local); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			return t, osAccessDenied
		}
	}
	return t, ""
}

// mapPath is resolve without looking at the file system.
func (in *Instance) mapPath(p string) (target, string) {
	t := target{raw: p}
	if strings.EqualFold(strings.TrimSpace(p), "NUL") || strings.EqualFold(p, "NUL:") {
		t.null = true
		return t, ""
	}
	if in.linux() && (strings.HasPrefix(p, `\\`) || strings.HasPrefix(p, "//")) {
		// No UNC on Linux: the path names a local directory //host/share
		// that does not exist (see linuxPath).
		t.raw = linuxPath(p)
		return t, osFileNotFound
	}
	norm := strings.ToLower(strings.ReplaceAll(p, "/", `\`))
	in.mu.Lock()
	for i := range in.shares {
		s := &in.shares[i]
		if norm == s.prefix { // the share's own directory
			t.local, t.share = s.dir, s
			break
		}
		if strings.HasPrefix(norm, s.prefix+`\`) {
			rest := strings.ReplaceAll(p[len(s.prefix)+1:], `\`, "/")
			t.local = filepath.Join(s.dir, filepath.FromSlash(rest))
			t.share = s
			if s.windows {
				// Windows shares and drives match file names
				// case-insensitively (collation.go, foldedPath).
				t.local = foldedPath(t.local)
			}
			break
		}
	}
	unreachable := t.share != nil && in.faults.unreachable[t.share.prefix]
	netErr := ""
	if t.share != nil {
		netErr = in.faults.netErr[t.share.prefix]
	}
	unknownUNC := ""
	if t.share == nil && strings.HasPrefix(norm, `\\`) {
		unknownUNC = in.unknownUNCLocked(norm)
	}
	in.mu.Unlock()
	switch {
	case unreachable:
		return t, osNetNotFound
	case netErr != "":
		return t, netErr
	case t.share != nil:
	case unknownUNC != "":
		return t, unknownUNC
	case len(p) >= 2 && p[1] == ':':
		return t, in.osMissing() // a drive that is not mapped
	case filepath.IsAbs(p):
		t.local = filepath.Clean(p)
	default:
		t.local = filepath.Join(in.cfg.DataDir, "backup", filepath.FromSlash(strings.ReplaceAll(p, `\`, "/")))
	}
	return t, ""
}

// unknownUNCLocked is the operating system error of a UNC path (lower
// case, backslashes) under no mapped share, as Windows answers it: 53
// (ERROR_BAD_NETPATH) when its host is unknown or away, 67
// (ERROR_BAD_NET_NAME) when the host is there but has no such share, 3
// when the share is there but not the directory
// (https://learn.microsoft.com/en-us/windows/win32/debug/system-error-codes--0-499-).
func (in *Instance) unknownUNCLocked(norm string) string {
	parts := strings.SplitN(strings.TrimPrefix(norm, `\\`), `\`, 3)
	host := `\\` + parts[0] + `\`
	share := ""
	if len(parts) > 1 {
		share = host + parts[1]
	}
	known := false
	for i := range in.shares {
		p := in.shares[i].prefix
		if !strings.HasPrefix(p, host) {
			continue
		}
		if in.faults.unreachable[p] {
			return osNetNotFound // the host is away
		}
		known = true
		if share != "" && (p == share || strings.HasPrefix(p, share+`\`)) {
			return osPathNotFound
		}
	}
	if known {
		return osNetNameNotFound
	}
	return osNetNotFound
}

// limiter paces bytes to a rate; a zero rate means unlimited. One limiter
// may be shared by several streams (a share's NIC).
type limiter struct {
	mu   sync.Mutex
	rate int64
	next time.Time
}

func (l *limiter) setRate(r int64) {
	l.mu.Lock()
	l.rate = r
	l.next = time.Time{}
	l.mu.Unlock()
}

func (l *limiter) wait(ctx context.Context, n int) error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	if l.rate <= 0 {
		l.mu.Unlock()
		return nil
	}
	now := time.Now()
	if l.next.Before(now) {
		l.next = now
	}
	l.next = l.next.Add(time.Duration(float64(n) / float64(l.rate) * float64(time.Second)))
	until := l.next
	l.mu.Unlock()
	d := time.Until(until)
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// dirUsage sums the sizes of the files under dir.
func dirUsage(dir string) int64 {
	var total int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if !d.IsDir() {
			if info, err := d.Info(); err == nil {
				total += info.Size()
			}
		}
		return nil
	})
	return total
}

var errDiskFull = errors.New("share quota exceeded")

// Windows error texts SQL Server quotes after "Operating system error"
// (https://learn.microsoft.com/en-us/windows/win32/debug/system-error-codes--0-499-).
const (
	osHandleEOF        = "38(Reached the end of the file.)"
	osSharingViolation = "32(The process cannot access the file because it is being used by another process.)"
	osNetUnexpected    = "59(An unexpected network error occurred.)"
	osNetNameGone      = "64(The specified network name is no longer available.)"
	osFileSystemLimit  = "665(The requested operation could not be completed due to a file system limitation)"
)

// errWriteFailed is 3202 "Write on "<path>" failed: <os error>", errReadFailed
// 3203 "Read on ..."
// (https://learn.microsoft.com/en-us/sql/relational-databases/errors-events/database-engine-events-and-errors-3000-to-3999).
func errWriteFailed(path, oserr string) *tds.Error {
	return sqlErr(3202, 16, "Write on \"%s\" failed: %s", path, oserr)
}

func errReadFailed(path, oserr string) *tds.Error {
	return sqlErr(3203, 16, "Read on \"%s\" failed: %s", path, oserr)
}

// errRange is 3250 for a BACKUP/RESTORE option value out of range (same
// page as above).
func errRange(v int, param string) *tds.Error {
	return sqlErr(3250, 16, "The value '%d' is not within range for the %s parameter.", v, param)
}
