package activities

import (
	"errors"
	"slices"
	"strings"
	"testing"

	mssqldb "github.com/microsoft/go-mssqldb"
	"go.temporal.io/sdk/temporal"

	"github.com/backupcycle/backupcycle/internal/mssql"
)

// The kinds that may pass later map to stable, retryable types that are
// never evidence against a set; other kinds are left to sqlError.
func TestSQLKindErrors(t *testing.T) {
	target := mssql.Target{Instance: "sql01", Address: "sql01:1433"}
	fail := func(errs ...mssqldb.Error) error { return mssql.ClassifyErrors(target, "op", errs) }
	for _, tc := range []struct {
		err  error
		typ  string
		hint string
	}{
		{fail(mssqldb.Error{Number: 4060, Class: 11, Message: `Cannot open database "Sales" requested by the login. The login failed.`},
			mssqldb.Error{Number: 18456, Class: 14, Message: "Login failed for user 'backup'."}),
			ErrDatabaseUnavailable, "state_desc"},
		{fail(mssqldb.Error{Number: 8921, Class: 16, Message: "Check terminated. A failure was detected while collecting facts."}),
			ErrCheckDBCouldNotRun, "tempdb"},
		{fail(mssqldb.Error{Number: 3201, Class: 16, Message: `Cannot open backup device '\\bak01\backup\s.bak'. Operating system error 32(The process cannot access the file because it is being used by another process.).`},
			mssqldb.Error{Number: 3013, Class: 16, Message: "BACKUP DATABASE is terminating abnormally."}),
			ErrBackupDeviceInUse, "sys.dm_exec_requests"},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			mapped, ok := sqlKindError(tc.err, "detail")
			var appErr *temporal.ApplicationError
			if !ok || !errors.As(mapped, &appErr) || appErr.Type() != tc.typ {
				t.Fatalf("sqlKindError(%v) = %v, %v; want type %s", tc.err, mapped, ok, tc.typ)
			}
			if appErr.NonRetryable() || slices.Contains(NonRetryableErrorTypes, tc.typ) {
				t.Errorf("%s must stay retryable", tc.typ)
			}
			if Evidence(tc.typ) != "" {
				t.Errorf("%s is evidence %q; it proves nothing about a set", tc.typ, Evidence(tc.typ))
			}
			if !strings.Contains(appErr.Message(), tc.hint) || !strings.Contains(appErr.Message(), "sql01") {
				t.Errorf("message %q should name the instance and say %q", appErr.Message(), tc.hint)
			}
			if !appErr.HasDetails() {
				t.Error("details dropped")
			}
		})
	}
	if _, ok := sqlKindError(fail(mssqldb.Error{Number: 18456, Class: 14, Message: "Login failed for user 'backup'."})); ok {
		t.Error("a wrong password is not one of these kinds")
	}
}
