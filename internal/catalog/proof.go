package catalog

import (
	"time"
)

// The restore proof a manifest carries: which backup set was restored where
// (Proof), the copy it was restored into (VerifyCopy, DatabaseRef), the
// CHECKDB baseline and the sanity checks' results.

// Proof records that the set's own backup (this backup set GUID) was
// restored and CHECKDB'd: the restore-history row of the verification
// database names this GUID, before and after CHECKDB.
//
// RestoredAt is msdb's restore_date as SQL Server reported it: the
// verification server's wall clock, labelled UTC. UTCOffsetMinutes is that
// server's offset from UTC read with it, RestoredAtUTC the instant (nil and
// zero in manifests written before version 3). CheckedAt is the worker's
// clock.
type Proof struct {
	VerifyInstance   string    `json:"verify_instance"`
	VerifyDatabase   string    `json:"verify_database"`
	RestoreHistoryID int64     `json:"restore_history_id"`
	BackupSetGUID    string    `json:"backup_set_guid"`
	RestoredAt       time.Time `json:"restored_at"`
	CheckedAt        time.Time `json:"checked_at"`
	UTCOffsetMinutes *int      `json:"utc_offset_minutes,omitempty"`
	RestoredAtUTC    time.Time `json:"restored_at_utc,omitzero"`
}

// SetUTCOffset records the verification server's offset from UTC with
// which RestoredAt was reported, and the instant it names.
func (p *Proof) SetUTCOffset(minutes int) {
	p.UTCOffsetMinutes = &minutes
	p.RestoredAtUTC = Instant(p.RestoredAt, minutes)
}

// SanityProof records that the database's sanity checks ran on the copy
// restored from this set and held: the same restore (RestoreHistoryID,
// BackupSetGUID) as Proof, the checks by name, the database user they ran
// as, and when (the worker's clock). SanityChecks writes it; MarkVerified
// of a database with sanity checks requires it.
type SanityProof struct {
	VerifyInstance   string    `json:"verify_instance"`
	VerifyDatabase   string    `json:"verify_database"`
	RestoreHistoryID int64     `json:"restore_history_id"`
	BackupSetGUID    string    `json:"backup_set_guid"`
	Checks           []string  `json:"checks"`
	RanAs            string    `json:"ran_as"`
	CheckedAt        time.Time `json:"checked_at"`
	Passed           bool      `json:"passed"`
}

// VerifyCopy is the copy of the set the product restores, or is about to
// restore, on a verification instance: recorded before the RESTORE is sent,
// completed once msdb confirms it. It is how the product knows its own copy
// later (another cycle, a resume, a retry on another worker, the drop),
// whatever the copy's state: a RESTORE cut short leaves a RESTORING
// database with no restore-history row at all, and restore history alone
// cannot tell the product's restore of a set from a DBA's restore of the
// same set. The verification instance itself is asked before anything is
// replaced or dropped; this record says what it must answer.
//
// InstanceTime, Replaces.Created and ConfirmedAt are the verification
// server's datetime values as it reported them (wall clock, labelled UTC);
// SentAt is the worker's clock.
type VerifyCopy struct {
	VerifyInstance string `json:"verify_instance"`
	VerifyDatabase string `json:"verify_database"`
	BackupSetGUID  string `json:"backup_set_guid"`
	// SentAt is when the RESTORE was about to be sent (worker's clock).
	SentAt time.Time `json:"sent_at"`
	// InstanceTime is the instance's GETDATE() read just before the
	// RESTORE: the database that RESTORE creates has a create_date, and its
	// restore-history row a restore_date, no earlier. Zero for a copy
	// whose RESTORE was found rather than sent (not known then).
	InstanceTime time.Time `json:"instance_time,omitzero"`
	// NewestRestoreBefore is the id of msdb's newest restore-history row
	// (0: none) read with InstanceTime: the row of the RESTORE recorded
	// here, and of any restore after it, has a higher one (an identity
	// column). Whether msdb recorded a restore since is judged by it, not
	// by restore_date, a wall clock that runs back when the instance's time
	// zone changes or daylight saving time ends. Nil in records written
	// before.
	NewestRestoreBefore *int64 `json:"newest_restore_before,omitempty"`
	// Replaces is the database that held the name then (the product's own
	// copy, or the guard would have refused): a RESTORE ... REPLACE cut
	// short may leave it as it was, or created anew.
	Replaces *DatabaseRef `json:"replaces,omitempty"`
	// OtherDatabaseIDs are the ids of every other database of the instance
	// then: the database the RESTORE creates gets none of them. (SQL Server
	// hands out the ids of dropped databases again, lowest first, so a
	// newer database may well have a lower id than an older one.)
	OtherDatabaseIDs []int64 `json:"other_database_ids,omitempty"`
	// Set once msdb shows the RESTORE: its restore-history row, the id of
	// the database it produced, and the instance's GETDATE() then (the
	// copy was created before it).
	RestoreHistoryID int64     `json:"restore_history_id,omitempty"`
	DatabaseID       int64     `json:"database_id,omitempty"`
	ConfirmedAt      time.Time `json:"confirmed_at,omitzero"`
	// DatabaseCreated is the create_date of the database the RESTORE
	// produced, read with DatabaseID: that database is the one with both,
	// exactly, whatever the instance's clock did since. Comparing its
	// create_date with the instance's clock before and after the RESTORE
	// disowned a copy restored across the end of daylight saving time (a
	// create_date stamped on CEST after a GETDATE() read on CET, or on CET
	// before one read on CEST). Zero in records written before.
	DatabaseCreated time.Time `json:"database_create_date,omitzero"`
	// UTCOffsetMinutes is the instance's offset from UTC read with
	// InstanceTime, InstanceTimeUTC the instant InstanceTime names: the
	// records of copies restored before and after the instance's clock
	// moved (its time zone changed, daylight saving time ended) are ordered
	// by it, as its wall clock may run back. Nil and zero in records
	// written before.
	UTCOffsetMinutes *int      `json:"utc_offset_minutes,omitempty"`
	InstanceTimeUTC  time.Time `json:"instance_time_utc,omitzero"`
	// CheckDBBaseline is what the copy said right after msdb confirmed the
	// RESTORE: the baseline a CHECKDB of it that ended while no worker
	// watched is judged by (CheckDBBaseline.CleanSince). Recorded here,
	// where it outlives the attempt, rather than in a heartbeat, which
	// anyone polling the task queue can forge.
	CheckDBBaseline *CheckDBBaseline `json:"checkdb_baseline,omitempty"`
}

// CheckDBBaseline is what a restored copy said before any CHECKDB of it,
// all on the verification server's own clock: LastGood, its
// LastGoodCheckDbTime (after the restore: the source's value, on the
// source's clock, whatever its zone or skew), and At, the server's
// GETDATE() read with it.
type CheckDBBaseline struct {
	LastGood time.Time `json:"last_good"`
	At       time.Time `json:"at"`
}

// CleanSince reports whether lastGood, the copy's LastGoodCheckDbTime read
// after b on the same server, says a CHECKDB of it ended clean since b: the
// value changed (only a CHECKDB that finds nothing changes it) to a time at
// or after b.At, both on the verification server's clock. The copy's value
// alone proves nothing: after a restore it is its source's, on the
// source's clock, which may run hours ahead (another zone, skew).
// `starter conformance` checks on a real server that this holds.
func (b CheckDBBaseline) CleanSince(lastGood time.Time) bool {
	return !lastGood.Equal(b.LastGood) && !lastGood.Before(b.At)
}

// SetUTCOffset records the verification instance's offset from UTC with
// which InstanceTime was reported, and the instant it names.
func (v *VerifyCopy) SetUTCOffset(minutes int) {
	v.UTCOffsetMinutes = &minutes
	v.InstanceTimeUTC = Instant(v.InstanceTime, minutes)
}

// newestRestoreOK reports whether NewestRestoreBefore, when recorded, is
// a restore_history_id (0 for none) read with InstanceTime.
func (v *VerifyCopy) newestRestoreOK() bool {
	n := v.NewestRestoreBefore
	return n == nil || *n >= 0 && !v.InstanceTime.IsZero()
}

// DatabaseRef is a database of a verification instance as sys.databases
// showed it.
type DatabaseRef struct {
	ID      int64     `json:"database_id"`
	Created time.Time `json:"create_date"`
}

// Confirmed reports whether msdb confirmed the RESTORE.
func (v *VerifyCopy) Confirmed() bool { return v.RestoreHistoryID != 0 }

// On reports whether v is the copy named verifyDB on instance.
func (v *VerifyCopy) On(instance, verifyDB string) bool {
	return v != nil && v.VerifyInstance == instance && v.VerifyDatabase == verifyDB
}

// Manifest describes one backup set. Field names are part of the on-disk
// format: change them only with a new SchemaVersion. CreatedAt, UpdatedAt,
// History, Timings, Failure and Proof.CheckedAt are the worker's clock
