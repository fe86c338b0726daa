package devenv

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/sambatest"
)

// The site's backup servers over SMB: one private smbd per server, its
// shares moved where smbd's user can reach them when the state directory is
// closed to it, and stopped with the site.

// serveSamba starts one smbd per backup server, per o.Samba. In auto mode a
// missing or failing Samba leaves the servers local, with s.SambaNote saying
// why (logged once).
func (s *Site) serveSamba(l layout, o Options) error {
	if o.Samba == SambaOff {
		s.SambaNote = "Samba off"
		return nil
	}
	err := sambatest.Installed()
	if err == nil {
		err = s.placeShares(l, o)
	}
	if err == nil {
		err = s.startSamba(l)
	}
	if err == nil {
		return nil
	}
	s.stopSamba()
	if o.Samba == SambaRequired {
		return fmt.Errorf("devenv: serve the backup servers over Samba: %w", err)
	}
	if sambatest.Installed() != nil {
		s.SambaNote = "Samba is not installed (apt-get install -y samba smbclient libnss-wrapper to serve them over SMB)"
	} else {
		s.SambaNote = "Samba failed to start: " + strings.SplitN(err.Error(), "\n", 2)[0]
	}
	o.Logger.Warn("backup servers are local directories, not served over Samba", zap.Error(err))
	return nil
}

func (s *Site) startSamba(l layout) error {
	for _, b := range BackupServers {
		pw, err := ensurePassword(l.smbPassword[b])
		if err != nil {
			return err
		}
		share, err := filepath.EvalSymlinks(l.bak[b])
		if err != nil {
			return err
		}
		srv, err := sambatest.Run(sambatest.Options{Dir: l.smbDir[b], User: smbUser, Password: pw,
			SharePaths: map[string]string{"backup": share}, RootOwned: true})
		if err != nil {
			return fmt.Errorf("smbd for %s: %w", b, err)
		}
		s.SMB[b] = srv
	}
	return nil
}

// placeShares moves each backup server's share where smbd's share user
// can reach it when the state directory is closed to other users (Debian
// makes home directories 0700, Ubuntu 0750; mktemp -d makes 0700): smbd
// switches to the share user for file access and could not reach a share
// under it. The share goes to a directory of its own under
// Options.ShareRoot, named by a hash of the state directory so that two
// clones never share one, with the sets already there, and the state
// directory keeps a link to it: the emulators and the worker's local
// paths go through the link, smbd serves the directory itself and keeps
// its own state beside it. A state directory others can reach keeps its
// shares.
func (s *Site) placeShares(l layout, o Options) error {
	root := o.ShareRoot
	if root == "" {
		root = DefaultShareRoot
	}
	sum := sha256.Sum256([]byte(l.root))
	dir := filepath.Join(root, hex.EncodeToString(sum[:6]))
	for _, b := range BackupServers {
		cur, err := filepath.EvalSymlinks(l.bak[b])
		if err != nil {
			return err
		}
		closed := sambatest.Reachable(cur)
		if closed == nil {
			if cur != l.bak[b] {
				// Moved by an earlier start: smbd's directories are there.
				l.smbDir[b] = filepath.Join(dir, "samba-"+b)
				s.ShareNote = "shares in " + dir
			}
			continue
		}
		if cur != l.bak[b] {
			return closed // a link already, to a place smbd cannot reach
		}
		// smbd's own directories go there too: its processes, switched
		// to the share user, open the lock directory's databases (share
		// modes) and fail on every directory handle otherwise.
		l.smbDir[b] = filepath.Join(dir, "samba-"+b)
		share := filepath.Join(dir, b)
		if err := mkdirOpen(root, share); err != nil {
			return fmt.Errorf("a share for %s in %s: %w", b, root, err)
		}
		if err := sambatest.Reachable(share); err != nil {
			return fmt.Errorf("%w; and the share root %s is not reachable either (Options.ShareRoot)", closed, root)
		}
		// Move what the state directory holds (sets of runs without
		// Samba) into the share, then link to it.
		entries, err := os.ReadDir(cur)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if err := os.Rename(filepath.Join(cur, e.Name()), filepath.Join(share, e.Name())); err != nil {
				return fmt.Errorf("move %s into the share %s: %w", e.Name(), share, err)
			}
		}
		if err := os.Remove(cur); err != nil {
			return err
		}
		if err := os.Symlink(share, cur); err != nil {
			return err
		}
		s.ShareNote = "shares in " + dir + ": a parent of the state directory is closed to smbd's share user"
	}
	return nil
}

// mkdirOpen creates dir and its missing parents up from root (root too),
// each searchable and readable by every user whatever the umask.
func mkdirOpen(root, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			return err
		}
		if d == root || d == filepath.Dir(d) {
			return nil
		}
	}
}

func (s *Site) stopSamba() error {
	var errs []error
	for b, srv := range s.SMB {
		if err := srv.Close(); err != nil {
			errs = append(errs, fmt.Errorf("devenv: stop smbd of %s: %w", b, err))
		}
		delete(s.SMB, b)
	}
	return errors.Join(errs...)
}
