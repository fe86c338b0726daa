package preflight

import (
	"strings"
	"testing"

	"github.com/backupcycle/backupcycle/internal/devenv"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// The minimal grants are least privilege on both instances and in the
// source database; each right beyond them, given to a login of the
// emulator over real TDS, is a warning naming the login, what it can do
// and the statement that takes it back, and nothing else changes.
func TestExcessPrivilegesThroughTheEmulator(t *testing.T) {
	s := startSite(t)
	restrict(t, s)
	r, text := runPreflight(t, s.Config, devenv.Database)
	if !r.OK || r.Warnings != 0 {
		t.Fatalf("minimal grants: missing %d, warnings %d:\n%s", r.Missing, r.Warnings, text)
	}
	for _, where := range []struct{ kind, inst string }{{KindInstance, devenv.SourceInstance}, {KindInstance, devenv.VerifyInstance},
		{KindDatabase, devenv.SourceInstance}} {
		if c := findIn(t, r, where.kind, where.inst, "least privilege"); c.Status != OK {
			t.Errorf("%s %s: %+v", where.kind, where.inst, c)
		}
	}

	with := func(l sqlsim.Login, server []string, db string, perms ...string) sqlsim.Login {
		c := l
		c.Server = append(append([]string(nil), l.Server...), server...)
		c.Databases = map[string][]string{}
		for k, v := range l.Databases {
			if k == db {
				v = append(append([]string(nil), v...), perms...)
			}
			c.Databases[k] = v
		}
		return c
	}
	sysadmin := minimalSource()
	sysadmin.Sysadmin = true
	cases := []struct {
		name     string
		instance *sqlsim.Instance
		login    sqlsim.Login
		kind     string
		where    string
		check    string
		detail   string
		fix      string
	}{
		{"source sysadmin", s.Source, sysadmin, KindInstance, devenv.SourceInstance, "least privilege: sysadmin",
			"bk_src is sysadmin", "ALTER SERVER ROLE [sysadmin] DROP MEMBER [bk_src];"},
		{"source CONTROL SERVER", s.Source, with(minimalSource(), []string{tsql.PermControlServer}, ""), KindInstance, devenv.SourceInstance,
			"least privilege: CONTROL SERVER", "holds CONTROL SERVER", "REVOKE CONTROL SERVER FROM [bk_src];"},
		{"source dbcreator", s.Source, with(minimalSource(), []string{tsql.RoleDBCreator}, ""), KindInstance, devenv.SourceInstance,
			"least privilege: dbcreator", "RESTORE over any database", "ALTER SERVER ROLE [dbcreator] DROP MEMBER [bk_src]; GRANT CREATE ANY DATABASE TO [bk_src];"},
		{"source securityadmin", s.Source, with(minimalSource(), []string{tsql.RoleSecurityAdmin}, ""), KindInstance, devenv.SourceInstance,
			"least privilege: securityadmin", "may manage logins", "ALTER SERVER ROLE [securityadmin] DROP MEMBER [bk_src];"},
		{"source db_owner of Sales", s.Source, with(minimalSource(), nil, devenv.Database, tsql.RoleDBOwner), KindDatabase, devenv.SourceInstance,
			"least privilege", "holds CONTROL of Sales", "USE [Sales]; ALTER ROLE [db_owner] DROP MEMBER [bk_src];"},
		{"verification ALTER ANY DATABASE", s.Verify, with(minimalVerify(), []string{tsql.PermAlterAnyDatabase}, ""), KindInstance, devenv.VerifyInstance,
			"least privilege: ALTER ANY DATABASE", "may alter and DROP any database", "REVOKE ALTER ANY DATABASE FROM [bk_ver];"},
		{"verification ALTER ANY LOGIN", s.Verify, with(minimalVerify(), []string{tsql.PermAlterAnyLogin}, ""), KindInstance, devenv.VerifyInstance,
			"least privilege: ALTER ANY LOGIN", "may manage logins", "REVOKE ALTER ANY LOGIN FROM [bk_ver];"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			setLogin(t, tc.instance, tc.login)
			defer func() {
				setLogin(t, s.Source, minimalSource())
				setLogin(t, s.Verify, minimalVerify())
			}()
			r, text := runPreflight(t, s.Config, devenv.Database)
			c := findIn(t, r, tc.kind, tc.where, tc.check)
			if c.Status != Warn || !strings.Contains(c.Detail, tc.detail) || !strings.Contains(c.Fix, tc.fix) {
				t.Errorf("%s: %s %q, fix %q; want WARN with %q and %q", tc.check, c.Status, c.Detail, c.Fix, tc.detail, tc.fix)
			}
			if !r.OK {
				t.Errorf("an excess right is a warning, not a missing one:\n%s", text)
			}
			for _, o := range r.Checks {
				if o.Status != OK && o.Name != tc.check {
					t.Errorf("%s/%s is %s too: %s", o.Instance+o.Server, o.Name, o.Status, o.Detail)
				}
			}
		})
	}
}
