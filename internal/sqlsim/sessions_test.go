package sqlsim

import (
	"testing"
)

// TestSessionViews: sys.dm_exec_connections says how a session is
// connected (encrypt_option, auth_scheme, protocol_version, addresses)
// and needs VIEW SERVER STATE; sys.dm_exec_sessions shows a login its own
// session, and all of them with that permission.
func TestSessionViews(t *testing.T) {
	const q = "SELECT encrypt_option, auth_scheme, protocol_version, net_transport, client_net_address FROM sys.dm_exec_connections WHERE session_id = @@SPID"
	plain := newEnv(t, func(c *Config) {
		c.MajorVersion = 15 // 2019: the permission is VIEW SERVER STATE
		c.Principals = []Login{{Name: "backup", Password: testPass, Server: []string{"VIEW ANY DATABASE"}}}
	})
	r := mustRun(t, plain.db, q)
	if got := r.rows[0]; got[0] != "FALSE" || got[1] != "SQL" || asInt(got[2]) != 0x74000004 || got[3] != "TCP" || got[4] != "127.0.0.1" {
		t.Errorf("plain connection: %v", got)
	}
	on := newEnv(t, func(c *Config) { c.TLS = "on" })
	if r := mustRun(t, on.db, q); r.rows[0][0] != "TRUE" {
		t.Errorf("TLS connection: encrypt_option %v", r.rows[0][0])
	}

	// Without VIEW SERVER STATE: connections refused (300, 297), sessions
	// only the own one.
	bk := plain.openAs(t, "backup", testPass, "master")
	r = wantErrs(t, bk, []int32{300, 297}, q)
	if r.errs[0].Message != "VIEW SERVER STATE permission was denied on object 'server', database 'master'." {
		t.Errorf("300: %q", r.errs[0].Message)
	}
	mustRun(t, plain.db, "SELECT 1") // sa's session exists
	r = mustRun(t, bk, "SELECT session_id, login_name, status FROM sys.dm_exec_sessions")
	if len(r.rows) != 1 || r.rows[0][1] != "backup" || r.rows[0][2] != "running" {
		t.Errorf("sessions seen without VIEW SERVER STATE: %v", r.rows)
	}
	r = mustRun(t, plain.db, "SELECT login_name FROM sys.dm_exec_sessions ORDER BY session_id")
	if len(r.rows) < 2 {
		t.Errorf("sa sees %d sessions, want both", len(r.rows))
	}
}
