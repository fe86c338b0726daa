// Package credtest writes files the way systemd writes a service's
// credentials (LoadCredential=) for a service user other than root: the
// file mode 0400 and root's (the caller's), readable by the user through a
// POSIX ACL entry, so that stat shows the ACL's mask in the group bits
// (0440). Tests use it to check what the worker accepts under systemd
// without a running systemd.
package credtest

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Permission bits of an ACL entry.
const (
	Read    = 4
	Execute = 1
)

// Write writes content to dir/name as systemd writes a credential of a
// service running as uid, and returns its path.
func Write(dir, name string, content []byte, uid int) (string, error) {
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, content, 0o600); err != nil {
		return "", err
	}
	if err := os.Chmod(p, 0o400); err != nil { // whatever the umask
		return "", err
	}
	return p, SetUserACL(p, uid, Read)
}

// SetUserACL gives uid the permissions perm on path with an ACL entry
// user:uid:perm (and the mask perm), leaving the owner's bits as they are
// and none to the group and others. It writes the system.posix_acl_access
// attribute itself, so no setfacl is needed.
func SetUserACL(path string, uid int, perm uint16) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	const (
		version     = 2
		userObj     = 0x01
		user        = 0x02
		groupObj    = 0x04
		mask        = 0x10
		other       = 0x20
		undefinedID = 0xffffffff
	)
	owner := uint16(fi.Mode().Perm() >> 6)
	entries := []struct {
		tag, perm uint16
		id        uint32
	}{
		{userObj, owner, undefinedID}, {user, perm, uint32(uid)}, {groupObj, 0, undefinedID},
		{mask, perm, undefinedID}, {other, 0, undefinedID},
	}
	b := binary.LittleEndian.AppendUint32(nil, version)
	for _, e := range entries {
		b = binary.LittleEndian.AppendUint16(b, e.tag)
		b = binary.LittleEndian.AppendUint16(b, e.perm)
		b = binary.LittleEndian.AppendUint32(b, e.id)
	}
	if err := unix.Setxattr(path, "system.posix_acl_access", b, 0); err != nil {
		return fmt.Errorf("set the ACL of %s (the file system must support POSIX ACLs, as systemd's credentials file system does): %w", path, err)
	}
	return nil
}
