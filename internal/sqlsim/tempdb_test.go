package sqlsim

import "testing"

// TestTempdbFullStopsCheckDB: with tempdb out of space DBCC CHECKDB stops
// before checking: 1105 (tempdb's filegroup full) then 8921 ("Check
// terminated ... Possibly tempdb out of space"); it says nothing about the
// database, which checks clean once tempdb has room.
func TestTempdbFullStopsCheckDB(t *testing.T) {
	e := newEnv(t)
	e.create(t, DatabaseSpec{Name: "Sales", Size: 1 << 20})
	e.in.SetTempdbFull(true)
	wantErrs(t, e.db, []int32{1105, 8921}, "DBCC CHECKDB([Sales]) WITH NO_INFOMSGS, ALL_ERRORMSGS")
	e.in.SetTempdbFull(false)
	mustRun(t, e.db, "DBCC CHECKDB([Sales]) WITH NO_INFOMSGS, ALL_ERRORMSGS")
}
