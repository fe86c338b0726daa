//go:build unix

package config

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// openSecretFile opens path for reading without blocking on a FIFO (which
// readSecretFile then refuses); symbolic links are followed, as Kubernetes
// mounts secrets through them.
func openSecretFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}

// checkSecretFileAccess refuses a password file that a user other than its
// owner may read or write (any group or other permission bit: chmod 0600 or
// 0400), or whose owner is neither the worker's user nor root, who could
// change it or its mode at will. This is the rule ssh applies to private
// keys.
//
// A credential systemd passes (LoadCredential=) to a service that does not
// run as root is mode 0400, owned by root, with an ACL entry that lets the
// service's user read it; stat shows the ACL's mask (r) in the group bits,
// so it reads 0440 although no group may read it. In $CREDENTIALS_DIRECTORY,
// which systemd alone writes, a group read bit is therefore accepted; a
// write or execute bit, or any bit for others, is not.
func checkSecretFileAccess(key, path string, fi fs.FileInfo) error {
	allowed := fs.FileMode(0)
	if inCredentialsDir(path) && !isSymlink(path) {
		allowed = 0o040
	}
	if perm := fi.Mode().Perm(); perm&0o077&^allowed != 0 {
		return fmt.Errorf("%s %s has mode %04o: other users of this host may read it: chmod 0600 %s (or 0400), "+
			"and change the secret if it may have been read", key, path, uint32(perm), path)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if uid := os.Geteuid(); int(st.Uid) != uid && st.Uid != 0 {
		return fmt.Errorf("%s %s is owned by uid %d, not by the worker's user (uid %d) or root: chown %d %s", key, path, st.Uid, uid, uid, path)
	}
	return nil
}

// isSymlink reports whether path itself is a symbolic link (or cannot be
// looked at).
func isSymlink(path string) bool {
	fi, err := os.Lstat(path)
	return err != nil || fi.Mode()&os.ModeSymlink != 0
}
