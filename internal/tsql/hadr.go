package tsql

import "fmt"

// Availability groups (Always On): which replica of a group backs a
// database up, asked on each replica.

// PreferredBackupReplica is the query whether this replica is the
// preferred backup replica of database db: one row, preferred bit,
// sys.fn_hadr_backup_is_preferred_replica(db) — 1 on the replica the
// group's AUTOMATED_BACKUP_PREFERENCE and BACKUP_PRIORITY name, 0 on the
// others, 1 for a database outside any group
// (https://learn.microsoft.com/en-us/sql/relational-databases/system-functions/sys-fn-hadr-backup-is-preferred-replica-transact-sql).
// SQL Server does not enforce the preference: "the interpretation of
// this preference depends on the logic ... that you script into backup
// jobs" (ALTER AVAILABILITY GROUP), so every cycle asks.
func PreferredBackupReplica(db string) (string, []any, error) {
	if err := CheckIdent(db); err != nil {
		return "", nil, fmt.Errorf("preferred replica lookup: %w", err)
	}
	return "SELECT sys.fn_hadr_backup_is_preferred_replica(@p1) AS preferred", []any{db}, nil
}

// ReplicaState is the query for the local copy of availability database
// db: one row (none outside a group), is_primary_replica bit and
// synchronization_state_desc nvarchar (SYNCHRONIZED, SYNCHRONIZING, NOT
// SYNCHRONIZING, ...), from sys.dm_hadr_database_replica_states, which
// needs VIEW SERVER STATE (VIEW SERVER PERFORMANCE STATE on SQL Server
// 2022)
// (https://learn.microsoft.com/en-us/sql/relational-databases/system-dynamic-management-views/sys-dm-hadr-database-replica-states-transact-sql).
// A secondary can back up only while it is SYNCHRONIZED or SYNCHRONIZING
// ("Offload supported backups to secondary replicas of an availability
// group"), which the preferred-replica function does not look at.
func ReplicaState(db string) (string, []any, error) {
	if err := CheckIdent(db); err != nil {
		return "", nil, fmt.Errorf("replica state lookup: %w", err)
	}
	return "SELECT rs.is_primary_replica, rs.synchronization_state_desc FROM sys.dm_hadr_database_replica_states rs " +
		"WHERE rs.is_local = 1 AND rs.database_id = DB_ID(@p1)", []any{db}, nil
}
