package sqlsim

import (
	"fmt"
	"strings"

	"github.com/backupcycle/backupcycle/internal/sqlsim/tds"
)

// The phases a DBCC CHECKDB walks, as sys.dm_exec_requests.command reports
// them: "the command column reports the current phase of the execution of
// the command" ("Progress Reporting for DBCC Commands" in "DBCC
// (Transact-SQL)",
// https://learn.microsoft.com/sql/t-sql/database-console-commands/dbcc-transact-sql).
// Only TABLE CHECK (pages) and IVIEW CHECK (views) report progress; the
// others keep percent_complete where it was. With EXTENDED_LOGICAL_CHECKS
// the indexed-view phase of a large database can take long: HoldCheckDB
// holds a CHECKDB in any phase for tests.
const (
	PhaseAllocCheck   = "DBCC ALLOC CHECK"
	PhaseSysCheck     = "DBCC SYS CHECK"
	PhaseTableCheck   = "DBCC TABLE CHECK"
	PhaseSSBCheck     = "DBCC SSB CHECK"
	PhaseCheckCatalog = "DBCC CHECKCATALOG"
	PhaseIViewCheck   = "DBCC IVIEW CHECK"
)

// CheckDBPhases are the phases of DBCC CHECKDB in the order it runs them.
var CheckDBPhases = []string{PhaseAllocCheck, PhaseSysCheck, PhaseTableCheck, PhaseSSBCheck, PhaseCheckCatalog, PhaseIViewCheck}

// HoldCheckDB holds every DBCC CHECKDB of a user database that reaches
// phase there (sys.dm_exec_requests.command shows it) until release is
// called; an attention, KILL or crash ends a held CHECKDB as any other.
func (in *Instance) HoldCheckDB(phase string) (release func(), err error) {
	known := false
	for _, p := range CheckDBPhases {
		known = known || p == phase
	}
	if !known {
		return nil, fmt.Errorf("sqlsim: HoldCheckDB: unknown phase %q; use one of %s", phase, strings.Join(CheckDBPhases, ", "))
	}
	ch := make(chan struct{})
	in.mu.Lock()
	in.faults.checkDBHold[phase] = ch
	in.mu.Unlock()
	var once bool
	return func() {
		in.mu.Lock()
		defer in.mu.Unlock()
		if !once {
			once = true
			close(ch)
			if in.faults.checkDBHold[phase] == ch {
				delete(in.faults.checkDBHold, phase)
			}
		}
	}, nil
}

// checkDBPhase enters phase: the request's command shows it (its
// percent_complete stays), and a HoldCheckDB of the phase waits here.
func (x *execCtx) checkDBPhase(phase string, dbID int) error {
	x.in.mu.Lock()
	x.req.command, x.req.dbID, x.req.progress = phase, dbID, true
	hold := x.in.faults.checkDBHold[phase]
	x.in.mu.Unlock()
	if hold == nil {
		return nil
	}
	select {
	case <-hold:
		return nil
	case <-x.ctx.Done():
		return x.ctx.Err()
	}
}

// CheckDBErrorNumbers are the errors CheckDBError can make the next DBCC
// CHECKDB raise.
var CheckDBErrorNumbers = []int32{7984, 7985, 7986, 7987, 7988, 2537, 211}

// CheckDBError makes the next DBCC CHECKDB of a user database meet damage
// that SQL Server reports with error number (one-shot):
//
//   - 7984-7988 (severity 16), "System table pre-checks: ... Check statement
//     terminated due to unrepairable error.": "The first phase of a DBCC
//     CHECKDB is to do primitive checks on the data pages of critical system
//     tables. If any errors are found, they cannot be repaired; therefore,
//     the DBCC CHECKDB terminates immediately" (MSSQLSERVER_7986,
//     https://learn.microsoft.com/sql/relational-databases/errors-events/mssqlserver-7986-database-engine-error;
//     texts and severities: "Database engine events and errors (7000 to
//     7999)"). Nothing else is checked or reported.
//   - 2537 (severity 16), "Table error: ... Record check (CHECK_TEXT)
//     failed." (MSSQLSERVER_2537,
//     https://learn.microsoft.com/sql/relational-databases/errors-events/mssqlserver-2537-database-engine-error):
//     a consistency error of TABLE CHECK; CHECKDB goes on and counts it in
//     its 8989 summary.
//   - 211 (severity 23), "Possible schema corruption. Run DBCC
//     CHECKCATALOG." ("Database engine events and errors (0 to 999)"),
//     raised in SYS CHECK: the statement ends there. The session stays
//     open (tds.Error.SessionSurvives; FatalErrorAt closes it instead).
func (in *Instance) CheckDBError(number int32) error {
	known := false
	for _, n := range CheckDBErrorNumbers {
		known = known || n == number
	}
	if !known {
		return fmt.Errorf("sqlsim: CheckDBError: error %d is not emulated; use one of %v", number, CheckDBErrorNumbers)
	}
	in.mu.Lock()
	in.faults.checkDBError = number
	in.mu.Unlock()
	return nil
}

// checkDBErrorDue returns (and disarms) the armed CheckDBError when it is
// raised in phase.
func (in *Instance) checkDBErrorDue(phase string) int32 {
	in.mu.Lock()
	defer in.mu.Unlock()
	n := in.faults.checkDBError
	due := false
	switch {
	case n >= 7984 && n <= 7988:
		due = phase == PhaseAllocCheck
	case n == 2537:
		due = phase == PhaseTableCheck
	case n == 211:
		due = phase == PhaseSysCheck
	}
	if !due {
		return 0
	}
	in.faults.checkDBError = 0
	return n
}

// preCheckError is the text of a system table pre-check failure (7984-7988)
// on a page of sys.sysallocunits (object ID 7).
func preCheckError(n int32) *tds.Error {
	const obj, page = 7, 146
	end := " Check statement terminated due to unrepairable error."
	switch n {
	case 7984:
		return sqlErr(n, 16, "System table pre-checks: Object ID %d. Page (1:%d) has unexpected page type 2."+end, obj, page)
	case 7985:
		return sqlErr(n, 16, "System table pre-checks: Object ID %d. Could not read and latch page (1:%d) with latch type SH."+end, obj, page)
	case 7986:
		return sqlErr(n, 16, "System table pre-checks: Object ID %d has cross-object chain linkage. Page (1:%d) points to (1:%d) in alloc unit ID %d (should be %d)."+end,
			obj, page, page+1, partitionID(obj)+1, partitionID(obj))
	case 7987:
		return sqlErr(n, 16, "System table pre-checks: Object ID %d has chain linkage mismatch. (1:%d)->next = (1:%d), but (1:%d)->prev = (1:%d)."+end,
			obj, page, page+1, page+1, page+2)
	}
	return sqlErr(n, 16, "System table pre-checks: Object ID %d. Loop in data chain detected at (1:%d)."+end, obj, page)
}

// recordCheckError is a 2537 on the first row of obj's page (file:page).
func recordCheckError(obj uint32, fileID int, page int64) *tds.Error {
	pid := partitionID(obj)
	return sqlErr(2537, 16, "Table error: object ID %d, index ID 1, partition ID %d, alloc unit ID %d (type In-row data), page (%d:%d), row 0. Record check (Valid column length) failed. Values are 24 and 0.",
		obj, pid, pid, fileID, page)
}

// schemaCorruption is error 211, severity 23, its session kept open.
func schemaCorruption() *tds.Error {
	e := sqlErr(211, 23, "Possible schema corruption. Run DBCC CHECKCATALOG.")
	e.SessionSurvives = true
	return e
}
