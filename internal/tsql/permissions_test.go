package tsql

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// Securables travel as parameters, classes and permission names as literals
// from this package's list; one column per check, in order.
func TestHasPerms(t *testing.T) {
	hostile := "Sales]; DROP DATABASE x--"
	obj, err := SequenceObject(hostile)
	if err != nil {
		t.Fatal(err)
	}
	if obj != "[Sales]]; DROP DATABASE x--].[DBBackup].[Sequence]" {
		t.Fatalf("SequenceObject = %s", obj)
	}
	q, args, err := HasPerms(
		PermCheck{Permission: PermViewServerState},
		PermCheck{Securable: hostile, Class: ClassDatabase, Permission: PermBackupDatabase},
		PermCheck{Securable: obj, Class: ClassObject, Permission: PermUpdate},
	)
	if err != nil {
		t.Fatal(err)
	}
	want := "SELECT HAS_PERMS_BY_NAME(NULL, NULL, N'VIEW SERVER STATE'), " +
		"HAS_PERMS_BY_NAME(@p1, N'DATABASE', N'BACKUP DATABASE'), HAS_PERMS_BY_NAME(@p2, N'OBJECT', N'UPDATE')"
	if q != want || !reflect.DeepEqual(args, []any{hostile, obj}) {
		t.Fatalf("HasPerms:\n%s %v\nwant\n%s", q, args, want)
	}
	for _, bad := range []PermCheck{
		{Permission: "DROP TABLE; --"},
		{Securable: "x", Permission: PermViewServerState},
		{Securable: "x", Class: "LOGIN", Permission: PermConnect},
		{Securable: "", Class: ClassDatabase, Permission: PermConnect},
		{Securable: "a\x00b", Class: ClassDatabase, Permission: PermConnect},
	} {
		if _, _, err := HasPerms(bad); err == nil {
			t.Errorf("HasPerms(%+v) accepted", bad)
		}
	}
	if _, _, err := HasPerms(); err == nil {
		t.Error("HasPerms() without checks accepted")
	}
}

func TestServerFactsAndLookups(t *testing.T) {
	q := ServerFacts()
	for _, part := range []string{"SUSER_SNAME()", "IS_SRVROLEMEMBER(N'sysadmin')", "IS_SRVROLEMEMBER(N'dbcreator')",
		"CAST(SERVERPROPERTY(N'ProductMajorVersion') AS int)", "CAST(SERVERPROPERTY(N'EngineEdition') AS int)"} {
		if !strings.Contains(q, part) {
			t.Errorf("ServerFacts lacks %s: %s", part, q)
		}
	}
	q, args, err := ObjectExists("[Sales].[DBBackup].[Sequence]")
	if err != nil || q != "SELECT OBJECT_ID(@p1, N'U')" || args[0] != "[Sales].[DBBackup].[Sequence]" {
		t.Errorf("ObjectExists: %s %v %v", q, args, err)
	}
	if q, err := ReadProbe("msdb", "dbo", "restorehistory"); err != nil || q != "SELECT TOP (0) * FROM [msdb].[dbo].[restorehistory]" {
		t.Errorf("ReadProbe: %s %v", q, err)
	}
	if _, err := ReadProbe("msdb", ""); !errors.Is(err, ErrInvalidIdent) {
		t.Errorf("ReadProbe of an empty name: %v", err)
	}
	if _, _, err := ObjectExists("a\x00b"); !errors.Is(err, ErrInvalidIdent) {
		t.Errorf("ObjectExists of a name with NUL: %v", err)
	}
}

// The fixes are statements a DBA can paste: names quoted like QUOTENAME.
func TestGrantStatements(t *testing.T) {
	login := `CORP\backup]svc`
	got, err := GrantServerPermission(PermViewServerPerformanceState, login)
	if err != nil || got != `GRANT VIEW SERVER PERFORMANCE STATE TO [CORP\backup]]svc];` {
		t.Errorf("GrantServerPermission = %q, %v", got, err)
	}
	if _, err := GrantServerPermission("CONTROL SERVER; --", login); err == nil {
		t.Error("GrantServerPermission accepted an unknown permission")
	}
	got, err = AddDatabaseRoleMember("Sales", RoleDBBackupOperator, "bk", true)
	if err != nil || got != "USE [Sales]; IF DATABASE_PRINCIPAL_ID(N'bk') IS NULL CREATE USER [bk] FOR LOGIN [bk]; ALTER ROLE [db_backupoperator] ADD MEMBER [bk];" {
		t.Errorf("AddDatabaseRoleMember = %q, %v", got, err)
	}
	got, err = AddDatabaseRoleMember("Sales", RoleDBBackupOperator, "o'neil", true)
	if err != nil || got != "USE [Sales]; IF DATABASE_PRINCIPAL_ID(N'o''neil') IS NULL CREATE USER [o'neil] FOR LOGIN [o'neil]; ALTER ROLE [db_backupoperator] ADD MEMBER [o'neil];" {
		t.Errorf("AddDatabaseRoleMember with a quote = %q, %v", got, err)
	}
	got, err = AddDatabaseRoleMember("Sales", RoleDBBackupOperator, "bk", false)
	if err != nil || got != "USE [Sales]; ALTER ROLE [db_backupoperator] ADD MEMBER [bk];" {
		t.Errorf("AddDatabaseRoleMember without user = %q, %v", got, err)
	}
	got, err = GrantObjectPermissions("msdb", "dbo", "restorehistory", []string{PermSelect}, "bk", false)
	if err != nil || got != "USE [msdb]; GRANT SELECT ON [dbo].[restorehistory] TO [bk];" {
		t.Errorf("GrantObjectPermissions = %q, %v", got, err)
	}
	got, err = GrantObjectPermissions("Sales", SequenceSchema, SequenceTable, []string{PermSelect, PermUpdate}, "bk", true)
	if err != nil || got != "USE [Sales]; IF DATABASE_PRINCIPAL_ID(N'bk') IS NULL CREATE USER [bk] FOR LOGIN [bk]; GRANT SELECT, UPDATE ON [DBBackup].[Sequence] TO [bk];" {
		t.Errorf("GrantObjectPermissions = %q, %v", got, err)
	}
	if _, err := GrantObjectPermissions("Sales", "dbo", "T", []string{"DELETE"}, "bk", false); err == nil {
		t.Error("GrantObjectPermissions accepted DELETE")
	}
}

// The statements that take back a right beyond the product's needs quote
// the login, role and database; only known roles and permissions pass.
func TestRevokeStatements(t *testing.T) {
	login := "bk]; DROP LOGIN sa--"
	q, err := ServerRoles(RoleSecurityAdmin, RoleServerAdmin)
	if err != nil || q != "SELECT IS_SRVROLEMEMBER(N'securityadmin'), IS_SRVROLEMEMBER(N'serveradmin')" {
		t.Errorf("ServerRoles: %q, %v", q, err)
	}
	if _, err := ServerRoles("sysadmin'); --"); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("ServerRoles of an unknown role: %v", err)
	}
	for _, tc := range []struct {
		got  func() (string, error)
		want string
	}{
		{func() (string, error) { return RevokeServerPermission(PermControlServer, login) }, "REVOKE CONTROL SERVER FROM [bk]]; DROP LOGIN sa--];"},
		{func() (string, error) { return DropServerRoleMember(RoleDBCreator, login) }, "ALTER SERVER ROLE [dbcreator] DROP MEMBER [bk]]; DROP LOGIN sa--];"},
		{func() (string, error) { return DropDatabaseRoleMember("Sales]", RoleDBOwner, login) },
			"USE [Sales]]]; ALTER ROLE [db_owner] DROP MEMBER [bk]]; DROP LOGIN sa--];"},
	} {
		if got, err := tc.got(); err != nil || got != tc.want {
			t.Errorf("%q, %v; want %q", got, err, tc.want)
		}
	}
	if _, err := RevokeServerPermission("CONTROL SERVER; DROP", login); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("an unknown permission: %v", err)
	}
}
