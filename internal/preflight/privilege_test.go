package preflight

import (
	"context"
	"strings"
	"testing"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/devenv"
	"github.com/backupcycle/backupcycle/internal/s3test"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
	"github.com/backupcycle/backupcycle/internal/storage/s3"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// The minimal grants are least privilege on both instances and in the
// source database; each right beyond them, given to a login of the
// emulator over real TDS, is a warning naming the login, what it can do
// and the statement that takes it back, and nothing else changes.
func TestExcessPrivilegesThroughTheEmulator(t *testing.T) {
	s, r := minimalSite(t)
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
		{"source serveradmin", s.Source, with(minimalSource(), []string{tsql.RoleServerAdmin}, ""), KindInstance, devenv.SourceInstance,
			"least privilege: serveradmin", "shut sql01 down", "ALTER SERVER ROLE [serveradmin] DROP MEMBER [bk_src];"},
		{"source db_owner of Sales", s.Source, with(minimalSource(), nil, devenv.Database, tsql.RoleDBOwner), KindDatabase, devenv.SourceInstance,
			"least privilege", "holds CONTROL of Sales", "USE [Sales]; ALTER ROLE [db_owner] DROP MEMBER [bk_src];"},
		{"source ALTER of Sales once the sequence table exists", s.Source, with(minimalSource(), nil, devenv.Database, tsql.PermAlter),
			KindDatabase, devenv.SourceInstance, "least privilege", "holds ALTER on Sales", "USE [Sales]; REVOKE ALTER ON DATABASE::[Sales] FROM [bk_src];"},
		{"verification ALTER ANY DATABASE", s.Verify, with(minimalVerify(), []string{tsql.PermAlterAnyDatabase}, ""), KindInstance, devenv.VerifyInstance,
			"least privilege: ALTER ANY DATABASE", "may alter and DROP any database", "REVOKE ALTER ANY DATABASE FROM [bk_ver];"},
		{"verification ALTER ANY LOGIN", s.Verify, with(minimalVerify(), []string{tsql.PermAlterAnyLogin}, ""), KindInstance, devenv.VerifyInstance,
			"least privilege: ALTER ANY LOGIN", "may manage logins", "REVOKE ALTER ANY LOGIN FROM [bk_ver];"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, text := preflightAs(t, s, tc.instance, tc.login)
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

// A kind: s3 backup server is opened, probed for immutability and for
// what its key may do beyond the worker's needs: the bucket's root key may
// delete the bucket, bypass governance retention, change the lock
// configuration and the policy (four warnings naming the key and the
// action to deny); the worker's user under the README's policy none.
func TestObjectStoreKeyPrivilegesOnVersitygw(t *testing.T) {
	s := startSite(t)
	restrict(t, s)
	srv := s3test.Start(t)
	const user, secret = "backupworker", "backupworker-secret-1"
	if err := srv.WorkerBucket(context.Background(), "worm", user, secret); err != nil {
		t.Fatal(err)
	}
	s.Config.BackupServers = append(s.Config.BackupServers, config.BackupServer{Name: "vault01", Kind: config.KindS3, MaxConcurrent: 1,
		S3: &config.S3{Endpoint: srv.Endpoint, Region: "us-east-1", Bucket: "worm", Prefix: "sets/", PathStyle: true,
			SecretAccessKeyEnv: "PREFLIGHT_TEST_S3_SECRET", LockMode: config.LockGovernance}})
	vault := &s.Config.BackupServers[len(s.Config.BackupServers)-1]
	checks := []string{s3.PrivilegeDeleteBucket, s3.PrivilegeBypass, s3.PrivilegeLockConfig, s3.PrivilegeBucketPolicy}

	// The root key: governance is no lock for it, and every check warns.
	vault.S3.AccessKeyID = srv.RootAccess
	t.Setenv("PREFLIGHT_TEST_S3_SECRET", srv.RootSecret)
	r, text := runPreflight(t, s.Config, "")
	if c := findIn(t, r, KindServer, "vault01", "immutable"); c.Status != Missing || !strings.Contains(c.Detail, "bypassing governance") {
		t.Errorf("root key in governance mode: %+v", c)
	}
	for _, name := range checks {
		c := findIn(t, r, KindServer, "vault01", "least privilege: "+name)
		if c.Status != Warn || !strings.Contains(c.Detail, "the key "+srv.RootAccess+" may "+name) || !strings.Contains(c.Fix, "deny s3:") {
			t.Errorf("root key, %s: %+v", name, c)
		}
	}
	if !strings.Contains(text, "object store vault01 (bucket worm at "+srv.Endpoint+")") {
		t.Errorf("the report does not name the object store:\n%s", text)
	}
	if strings.Contains(text, srv.RootSecret) {
		t.Errorf("the report prints the secret key:\n%s", text)
	}

	// The worker's user: immutable, nothing beyond its needs; the policy
	// it may not read stays unchecked, which is no warning.
	vault.S3.AccessKeyID = user
	t.Setenv("PREFLIGHT_TEST_S3_SECRET", secret)
	r, text = runPreflight(t, s.Config, "")
	if !r.OK || r.Warnings != 0 {
		t.Errorf("least-privilege key: missing %d, warnings %d:\n%s", r.Missing, r.Warnings, text)
	}
	for _, name := range checks {
		c := findIn(t, r, KindServer, "vault01", "least privilege: "+name)
		want := "refused: AccessDenied"
		if name == s3.PrivilegeBucketPolicy {
			want = "not checked: the key may not read the policy"
		}
		if c.Status != OK || !strings.Contains(c.Detail, want) {
			t.Errorf("worker's key, %s: %+v, want OK %q", name, c, want)
		}
	}
}
