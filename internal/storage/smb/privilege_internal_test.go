package smb

import (
	"encoding/binary"
	"testing"
)

// A self-relative security descriptor's owner is read from its offset; a
// descriptor too short, without an owner or with an owner outside it is
// an error, never a panic.
func TestDescriptorOwner(t *testing.T) {
	sid := []byte{1, 2, 0, 0, 0, 0, 0, 5, 32, 0, 0, 0, 0x20, 0x02, 0, 0} // S-1-5-32-544
	sd := make([]byte, 20)
	sd[0] = 1
	binary.LittleEndian.PutUint32(sd[4:], 20)
	sd = append(sd, sid...)
	if got, err := descriptorOwner(sd); err != nil || got != "S-1-5-32-544" || AdminSID(got) != `BUILTIN\Administrators` {
		t.Errorf("owner %q, %v", got, err)
	}
	noOwner := append([]byte(nil), sd...)
	binary.LittleEndian.PutUint32(noOwner[4:], 0)
	outside := append([]byte(nil), sd...)
	binary.LittleEndian.PutUint32(outside[4:], 1<<20)
	cut := sd[:len(sd)-4] // the second sub-authority missing
	for name, b := range map[string][]byte{"short": sd[:10], "no owner": noOwner, "outside": outside, "cut": cut} {
		if got, err := descriptorOwner(b); err == nil {
			t.Errorf("%s: owner %q, no error", name, got)
		}
	}
}
