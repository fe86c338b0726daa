package tsql

// DatabasesQuery lists an instance's databases for the selection
// (package selection): one row per database with name, database_id,
// state_desc, source_database_id (non-NULL for a database snapshot) and
// is_read_only, ordered by name
// (https://learn.microsoft.com/en-us/sql/relational-databases/system-catalog-views/sys-databases-transact-sql).
//
// A login without ALTER ANY DATABASE or CREATE DATABASE does not see the
// rows of OFFLINE databases, so such a database is simply absent rather
// than reported as skipped; the login the cycle uses holds those rights.
const DatabasesQuery = "SELECT name, database_id, state_desc, source_database_id, is_read_only FROM sys.databases ORDER BY name"
