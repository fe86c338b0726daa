package sqlsim

import (
	"errors"

	"github.com/backupcycle/backupcycle/internal/sqlsim/tds"
)

// Outside TRY...CATCH and without XACT_ABORT, most errors of severity 16 or
// less end only the statement that raised them: SQL Server sends the error
// and goes on with the next statement of the batch (e.g. `SELECT 1/0;
// SELECT 2` answers 8134 and then 2). Compile errors (syntax, 102; an
// identifier too long, 103; unknown functions) stop the whole batch before
// anything runs; name-resolution errors of deferred resolution (208 invalid
// object, 207 invalid column) and conversion errors (245, 8114) abort the
// batch where they occur; severity 20 and above closes the connection
// (https://learn.microsoft.com/en-us/sql/t-sql/language-elements/try-catch-transact-sql
// "Errors Unaffected by a TRY...CATCH Construct",
// https://learn.microsoft.com/en-us/sql/t-sql/statements/set-xact-abort-transact-sql,
// https://learn.microsoft.com/en-us/sql/relational-databases/errors-events/database-engine-error-severities).
// The emulator parses the whole batch first, so its syntax errors run
// nothing; the compile-time errors it only finds while running (class 15)
// stop the batch where they occur.

// batchAborting lists errors of severity below 20 that end the batch.
var batchAborting = map[int32]bool{
	207: true, 208: true, 209: true, 4104: true, // name resolution
	245: true, 8114: true, // conversion
	2812:  true, // unknown procedure
	40515: true, // outside what the emulator supports: stop, do not guess
}

// statementTerminating reports whether err ends only its statement.
func statementTerminating(err error) bool {
	var es tds.Errors
	var e *tds.Error
	switch {
	case errors.As(err, &es):
	case errors.As(err, &e):
		es = tds.Errors{e}
	default:
		return false // cancelled, dropped, crashed
	}
	if len(es) == 0 || isBatchAbort(err) {
		return false
	}
	for _, e := range es {
		if e.Class >= 20 || e.Class == 15 || batchAborting[e.Number] {
			return false
		}
	}
	return true
}

// runList runs statements in order. A statement-terminating error of a
// statement that is not the last is sent at once, ending that statement,
// and the next one runs; the error of the last one is returned.
func (x *execCtx) runList(list []stmt) error {
	for i, st := range list {
		err := x.run(st)
		if err == nil {
			continue
		}
		if i == len(list)-1 || !statementTerminating(err) || x.isCrashed() || x.ctx.Err() != nil {
			return err
		}
		if werr := x.sendStatementErrors(err); werr != nil {
			return werr
		}
	}
	return nil
}

// sendStatementErrors sends the errors of a failed statement, then its DONE.
func (x *execCtx) sendStatementErrors(err error) error {
	var es tds.Errors
	var e *tds.Error
	if !errors.As(err, &es) && errors.As(err, &e) {
		es = tds.Errors{e}
	}
	for _, e := range es {
		if werr := x.w.Error(e); werr != nil {
			return werr
		}
	}
	return x.w.StatementDone(0, 0, false)
}
