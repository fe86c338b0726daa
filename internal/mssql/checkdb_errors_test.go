package mssql

import (
	"errors"
	"testing"

	mssqldb "github.com/microsoft/go-mssqldb"
)

// Errors raised during DBCC CHECKDB are classified by what raised them, not
// only by a list of numbers: any error a CHECKDB reports is evidence about
// the copy (CheckDBFailed), except the documented ones that say it could
// not run (tempdb, its internal snapshot, memory) and those about the
// environment (the database gone or unavailable, the instance shutting
// down, permissions, syntax). A severity 20+ error CHECKDB raises on a
// connection SQL Server keeps open is corruption, not a lost host. The
// same numbers from another operation keep their general meaning.
func TestClassifyCheckDBErrors(t *testing.T) {
	const op = "DBCC CHECKDB"
	cases := []struct {
		name      string
		errs      []mssqldb.Error
		want      error
		retryable bool
	}{
		{"system table pre-check 7984", []mssqldb.Error{sqlErr(7984, 16, "System table pre-checks: Object ID 7. Page (1:146) has unexpected page type 2. Check statement terminated due to unrepairable error.")}, ErrCheckDBFailed, false},
		{"system table pre-check 7985", []mssqldb.Error{sqlErr(7985, 16, "System table pre-checks: Object ID 7. Could not read and latch page (1:146) with latch type SH. Check statement terminated due to unrepairable error.")}, ErrCheckDBFailed, false},
		{"system table pre-check 7986", []mssqldb.Error{sqlErr(7986, 16, "System table pre-checks: Object ID 7 has cross-object chain linkage.")}, ErrCheckDBFailed, false},
		{"system table pre-check 7987", []mssqldb.Error{sqlErr(7987, 16, "System table pre-checks: Object ID 7 has chain linkage mismatch.")}, ErrCheckDBFailed, false},
		{"system table pre-check 7988", []mssqldb.Error{sqlErr(7988, 16, "System table pre-checks: Object ID 7. Loop in data chain detected at (1:146).")}, ErrCheckDBFailed, false},
		{"record check 2537 and its summary", []mssqldb.Error{
			sqlErr(2537, 16, "Table error: object ID 245575913, index ID 1, partition ID 72057594043695104, alloc unit ID 72057594048479232 (type In-row data), page (1:336), row 0. Record check (Valid column length) failed. Values are 24 and 0."),
			sqlErr(8989, 16, "CHECKDB found 0 allocation errors and 1 consistency errors in database 'Sales_verify'.")}, ErrCheckDBFailed, false},
		{"schema corruption 211, severity 23, session kept", []mssqldb.Error{sqlErr(211, 23, "Possible schema corruption. Run DBCC CHECKCATALOG.")}, ErrCheckDBFailed, false},
		{"assertion during CHECKDB", []mssqldb.Error{sqlErr(3624, 20, "A system assertion check has failed.")}, ErrCheckDBFailed, false},
		{"any other error CHECKDB raises", []mssqldb.Error{sqlErr(5242, 22, "An inconsistency was detected during an internal operation in database 'Sales_verify'(ID:7) on page (1:153).")}, ErrCheckDBFailed, false},
		{"tempdb full: 1105 then 8921", []mssqldb.Error{
			sqlErr(1105, 17, "Could not allocate space for object 'dbo.SORT temporary run storage' in database 'tempdb' because the 'PRIMARY' filegroup is full."),
			sqlErr(8921, 16, "Check terminated. A failure was detected while collecting facts. Possibly tempdb out of space or a system table is inconsistent. Check previous errors.")},
			ErrCheckDBCouldNotRun, true},
		{"no internal snapshot, no lock", []mssqldb.Error{sqlErr(7926, 16, "Check statement aborted. The database could not be checked as a database snapshot could not be created and the database or table could not be locked.")}, ErrCheckDBCouldNotRun, true},
		{"snapshot out of disk space", []mssqldb.Error{
			sqlErr(5128, 17, "Write to sparse file 'D:\\restore\\data\\Sales_verify.mdf_MSSQL_DBCC7' failed due to lack of disk space."),
			sqlErr(8921, 16, "Check terminated. A failure was detected while collecting facts.")}, ErrCheckDBCouldNotRun, true},
		{"tempdb full alone", []mssqldb.Error{sqlErr(1105, 17, "Could not allocate space for object 'dbo.SORT temporary run storage' in database 'tempdb' because the 'PRIMARY' filegroup is full.")}, ErrCheckDBCouldNotRun, true},
		{"memory", []mssqldb.Error{sqlErr(701, 17, "There is insufficient system memory in resource pool 'default' to run this query.")}, ErrCheckDBCouldNotRun, true},
		{"copy restoring", []mssqldb.Error{sqlErr(927, 14, "Database 'Sales_verify' cannot be opened. It is in the middle of a restore.")}, ErrDatabaseUnavailable, true},
		{"copy gone", []mssqldb.Error{sqlErr(2520, 16, "Could not find database 'Sales_verify'.")}, ErrDatabaseNotFound, false},
		{"instance shutting down", []mssqldb.Error{sqlErr(6005, 14, "SHUTDOWN is in progress.")}, ErrUnreachable, true},
		{"session killed (KILL)", []mssqldb.Error{sqlErr(596, 21, "Cannot continue the execution because the session is in the kill state.")}, ErrUnreachable, true},
		{"session killed after a finding keeps the finding", []mssqldb.Error{
			sqlErr(8939, 16, "Table error: page (1:153) failed check."),
			sqlErr(596, 21, "Cannot continue the execution because the session is in the kill state.")}, ErrCheckDBFailed, false},
		{"the copy's storage lost: 823 with 64", []mssqldb.Error{sqlErr(823, 24, `The operating system returned error 64(The specified network name is no longer available.) to SQL Server during a read at offset 0x00000000a4c000 in file '\\san01\data\Sales_verify.mdf'.`)}, ErrUnreachable, true},
		{"the copy's storage lost: 823 with 1167", []mssqldb.Error{sqlErr(823, 24, `The operating system returned error 1167(The device is not connected.) to SQL Server during a read at offset 0x00000000a4c000 in file 'E:\data\Sales_verify.mdf'.`)}, ErrUnreachable, true},
		{"823 with a CRC error is a finding", []mssqldb.Error{sqlErr(823, 24, `The operating system returned error 23(Data error (cyclic redundancy check).) to SQL Server during a read at offset 0x00000000a4c000 in file 'E:\data\Sales_verify.mdf'.`)}, ErrCheckDBFailed, false},
		{"no permission to run DBCC", []mssqldb.Error{sqlErr(7983, 14, "User 'bk' does not have permission to run DBCC CHECKDB for database 'Sales_verify'.")}, ErrStatement, false},
		{"syntax", []mssqldb.Error{sqlErr(102, 15, "Incorrect syntax near 'CHECKDB'.")}, ErrStatement, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := ClassifyErrors(Target{Instance: "verify01", Address: "verify01:1433"}, op, tc.errs)
			var f *Failure
			if !errors.As(err, &f) || !errors.Is(err, tc.want) {
				t.Fatalf("kind of %v: want %v", err, tc.want)
			}
			if f.Retryable() != tc.retryable {
				t.Errorf("Retryable() = %v, want %v", f.Retryable(), tc.retryable)
			}
		})
	}

	// A severity 20+ error before the connection went: what CHECKDB
	// raised decides, not the lost connection.
	if err := lostFailure(Target{Address: "verify01:1433"}, op, []mssqldb.Error{sqlErr(211, 23, "Possible schema corruption. Run DBCC CHECKCATALOG.")},
		errors.New("connection reset")); !errors.Is(err, ErrCheckDBFailed) {
		t.Errorf("211 then the connection lost: %v, want CheckDBFailed", err)
	}
	// The connection lost with no error is a lost host, also for CHECKDB.
	if err := lostFailure(Target{Address: "verify01:1433"}, op, nil, errors.New("connection reset")); !errors.Is(err, ErrUnreachable) {
		t.Errorf("lost connection without an error: %v, want unreachable", err)
	}
	// Other operations keep the general rules: a severity 20 assertion
	// alone is a lost session, 7985 an unknown statement error.
	for _, tc := range []struct {
		errs []mssqldb.Error
		want error
	}{
		{[]mssqldb.Error{sqlErr(3624, 20, "A system assertion check has failed.")}, ErrUnreachable},
		{[]mssqldb.Error{sqlErr(7985, 16, "System table pre-checks: Object ID 7.")}, ErrStatement},
	} {
		if err := ClassifyErrors(Target{Address: "sql01:1433"}, "BACKUP DATABASE", tc.errs); !errors.Is(err, tc.want) {
			t.Errorf("BACKUP raising %d: %v, want %v", tc.errs[0].Number, err, tc.want)
		}
	}
}
