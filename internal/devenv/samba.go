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

// The site's backup servers over SMB: one private smbd per server, stopped
// with the site. Run by a user other than root, smbd runs as that user
// (sambatest.AsInvoker) and serves the shares where they are, in the state
// directory, wherever the clone is; run by root, smbd's share user is an
// account of its own, and the shares move where it can reach them when the
// state directory is closed to other users.

// serveSamba starts one smbd per backup server, per o.Samba. In auto mode
// only a missing Samba leaves the servers local, with s.SambaNote saying
// why (logged once): an installed Samba that cannot serve them fails Start
// with the cause, so the demo never runs without SMB unnoticed.
func (s *Site) serveSamba(l layout, o Options) error {
	if o.Samba == SambaOff {
		s.SambaNote = "Samba off"
		return nil
	}
	if err := sambatest.Installed(); err != nil {
		if o.Samba == SambaRequired {
			return fmt.Errorf("devenv: serve the backup servers over Samba: %w", err)
		}
		s.SambaNote = missingSamba(err)
		o.Logger.Warn("backup servers are local directories, not served over Samba", zap.Error(err))
		return nil
	}
	err := s.placeShares(l, o)
	if err == nil {
		err = s.startSamba(l)
	}
	if err != nil {
		s.stopSamba()
		return fmt.Errorf("devenv: serve the backup servers over Samba (it is installed, so they are not left local directories): %w", err)
	}
	s.SMBNote = sambatest.ShareUser(smbUser)
	return nil
}

// missingSamba says what Installed found missing and the command that
// installs it.
func missingSamba(err error) string {
	sudo := ""
	if sambatest.AsInvoker() {
		sudo = "sudo "
	}
	if strings.Contains(err.Error(), "libuid_wrapper") {
		return "uid_wrapper, which smbd needs to run without root, is not installed (" + sudo +
			"apt-get install -y libuid-wrapper to serve them over SMB)"
	}
	cmd := sudo + "apt-get install -y samba smbclient libnss-wrapper"
	if sambatest.AsInvoker() {
		cmd += " libuid-wrapper"
	}
	return "Samba is not installed (" + cmd + " to serve them over SMB)"
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
// can reach it when it cannot reach the state directory: smbd run by root
// switches to its share user, uid 4450, for file access, and a state
// directory under a parent closed to other users (Debian makes home
// directories 0700, Ubuntu 0750; mktemp -d makes 0700) is out of its
// reach. (Run by another user, smbd's share user is that user, who reaches
// its own state directory: nothing moves.) The share goes to a directory of its own under
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
				s.ShareNote = "shares in " + dir + ", linked from the state directory"
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
		s.ShareNote = "shares in " + dir + ", linked from the state directory: a parent of it is closed to smbd's share user"
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
