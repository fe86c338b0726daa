package sqlsim

import (
	"strings"
	"testing"
)

// TestRaiseAndThrow: RAISERROR and THROW give the error shapes clients
// test error handling with: RAISERROR below 11 is an informational
// message (severity 10 sent as 0), 11-18 an error 50000 that ends only its
// statement, above 18 only for sysadmin WITH LOG; THROW is severity 16 and
// ends the batch.
func TestRaiseAndThrow(t *testing.T) {
	e := newEnv(t)
	r := mustFail(t, e.db, 50000, "RAISERROR(N'disk %s is %d%% full', 16, 3, N'E:', 97); SELECT 2")
	if len(r.errs) != 1 || r.errs[0].Class != 16 || r.errs[0].State != 3 || r.errs[0].Message != "disk E: is 97% full" {
		t.Errorf("RAISERROR 16: %+v", r.errs)
	}
	if len(r.rows) != 1 || asInt(r.rows[0][0]) != 2 {
		t.Errorf("the batch did not go on after RAISERROR 16: rows %v", r.rows)
	}
	r = mustRun(t, e.db, "RAISERROR('step %d of %d', 10, 1, 3, 7) WITH NOWAIT")
	if len(r.infos) != 1 || r.infos[0].Number != 50000 || r.infos[0].Class != 0 || r.infos[0].Message != "step 3 of 7" {
		t.Errorf("RAISERROR 10: %+v", r.infos)
	}
	r = mustFail(t, e.db, 2754, "RAISERROR('x', 19, 1)")
	if !strings.Contains(r.errs[0].Message, "WITH LOG") {
		t.Errorf("RAISERROR 19 without LOG: %+v", r.errs)
	}
	r = mustFail(t, e.db, 51000, "THROW 51000, N'The record does not exist.', 1; SELECT 2")
	if r.errs[0].Class != 16 || r.errs[0].Message != "The record does not exist." || len(r.rows) != 0 {
		t.Errorf("THROW: errors %+v rows %v (the batch must end)", r.errs, r.rows)
	}
	mustFail(t, e.db, 35100, "THROW 50, N'x', 1")
	mustFail(t, e.db, 10704, "THROW;") // a bare word would go as an RPC (go-mssqldb)
	mustFail(t, e.db, 2732, "RAISERROR(50000, 16, 1)")
	if got := raiseFormat("%5s|%-3d|%x|%s|%%", []any{"ab", int64(7), int64(255)}); got != "   ab|7  |ff|(null)|%" {
		t.Errorf("raiseFormat: %q", got)
	}
}
