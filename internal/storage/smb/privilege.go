package smb

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/cloudsoda/go-smb2"
)

// Privileges is what SMB shows of the worker's account beyond what the
// product needs on its share: modify (read, write, delete) in the
// location's directory, nothing else. What the share's ACL grants the
// account is not among it: Samba maps read, write and execute to full
// control when a file is opened, so the access it grants at the open
// (WRITE_DAC included) says nothing about what it lets the account change.
type Privileges struct {
	// Self is the owner SID of a file the account created: the account
	// itself, or the group or user the server makes an administrator's
	// files owned by.
	Self string `json:"self"`
	// Admin names the administrator Self is (AdminSID); "" for none.
	Admin string `json:"admin,omitempty"`
	// DirOwner is the owner SID of the location's directory: when it is
	// Self, the account may change the directory's ACL (an owner's
	// implicit right, on Windows and in Samba alike).
	DirOwner string `json:"dir_owner"`
}

// OwnsDir reports whether the account owns the location's directory.
func (p Privileges) OwnsDir() bool { return p.Self != "" && p.Self == p.DirOwner }

// Well-known owners of an administrator's files ("Well-known SIDs",
// Microsoft Learn): a member of Administrators creates files owned by the
// group BUILTIN\Administrators (S-1-5-32-544) by default, LocalSystem's
// files are S-1-5-18's; Samba shows a file of the Unix user root, which
// "admin users" of a share and a root login create, as S-1-22-1-0 (its
// "Unix User" domain S-1-22-1-<uid>).
var adminSIDs = map[string]string{
	"S-1-5-32-544": `BUILTIN\Administrators`,
	"S-1-5-18":     "LocalSystem",
	"S-1-22-1-0":   `Unix User\root`,
}

// AdminSID names an administrator's SID, "" for any other.
func AdminSID(sid string) string { return adminSIDs[sid] }

// Privileges reads the owner of probe, a file the account created in the
// location's directory, and of the directory itself (SMB2 QUERY_INFO of
// the owner: READ_CONTROL, which the owner and modify hold).
func (s *Storage) Privileges(ctx context.Context, probe string) (Privileges, error) {
	if err := s.check("privileges", probe); err != nil {
		return Privileges{}, err
	}
	var p Privileges
	err := s.doOnce(ctx, "privileges", probe, func(sh *smb2.Share) error {
		var err error
		if p.Self, err = ownerOf(sh, s.full(probe)); err != nil {
			return err
		}
		p.DirOwner, err = ownerOf(sh, s.full(""))
		return err
	})
	if err != nil {
		return Privileges{}, err
	}
	p.Admin = AdminSID(p.Self)
	return p, nil
}

// ownerOf is the owner SID of name, as S-1-...
func ownerOf(sh *smb2.Share, name string) (string, error) {
	raw, err := sh.SecurityInfoRaw(name, smb2.OwnerSecurityInformation)
	if err != nil {
		return "", err
	}
	return descriptorOwner(raw)
}

// descriptorOwner reads the owner SID of a self-relative security
// descriptor ([MS-DTYP] 2.4.6 SECURITY_DESCRIPTOR: OffsetOwner at byte 4;
// 2.4.2.2 SID: revision, sub-authority count, a 48-bit big-endian
// identifier authority, then the sub-authorities, little-endian).
func descriptorOwner(sd []byte) (string, error) {
	if len(sd) < 20 {
		return "", fmt.Errorf("security descriptor of %d bytes", len(sd))
	}
	off := int(binary.LittleEndian.Uint32(sd[4:8]))
	if off == 0 {
		return "", errors.New("the security descriptor has no owner")
	}
	if off+8 > len(sd) {
		return "", fmt.Errorf("owner offset %d outside a security descriptor of %d bytes", off, len(sd))
	}
	sid := sd[off:]
	n := int(sid[1])
	if 8+4*n > len(sid) {
		return "", fmt.Errorf("owner SID with %d sub-authorities outside the security descriptor", n)
	}
	var auth uint64
	for _, b := range sid[2:8] {
		auth = auth<<8 | uint64(b)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "S-%d-%d", sid[0], auth)
	for i := range n {
		fmt.Fprintf(&b, "-%d", binary.LittleEndian.Uint32(sid[8+4*i:]))
	}
	return b.String(), nil
}
