package smb_test

import (
	"context"
	"testing"

	"github.com/backupcycle/backupcycle/internal/sambatest"
	"github.com/backupcycle/backupcycle/internal/storage/smb"
)

// Against real Samba: the owner of a file the share user creates is the
// user (a SID of the server's domain), or Unix User\root when the share
// maps the user to root (admin users); the directory's owner is the user
// by default and root with RootOwned (so root, the admin user, owns it).
func TestPrivileges(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    sambatest.Options
		admin   string
		ownsDir bool
	}{
		{"user owns the directory", sambatest.Options{}, "", true},
		{"root owns the directory", sambatest.Options{RootOwned: true}, "", false},
		{"admin users", sambatest.Options{RootOwned: true, Global: []string{"admin users = " + sambatest.DefaultUser}}, `Unix User\root`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := sambatest.Start(t, tc.opts)
			st, err := open(t, srv, srv.URL("backup"), creds(srv))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			ctx := context.Background()
			w, err := st.Create(ctx, "probe.tmp")
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			p, err := st.Privileges(ctx, "probe.tmp")
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%+v", p)
			if p.Admin != tc.admin || p.OwnsDir() != tc.ownsDir || p.Self == "" || p.DirOwner == "" {
				t.Errorf("%+v: want admin %q, owns the directory %v", p, tc.admin, tc.ownsDir)
			}
			if tc.admin == "" && smb.AdminSID(p.Self) != "" {
				t.Errorf("the share user's own SID %s counts as an administrator's", p.Self)
			}
			if _, err := st.Privileges(ctx, "absent.tmp"); err == nil {
				t.Error("Privileges of a file that is not there: no error")
			}
		})
	}
}
