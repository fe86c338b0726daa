package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// The stack's SQL logins: the worker never logs in as sa. Each instance's
// init step creates a dedicated login with exactly the grants `starter
// preflight` checks (README "Permissions"), and every configuration the
// product ships (the compose stack's, config.example.yaml) names it.
func TestLeastPrivilegeLogins(t *testing.T) {
	p := loadCompose(t)
	cfg := loadConfig(t, "deploy/config.compose.yaml")
	example := loadConfig(t, "config.example.yaml")
	for file, c := range map[string]*config.Config{"deploy/config.compose.yaml": cfg, "config.example.yaml": example} {
		for _, in := range c.SQLInstances {
			if strings.EqualFold(in.User, "sa") {
				t.Errorf("%s: sql_instances %s logs in as sa: use a login with the grants README \"Permissions\" lists", file, in.Name)
			}
		}
	}

	// Which script makes the login on which instance, and what the
	// instance is to the configuration.
	steps := map[string]struct {
		script, instance string
		source           bool
	}{
		"source-login": {"deploy/sql/login-source.sql", "sql-primary", true},
		"verify-login": {"deploy/sql/login-verify.sql", "sql-verify", false},
	}
	grantRE := regexp.MustCompile(`(?mi)^[^-\n]*\b(GRANT|ALTER ROLE|ALTER SERVER ROLE|sp_addsrvrolemember|sp_addrolemember)\b[^\n]*$`)
	for svc, st := range steps {
		s := service(t, p, svc)
		if !oneShot(s) {
			t.Errorf("%s: want a one-shot init step", svc)
		}
		args := strings.Join(s.Entrypoint, " ")
		if !strings.Contains(args, "-S "+st.instance) || !strings.Contains(args, "/opt/mssql-tools18/bin/sqlcmd") {
			t.Errorf("%s: entrypoint %q does not run sqlcmd against %s", svc, s.Entrypoint, st.instance)
		}
		if d, ok := s.DependsOn[st.instance]; !ok || d.Condition == "" {
			t.Errorf("%s must wait for %s", svc, st.instance)
		}
		if d, ok := service(t, p, "worker").DependsOn[svc]; !ok || d.Condition != "service_completed_successfully" {
			t.Errorf("the worker must wait for %s to complete", svc)
		}
		sql := readScript(t, s, filepath.Join(root, st.script))
		// The configuration's login for this instance.
		var login string
		for _, in := range cfg.SQLInstances {
			if strings.HasPrefix(in.Address, st.instance+":") {
				login = in.User
			}
		}
		if login == "" {
			t.Fatalf("deploy/config.compose.yaml has no instance at %s", st.instance)
		}
		ql, _ := tsql.QuoteIdent(login)
		if !strings.Contains(sql, "CREATE LOGIN "+ql+" WITH PASSWORD = N'$(BACKUPCYCLE_PASSWORD)'") ||
			!strings.Contains(sql, "ALTER LOGIN "+ql+" WITH PASSWORD = N'$(BACKUPCYCLE_PASSWORD)'") {
			t.Errorf("%s: does not create (or update) login %s with the password of its secret ($(BACKUPCYCLE_PASSWORD))", st.script, ql)
		}
		// Exactly the grants preflight would print for a login that holds
		// nothing: each statement as internal/tsql builds the fix.
		want := []string{}
		for _, perm := range []string{tsql.PermCreateAnyDatabase, tsql.PermViewServerPerformanceState, tsql.PermAlterAnyConnection} {
			g, _ := tsql.GrantServerPermission(perm, login)
			want = append(want, g)
		}
		if st.source {
			for _, db := range cfg.Databases {
				g, _ := tsql.AddDatabaseRoleMember(db.Name, tsql.RoleDBBackupOperator, login, true)
				want = append(want, g)
			}
			g, _ := tsql.GrantObjectPermissions("msdb", "dbo", "backupset", []string{tsql.PermSelect}, login, true)
			want = append(want, g)
		} else {
			for _, table := range []string{"restorehistory", "backupset"} {
				g, _ := tsql.GrantObjectPermissions("msdb", "dbo", table, []string{tsql.PermSelect}, login, true)
				want = append(want, g)
			}
		}
		for _, w := range want {
			if !strings.Contains(sql, w) {
				t.Errorf("%s lacks %q", st.script, w)
			}
		}
		for _, line := range grantRE.FindAllString(sql, -1) {
			line = strings.TrimSpace(line)
			if !slices.ContainsFunc(want, func(w string) bool { return strings.Contains(w, line) || strings.Contains(line, w) }) {
				t.Errorf("%s grants more than the cycle needs: %q", st.script, line)
			}
		}
		for _, bad := range []string{"sysadmin", "CONTROL SERVER", "db_owner", "ALTER ANY DATABASE", "IMPERSONATE"} {
			if regexp.MustCompile(`(?i)\b` + bad + `\b`).MatchString(stripComments(sql)) {
				t.Errorf("%s mentions %s: the login needs none of it", st.script, bad)
			}
		}
	}
}

// stripComments removes -- comments of a T-SQL script.
func stripComments(sql string) string {
	var b strings.Builder
	for _, line := range strings.Split(sql, "\n") {
		if i := strings.Index(line, "--"); i >= 0 {
			line = line[:i]
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

// includeRE is sqlcmd's :r command, which reads another script in place.
var includeRE = regexp.MustCompile(`(?m)^:r\s+(\S+)\s*$`)

// readScript reads a T-SQL script with the scripts it includes (:r, a path
// inside the service's containers, mounted from the repository).
func readScript(t *testing.T, s types.ServiceConfig, file string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return includeRE.ReplaceAllStringFunc(string(data), func(line string) string {
		inner := includeRE.FindStringSubmatch(line)[1]
		hp := hostPath(t, s, inner)
		if hp == "" {
			t.Errorf("%s includes %s, which no bind mount of the repository puts there", file, inner)
			return ""
		}
		return readScript(t, s, hp)
	})
}
