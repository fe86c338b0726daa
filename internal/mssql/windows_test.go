package mssql

import (
	"errors"
	"strings"
	"testing"

	"github.com/backupcycle/backupcycle/internal/sqlsim"
)

// A Windows login (user: DOMAIN\user) logs in end to end: NTLM through the
// emulator, which checks the NTLMv2 response as a domain controller would,
// over a mandatory TLS session validated against the CA file; a wrong
// password is LoginFailed with the server's 18452.
func TestWindowsLoginOverTLS(t *testing.T) {
	in, ca := tlsInstance(t, "on")
	in.SetLogin(sqlsim.Login{Name: `CORP\svc_backup`, Password: "Winter2026!", Windows: true, Sysadmin: true})
	tg := tlsTarget(in, "mandatory")
	tg.User, tg.Password, tg.CAFile, tg.HostNameInCertificate = `CORP\svc_backup`, "Winter2026!", ca, "sql01"
	db, err := Open(testCtx(t), tg)
	if err != nil {
		t.Fatalf("Windows login over TLS: %v", err)
	}
	var who string
	if err := db.QueryRowContext(testCtx(t), "SELECT SUSER_SNAME()").Scan(&who); err != nil || who != `CORP\svc_backup` {
		t.Errorf("logged in as %q (%v), want CORP\\svc_backup", who, err)
	}
	db.Close()

	tg.Password = "Summer2026!"
	_, err = Open(testCtx(t), tg)
	var f *Failure
	if !errors.As(err, &f) || !errors.Is(err, ErrLoginFailed) || len(f.Errors) == 0 || f.Errors[0].Number != 18452 {
		t.Errorf("wrong password: %v, want LoginFailed with 18452", err)
	}
	if err != nil && strings.Contains(err.Error(), "Summer2026!") {
		t.Errorf("the password is in the error: %v", err)
	}
}
