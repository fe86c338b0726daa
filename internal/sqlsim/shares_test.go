package sqlsim

import (
	"strings"
	"testing"
)

// TestUnknownShareOnKnownHost: a UNC path naming a share the reachable
// host does not have fails with operating system error 67 (the network
// name cannot be found); an unknown host with 53 (the network path was not
// found); a missing directory of a known share with 3.
func TestUnknownShareOnKnownHost(t *testing.T) {
	e := newEnv(t)
	e.create(t, DatabaseSpec{Name: "Sales", Size: 1 << 20})
	for _, tc := range []struct{ path, want string }{
		{`\\bak01\bakup\s.bak`, "Operating system error 67(The network name cannot be found.)"},
		{`\\BAK01\Bakup\s.bak`, "Operating system error 67(The network name cannot be found.)"},
		{`\\bak09\backup\s.bak`, "Operating system error 53(The network path was not found.)"},
		{`\\bak01\backup\no-such-dir\s.bak`, "Operating system error 3(The system cannot find the path specified.)"},
	} {
		r := mustFail(t, e.db, 3013, "BACKUP DATABASE [Sales] TO DISK = N'"+tc.path+"' WITH INIT, FORMAT")
		if r.errs[0].Number != 3201 || !strings.Contains(r.errs[0].Message, tc.want) {
			t.Errorf("BACKUP to %s: %v; want 3201 with %q", tc.path, r.errs, tc.want)
		}
	}
}
