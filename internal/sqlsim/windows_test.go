package sqlsim

import (
	"database/sql"
	"errors"
	"net/url"
	"testing"

	mssql "github.com/microsoft/go-mssqldb"
	_ "github.com/microsoft/go-mssqldb/integratedauth/ntlm" // registers the NTLM authenticator
)

// A Windows login (CREATE LOGIN [CORP\svc] FROM WINDOWS) logs in through
// integrated authentication: go-mssqldb's NTLM answers the instance's
// challenge, in clear and over TLS. A wrong password or an account the
// domain does not know is 18452 (the server could not authenticate it).
// (go-mssqldb always sends a DOMAIN\user name through NTLM, so SQL
// authentication with a Windows login's name, which the instance refuses
// with 18456, cannot be sent from it.)
func TestWindowsLoginOverNTLM(t *testing.T) {
	win := Login{Name: `CORP\svc_backup`, Password: "Winter2026!", Windows: true, Sysadmin: true}
	for _, tlsMode := range []string{"", "on"} {
		e := newEnv(t, func(c *Config) { c.TLS = tlsMode; c.Principals = []Login{win} })
		open := func(user, pass string) (string, error) {
			u, err := url.Parse(e.in.DSN(user, pass, "master"))
			if err != nil {
				t.Fatal(err)
			}
			q := u.Query()
			q.Set("authenticator", "ntlm")
			u.RawQuery = q.Encode()
			db, err := sql.Open("sqlserver", u.String())
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var who, scheme string
			err = db.QueryRow("SELECT SUSER_SNAME(), auth_scheme FROM sys.dm_exec_connections WHERE session_id = @@SPID").Scan(&who, &scheme)
			if err == nil && scheme != "NTLM" {
				t.Errorf("auth_scheme %q of an NTLM login", scheme)
			}
			return who, err
		}
		who, err := open(`CORP\svc_backup`, "Winter2026!")
		if err != nil || who != `CORP\svc_backup` {
			t.Fatalf("TLS %q: NTLM login: %q %v", tlsMode, who, err)
		}
		for _, c := range []struct{ user, pass string }{{`CORP\svc_backup`, "Summer2026!"}, {`CORP\nobody`, "Winter2026!"}} {
			if _, err := open(c.user, c.pass); loginError(err) != 18452 {
				t.Errorf("TLS %q: %s with %q: %v, want 18452", tlsMode, c.user, c.pass, err)
			}
		}
	}
}

func loginError(err error) int32 {
	var e mssql.Error
	if errors.As(err, &e) {
		return e.Number
	}
	return 0
}
