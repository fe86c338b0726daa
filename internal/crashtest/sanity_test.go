package crashtest

import (
	"encoding/base64"
	"regexp"
	"strings"
	"testing"

	"go.temporal.io/api/temporalproto"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/sitetest"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
)

// execIn runs stmt as sa in database db of an instance.
var execIn = sitetest.ExecIn

// payloadData finds the payloads of a history as JSON: base64 data.
var payloadData = regexp.MustCompile(`"data":"([A-Za-z0-9+/=]*)"`)

// historyText is a run's whole history as JSON, followed by every payload
// decoded: every input, result, failure and cause a Web UI user can read.
func historyText(t *testing.T, h activityRuns) string {
	t.Helper()
	data, err := temporalproto.CustomJSONMarshalOptions{}.Marshal(h.events)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.Write(data)
	for _, m := range payloadData.FindAllSubmatch(data, -1) {
		if p, err := base64.StdEncoding.DecodeString(string(m[1])); err == nil {
			b.WriteString("\n")
			b.Write(p)
		}
	}
	return b.String()
}

// A sanity query that cannot run on the copy (here 15517: the copy's owner,
// a login of the source only, cannot be impersonated on the verification
// instance) fails the cycle with SanityCheckCouldNotRun: the set is not
// failed but stays checked on both servers, and the history names the
// check and the error number without SQL Server's text. Once the cause is
// fixed (the owner's login with its SID on the verification instance),
// `--resume` finishes that very set.
func TestSanityCouldNotRunThenResume(t *testing.T) {
	const db = "OwnedSales"
	s := newSite(t, db, smallDB, `      - name: app-self-check
        query: SELECT dbo.fn_IntegrityOK()
        equals: "1"
        grant_execute: [dbo.fn_IntegrityOK]
`)
	if err := s.src.SetLogin(sqlsim.Login{Name: "appowner", Password: "Own3r!pw"}); err != nil {
		t.Fatal(err)
	}
	execSQL(t, s.src, "ALTER AUTHORIZATION ON DATABASE::["+db+"] TO [appowner]")
	execIn(t, s.src, db, "CREATE FUNCTION dbo.fn_IntegrityOK() RETURNS int WITH EXECUTE AS OWNER AS BEGIN RETURN 1 END")
	src := s.source()
	srv := sharedTemporal(t)
	c := dial(t, srv)
	s.inProcessWorker(c)
	sc := s.starterClient(c, srv)

	run := startCycle(t, sc, src, db)
	_, err := finish(t, c, run, cycleLimit)
	if errorType(err) != activities.ErrSanityCheckCouldNotRun {
		t.Fatalf("cycle: %v, want %s", err, activities.ErrSanityCheckCouldNotRun)
	}
	p, _ := progress(c, run)
	seq := p.Sequence
	fs := s.setsOf(src, db, seq)
	if len(fs) != 2 {
		t.Fatalf("set %d has %d manifests, want 2: %v", seq, len(fs), fs)
	}
	for _, f := range fs {
		if f.m.State != catalog.StateChecked || f.m.Failure != nil {
			t.Errorf("%s, want still checked (failure %+v)", f, f.m.Failure)
		}
	}
	h := history(t, c, run)
	text := historyText(t, h)
	for _, want := range []string{"app-self-check", "SQL Server error 15517", "WITH SID"} {
		if !strings.Contains(text, want) {
			t.Errorf("history lacks %q", want)
		}
	}
	if strings.Contains(text, "Cannot execute as the database principal") {
		t.Errorf("history quotes SQL Server's message")
	}
	if h.started["SanityChecks"] != 1 || h.started["MarkFailed"] != 0 {
		t.Errorf("SanityChecks attempts %d, MarkFailed %d: want one attempt and no set marked failed",
			h.started["SanityChecks"], h.started["MarkFailed"])
	}

	sid, _ := s.src.LoginSID("appowner")
	if err := s.verify.SetLogin(sqlsim.Login{Name: "appowner", Password: "Own3r!pw", SID: sid}); err != nil {
		t.Fatal(err)
	}
	resumed, err := finish(t, c, s.startRaw(c, run.GetID(), map[string]any{"database": db, "instance": src, "resume": seq}), cycleLimit)
	if err != nil || resumed.Sequence != seq {
		t.Fatalf("resume of set %d: seq %d, %v; want set %d verified", seq, resumed.Sequence, err, seq)
	}
	history := restoreHistory(t, s.verify)
	for _, f := range s.setsOf(src, db, seq) {
		if f.m.State != catalog.StateVerified || f.m.SanityProof == nil || f.m.SanityProof.RestoreHistoryID != f.m.Proof.RestoreHistoryID {
			t.Errorf("after the resume: %s, sanity proof %+v", f, f.m.SanityProof)
		} else {
			checkRestoredFrom(t, f, history)
		}
	}
}

// What a sanity query returns, and SQL Server's text about it, are the
// database owner's data: neither reaches the workflow history that every
// Web UI user reads, whether the check failed on the value or could not
// run; the owner's function runs nothing on the verification host.
func TestSanityValuesStayOutOfHistory(t *testing.T) {
	const secret = "BKSECRET-5e0f2a"
	for _, tc := range []struct {
		name, check, function, typ string
	}{
		{name: "error text", check: "SELECT CAST(N'" + secret + "' AS int)", typ: activities.ErrSanityCheckCouldNotRun,
			function: "CREATE FUNCTION dbo.fn_Leak() RETURNS int AS BEGIN RETURN 1 END"},
		{name: "command", check: "SELECT dbo.fn_Leak()", typ: activities.ErrSanityCheckCouldNotRun, function: `CREATE FUNCTION dbo.fn_Leak() RETURNS nvarchar(200) AS
BEGIN
    EXEC master..xp_cmdshell 'whoami', NO_OUTPUT;
    RETURN N'` + secret + `'
END`},
		{name: "value", check: "SELECT dbo.fn_Leak()", typ: activities.ErrSanityCheckFailed,
			function: "CREATE FUNCTION dbo.fn_Leak() RETURNS nvarchar(200) AS BEGIN RETURN N'" + secret + "' END"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const db = "Planted"
			s := newSite(t, db, smallDB, `      - name: planted
        query: "`+tc.check+`"
        equals: "1"
        grant_execute: [dbo.fn_Leak]
`)
			if tc.function != "" {
				execIn(t, s.src, db, tc.function)
			}
			s.verify.SetXPCmdShell(true)
			srv := sharedTemporal(t)
			c := dial(t, srv)
			s.inProcessWorker(c)
			run := startCycle(t, s.starterClient(c, srv), s.source(), db)
			if _, err := finish(t, c, run, cycleLimit); errorType(err) != tc.typ {
				t.Fatalf("cycle: %v, want %s", err, tc.typ)
			}
			if text := historyText(t, history(t, c, run)); strings.Contains(text, secret) || !strings.Contains(text, `\"planted\"`) {
				t.Errorf("history: the secret shown %v, the check named %v", strings.Contains(text, secret), strings.Contains(text, `\"planted\"`))
			}
			if runs := s.verify.XPCmdShellRuns(); len(runs) != 0 {
				t.Errorf("xp_cmdshell ran on the verification instance: %+v", runs)
			}
		})
	}
}
