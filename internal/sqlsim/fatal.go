package sqlsim

import (
	"fmt"
	"strings"

	"github.com/backupcycle/backupcycle/internal/sqlsim/tds"
)

// Fatal errors: SQL Server ends the session after an error of severity 20
// or more (the tds layer closes the connection once the error tokens are
// out; "Database engine error severities",
// https://learn.microsoft.com/en-us/sql/relational-databases/errors-events/database-engine-error-severities).
// What the client received before — progress messages, earlier errors —
// stays received; a product must report it rather than a bare "connection
// reset".

type fatalFault struct {
	percent float64
	number  int32
	class   uint8
}

// FatalErrorAt arms a one-shot fatal error: when the next operation op
// (OpBackup, OpRestore, OpCheckDB) reaches percent, it fails with error
// number at severity class (20-25) and the server closes its connection
// after sending it, as SQL Server terminates the session. The instance
// keeps running. Known numbers get SQL Server's text (823, 824, 825, 9001,
// 3624); any other a generic one. DisarmFatalError removes it.
func (in *Instance) FatalErrorAt(op string, percent float64, number int32, class uint8) error {
	op, err := checkArm("FatalErrorAt", op, percent)
	if err != nil {
		return err
	}
	if class < 20 || class > 25 {
		return fmt.Errorf("sqlsim: FatalErrorAt: severity %d is not fatal; give 20 to 25", class)
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.fatalAt == nil {
		in.fatalAt = map[string]fatalFault{}
	}
	in.fatalAt[op] = fatalFault{percent: percent, number: number, class: class}
	return nil
}

// DisarmFatalError removes an armed FatalErrorAt for op ("" for all).
func (in *Instance) DisarmFatalError(op string) {
	op = strings.ToUpper(op)
	in.mu.Lock()
	defer in.mu.Unlock()
	for k := range in.fatalAt {
		if op == "" || k == op {
			delete(in.fatalAt, k)
		}
	}
}

// fatalDue returns (and disarms) the armed fatal error of op at percent p.
func (x *execCtx) fatalDue(op string, p float64) *tds.Error {
	x.in.mu.Lock()
	f, ok := x.in.fatalAt[op]
	if !ok || p < f.percent {
		x.in.mu.Unlock()
		return nil
	}
	delete(x.in.fatalAt, op)
	dbID := x.req.dbID
	x.in.mu.Unlock()
	db := "master"
	if d := x.in.dbByID(dbID); d != nil {
		db = d.Name
	}
	return fatalError(f.number, f.class, db)
}

// fatalError is error number at class with SQL Server's text where the
// emulator knows it.
func fatalError(number int32, class uint8, db string) *tds.Error {
	switch number {
	case 823:
		return sqlErr(823, class, "The operating system returned error 21(The device is not ready.) to SQL Server during a read at offset 0x00000000a00000 in file of database '%s'. Additional messages in the SQL Server error log and operating system error log may provide more detail. This is a severe system-level error condition that threatens database integrity and must be corrected immediately.", db)
	case 824:
		return sqlErr(824, class, "SQL Server detected a logical consistency-based I/O error: incorrect checksum. It occurred during a read of page (1:1280) in database '%s'. Complete a full database consistency check (DBCC CHECKDB). This error can be caused by many factors; for more information, see SQL Server Books Online.", db)
	case 825:
		return sqlErr(825, class, "A read of the file of database '%s' at offset 0x00000000a00000 succeeded after failing 1 time(s) with error: incorrect checksum.", db)
	case 9001:
		return sqlErr(9001, class, "The log for database '%s' is not available. Check the operating system error log for related error messages. Resolve any errors and restart the database.", db)
	case 3624:
		return sqlErr(3624, class, "A system assertion check has failed. Check the SQL Server error log for details.")
	}
	return sqlErr(number, class, "A severe error occurred on the current command (error %d, severity %d). The results, if any, should be discarded.", number, class)
}
