package activities

import (
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/mssql"
)

// TestOwnCopyRules: which database of the copy's name is the product's, by
// its records and what the verification instance shows, rule by rule.
func TestOwnCopyRules(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 22, 0, 0, 0, time.UTC) // the instance's clock before the RESTORE
	const guid, other = "6330FD3B-58D4-4608-8C30-DA4E877D36BE", "11111111-2222-3333-4444-555555555555"
	sent := func() *catalog.VerifyCopy { // about to restore; ids 1-6 taken by other databases
		return &catalog.VerifyCopy{VerifyInstance: "verify01", VerifyDatabase: "Sales_verify", BackupSetGUID: guid, SentAt: t0,
			InstanceTime: t0, OtherDatabaseIDs: []int64{1, 2, 3, 4, 5, 6}}
	}
	confirmed := func() *catalog.VerifyCopy {
		v := sent()
		v.RestoreHistoryID, v.DatabaseID, v.ConfirmedAt = 40, 7, t0.Add(3*time.Hour)
		return v
	}
	ours := func(state string, id int64, created time.Time) *mssql.DatabaseState {
		return &mssql.DatabaseState{Name: "Sales_verify", State: state, ID: id, Created: created, OwnerSID: "0x01", LoginSID: "0x01"}
	}
	restore := func(id int64, g string, at time.Time) *mssql.RestoreProof {
		return &mssql.RestoreProof{HistoryID: id, BackupSetGUID: g, RestoreDate: at, BackupSetName: "backupcycle seq 00000009"}
	}
	// confirmedCreated is confirmed() keeping the copy's create_date.
	confirmedCreated := func(created time.Time) *catalog.VerifyCopy {
		v := confirmed()
		v.DatabaseCreated = created
		return v
	}
	// sentAfter is sent() recording msdb's newest restore-history row then.
	sentAfter := func(newest int64) *catalog.VerifyCopy {
		v := sent()
		v.NewestRestoreBefore = &newest
		return v
	}
	rec := func(v *catalog.VerifyCopy) []copyRecord { return []copyRecord{{seq: 9, vc: v}} }
	late := t0.Add(2 * time.Hour) // created long after restore_date: a slow file allocation

	for _, tc := range []struct {
		name string
		st   *mssql.DatabaseState
		last *mssql.RestoreProof
		recs []copyRecord
		why  string // "" when ours
	}{
		{"finished, created late", ours("ONLINE", 7, late), restore(40, guid, t0.Add(time.Second)), rec(confirmed()), ""},
		{"finished, another login owns it", func() *mssql.DatabaseState { s := ours("ONLINE", 7, late); s.OwnerSID = "0xAB"; return s }(),
			restore(40, guid, t0), rec(confirmed()), "owned by SID 0xAB"},
		{"a DBA's restore of the same set", ours("ONLINE", 7, late), restore(41, guid, t0.Add(4*time.Hour)), rec(confirmed()), "a restore no backupcycle set records"},
		{"re-created after the restore ended", ours("ONLINE", 7, t0.Add(4*time.Hour)), restore(40, guid, t0), rec(confirmed()), "no backupcycle set records"},
		{"another database id", ours("ONLINE", 8, late), restore(40, guid, t0), rec(confirmed()), "no backupcycle set records"},
		// SQL Server reuses a dropped database's id: another database
		// held 6 when the RESTORE was sent and was dropped while it ran;
		// the confirmation read this restore and this database.
		{"finished, an id freed while it restored", ours("ONLINE", 6, late), restore(40, guid, t0.Add(time.Second)),
			rec(func() *catalog.VerifyCopy { v := confirmed(); v.DatabaseID = 6; return v }()), ""},
		{"finished unseen, unconfirmed", ours("ONLINE", 7, late), restore(40, guid, t0.Add(time.Minute)), rec(sent()), ""},
		{"finished before the record", ours("ONLINE", 7, late), restore(40, guid, t0.Add(-time.Hour)), rec(sent()), "no backupcycle set records"},
		{"never restored, online", ours("ONLINE", 7, late), nil, rec(sent()), "never restored"},
		{"cut short", ours("RESTORING", 7, late), nil, rec(sent()), ""},
		{"cut short, an id another database had then", ours("RESTORING", 6, late), nil, rec(sent()), "left by a RESTORE no backupcycle set records"},
		{"cut short, created before the record", ours("RESTORING", 7, t0.Add(-time.Minute)), nil, rec(sent()), "left by a RESTORE"},
		{"cut short, the database it replaced as it was", ours("RESTORING", 3, t0.Add(-24*time.Hour)), nil,
			rec(func() *catalog.VerifyCopy {
				v := sent()
				v.Replaces = &catalog.DatabaseRef{ID: 3, Created: t0.Add(-24 * time.Hour)}
				return v
			}()), ""},
		{"RESTORING after a confirmed restore", ours("RESTORING", 7, t0.Add(4*time.Hour)), restore(40, guid, t0), rec(confirmed()), "left by a RESTORE"},
		{"RESTORING after a later restore", ours("RESTORING", 7, t0.Add(4*time.Hour)), restore(41, other, t0.Add(3*time.Hour)), rec(sent()), "left by a RESTORE"},
		{"RESTORING, another login", func() *mssql.DatabaseState { s := ours("RESTORING", 7, late); s.OwnerSID = "0xAB"; return s }(),
			nil, rec(sent()), "owned by SID 0xAB"},
		{"RESTORING, only an older record unconfirmed", ours("RESTORING", 7, late), nil,
			[]copyRecord{{seq: 10, vc: confirmed()}, {seq: 9, vc: sent()}}, "left by a RESTORE"},
		{"no record at all", ours("RESTORING", 7, late), nil, nil, "left by a RESTORE no backupcycle set records"},
		// Which restore msdb recorded after the record is told by
		// restore_history_id: the instance's wall clock runs back when its
		// time zone changes or daylight saving time ends, and an earlier
		// restore then bears a later restore_date than GETDATE() before
		// the RESTORE, a later one an earlier date.
		{"cut short, an earlier restore dated later", ours("RESTORING", 7, late), restore(39, other, t0.Add(13*time.Hour)), rec(sentAfter(39)), ""},
		{"cut short, a later restore of another set dated earlier", ours("RESTORING", 7, late), restore(40, other, t0.Add(-time.Hour)),
			rec(sentAfter(39)), "left by a RESTORE"},
		{"RESTORING after its own RESTORE ended unseen", ours("RESTORING", 7, late), restore(40, guid, t0.Add(10*time.Second)),
			rec(sentAfter(39)), ""},
		{"finished unseen, dated before the record", ours("ONLINE", 7, late), restore(40, guid, t0.Add(-30*time.Minute)), rec(sentAfter(39)), ""},
		{"finished before the record, dated after it", ours("ONLINE", 7, late), restore(39, guid, t0.Add(time.Hour)), rec(sentAfter(39)),
			"no backupcycle set records"},
		// The instance came back an hour behind (a time zone change, the
		// end of daylight saving time) between the record and its RESTORE,
		// which ended while no worker watched it: the copy's create_date is
		// before the GETDATE() recorded. No database had its id then (the
		// record read every id with that clock), or the one it replaced had
		// another create_date: it was created since.
		{"finished unseen, created before the record's clock", ours("ONLINE", 7, t0.Add(-59*time.Minute)), restore(40, guid, t0.Add(-59*time.Minute)),
			rec(sentAfter(39)), ""},
		{"finished unseen over the copy it replaced, created before the record's clock", ours("ONLINE", 3, t0.Add(-59*time.Minute)),
			restore(40, guid, t0.Add(-59*time.Minute)), rec(func() *catalog.VerifyCopy {
				v := sentAfter(39)
				v.Replaces, v.OtherDatabaseIDs = &catalog.DatabaseRef{ID: 3, Created: t0.Add(-24 * time.Hour)}, []int64{1, 2, 4, 5, 6}
				return v
			}()), ""},
		{"cut short, created before the record's clock", ours("RESTORING", 7, t0.Add(-59*time.Minute)), nil, rec(sentAfter(39)), ""},
		{"finished unseen, an id another database had then", ours("ONLINE", 6, t0.Add(-59*time.Minute)), restore(40, guid, t0),
			rec(sentAfter(39)), "no backupcycle set records"},
		// The confirmation kept the copy's create_date: the copy is the
		// database with that id and that create_date, whatever the clock
		// did. Daylight saving time ended during the RESTORE: create_date
		// (CEST) is after the GETDATE() read at the confirmation (CET), or
		// (created on CET) before the one read before the RESTORE (CEST).
		{"finished across the fall-back, created after the confirmation's clock", ours("ONLINE", 7, t0.Add(3*time.Hour+30*time.Minute)),
			restore(40, guid, t0), rec(confirmedCreated(t0.Add(3*time.Hour + 30*time.Minute))), ""},
		{"finished across the fall-back, created before the record's clock", ours("ONLINE", 7, t0.Add(-50*time.Minute)),
			restore(40, guid, t0), rec(confirmedCreated(t0.Add(-50 * time.Minute))), ""},
		{"re-created with its id after the clock fell back", ours("ONLINE", 7, late.Add(time.Minute)), restore(40, guid, t0),
			rec(confirmedCreated(late)), "no backupcycle set records"},
		{"RESTORING after a confirmed restore, its create_date kept", ours("RESTORING", 7, late), restore(40, guid, t0),
			rec(confirmedCreated(late)), "left by a RESTORE"},
		// A record written before msdb's newest row was kept has only the
		// wall clock: an earlier restore dated later disowns the copy.
		{"cut short, a record without msdb's newest, an earlier restore dated later", ours("RESTORING", 7, late),
			restore(39, other, t0.Add(13*time.Hour)), rec(sent()), "left by a RESTORE"},
		{"legacy proof", ours("ONLINE", 7, t0.Add(time.Second)), restore(40, guid, t0),
			[]copyRecord{{seq: 9, proof: &catalog.Proof{RestoreHistoryID: 40, BackupSetGUID: guid}, window: 2 * time.Second}}, ""},
		{"legacy proof, re-created", ours("ONLINE", 7, t0.Add(time.Minute)), restore(40, guid, t0),
			[]copyRecord{{seq: 9, proof: &catalog.Proof{RestoreHistoryID: 40, BackupSetGUID: guid}, window: 2 * time.Second}}, "no backupcycle set records"},
	} {
		r, why := ownCopy(tc.st, tc.last, tc.recs)
		switch {
		case tc.why == "" && (r == nil || why != ""):
			t.Errorf("%s: refused (%s), want it recognised", tc.name, why)
		case tc.why != "" && (r != nil || !strings.Contains(why, tc.why)):
			t.Errorf("%s: %v %q, want refused: %s", tc.name, r, why, tc.why)
		}
	}
}
