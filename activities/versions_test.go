package activities

import (
	"errors"
	"strings"
	"testing"

	mssqldb "github.com/microsoft/go-mssqldb"
	"go.temporal.io/sdk/temporal"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/plan"
)

// What a RESTORE failure of the verification instance means, once the
// versions of the set and of the instance are known: environment
// (InvalidConfig, never evidence, no retry), damage (CorruptBackup) or an
// outage (retryable).
func TestRestoreFailureVerdicts(t *testing.T) {
	target := mssql.Target{Instance: "verify01"}
	term := func(op string) mssqldb.Error {
		return mssqldb.Error{Number: 3013, Class: 16, Message: op + " is terminating abnormally."}
	}
	media := mssqldb.Error{Number: 3241, Class: 16, Message: `The media family on device '\\bak02\backup\x.bak' is incorrectly formed. SQL Server cannot process this media family.`}
	v3169 := mssqldb.Error{Number: 3169, Class: 16, Message: "The database was backed up on a server running version 16.00.4135. That version is incompatible with this server, which is running version 15.00.4385."}
	kb9004 := mssqldb.Error{Number: 9004, Class: 21, Message: "An error occurred while processing the log for database 'Sales_verify'."}
	connected := func(op string, errs ...mssqldb.Error) error { return mssql.ClassifyErrors(target, op, errs) }
	v := func(s string) plan.Version {
		x, err := plan.ParseVersion(s)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	db := &config.Database{Name: "Sales", Instance: "sql01"}
	cases := []struct {
		name          string
		err           error
		src, dst      string
		tdeCompressed bool
		typ           string // "" = not this verdict's: sqlError's
		want          []string
	}{
		{"3241 from a newer major", connected("RESTORE FILELISTONLY", media, term("RESTORE FILELIST")), "16.0.4135", "15.0.4385.2", false,
			ErrInvalidConfig, []string{"16.0.4135", "15.0.4385.2", "upgrade verify01", "--resume 7"}},
		{"3241 between versions that read each other", connected("RESTORE FILELISTONLY", media, term("RESTORE FILELIST")), "15.0.4385", "16.0.4135.4", false,
			"", nil},
		{"3169", connected("RESTORE DATABASE", v3169, term("RESTORE DATABASE")), "16.0.4135", "15.0.4385.2", false,
			ErrInvalidConfig, []string{"SQL Server 2022", "SQL Server 2019"}},
		{"9004 on the CU16 format read by CU15", connected("RESTORE DATABASE", term("RESTORE DATABASE"), kb9004), "15.0.4223", "15.0.4198.2", true,
			ErrInvalidConfig, []string{"KB5014298", "patch verify01 to SQL Server 2019 CU16"}},
		{"9004 on an open connection, same builds", connected("RESTORE DATABASE", term("RESTORE DATABASE"), kb9004), "15.0.4223", "15.0.4223.1", true,
			ErrInvalidConfig, []string{"severity 20 or more", "connection that stayed open"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if !versionMatters(tc.err) {
				t.Fatalf("%v: the versions do not decide it", tc.err)
			}
			got := versionVerdict(tc.err, v(tc.src), v(tc.dst), tc.tdeCompressed, db, "verify01", 7)
			if tc.typ == "" {
				if got != nil {
					t.Fatalf("verdict %v, want none (sqlError's)", got)
				}
				var appErr *temporal.ApplicationError
				if !errors.As(sqlError(tc.err), &appErr) || appErr.Type() != ErrCorruptBackup {
					t.Errorf("sqlError: %v, want CorruptBackup: damage between versions that read each other", sqlError(tc.err))
				}
				return
			}
			var appErr *temporal.ApplicationError
			if !errors.As(got, &appErr) || appErr.Type() != tc.typ || !appErr.NonRetryable() || Evidence(appErr.Type()) != "" {
				t.Fatalf("verdict %v, want a non-retryable %s that is no evidence", got, tc.typ)
			}
			for _, w := range tc.want {
				if !strings.Contains(got.Error(), w) {
					t.Errorf("verdict does not say %q: %v", w, got)
				}
			}
		})
	}

	// A severity 21 error whose connection went with it: the host, retried.
	lost := mssql.Classify(target, "RESTORE DATABASE", mssqldb.Error{Number: 9004, Class: 21, Message: kb9004.Message})
	var appErr *temporal.ApplicationError
	if versionMatters(lost) || !errors.As(sqlError(lost), &appErr) || appErr.Type() != ErrSQLHostUnreachable {
		t.Errorf("9004 without a connection: %v, want SQLHostUnreachable", sqlError(lost))
	}
	// 33111 and 3169 never fall through to a retried SQLError.
	for _, err := range []error{
		connected("RESTORE FILELISTONLY", mssqldb.Error{Number: 33111, Class: 16, Message: "Cannot find server certificate with thumbprint '0xAB'."}, term("RESTORE FILELIST")),
		connected("RESTORE DATABASE", v3169, term("RESTORE DATABASE")),
	} {
		if !errors.As(sqlError(err), &appErr) || appErr.Type() != ErrInvalidConfig || !appErr.NonRetryable() {
			t.Errorf("sqlError(%v) = %v, want InvalidConfig", err, sqlError(err))
		}
	}
}
