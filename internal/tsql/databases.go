package tsql

import (
	"fmt"
	"strings"
)

// DatabasesQuery lists an instance's databases for the selection
// (package selection): one row per database with name, database_id,
// state_desc, source_database_id (non-NULL for a database snapshot) and
// is_read_only, ordered by name
// (https://learn.microsoft.com/en-us/sql/relational-databases/system-catalog-views/sys-databases-transact-sql).
//
// A login without ALTER ANY DATABASE or CREATE DATABASE does not see the
// rows of OFFLINE databases, so such a database is simply absent rather
// than reported as skipped; the login the cycle uses holds those rights.
//
// replica_id is set for an availability database ("ID of the local
// availability group availability replica of the database"), and the name
// of its group comes from sys.availability_replicas and
// sys.availability_groups, which show rows only to VIEW ANY DEFINITION
// (NULL otherwise: the LEFT JOINs keep the database).
const DatabasesQuery = "SELECT d.name, d.database_id, d.state_desc, d.source_database_id, d.is_read_only, d.replica_id, ag.name " +
	"FROM sys.databases d LEFT JOIN sys.availability_replicas ar ON ar.replica_id = d.replica_id " +
	"LEFT JOIN sys.availability_groups ag ON ag.group_id = ar.group_id ORDER BY d.name"

// maxResolve bounds the names one DatabaseIDs query resolves, well within
// the 2,100 parameters of a request ("Maximum capacity specifications for
// SQL Server",
// https://learn.microsoft.com/en-us/sql/sql-server/maximum-capacity-specifications-for-sql-server).
const maxResolve = 1000

// DatabaseIDs returns the query that resolves names as SQL Server resolves a
// database name: one row, column i the DB_ID of names[i] (NULL when the
// instance has no such database). DB_ID compares by the server collation,
// as sys.databases.name does ("Set or Change the Server Collation": the
// server collation decides the comparisons and the collation of system
// views' columns,
// https://learn.microsoft.com/en-us/sql/relational-databases/collations/set-or-change-the-server-collation;
// DB_ID, https://learn.microsoft.com/en-us/sql/t-sql/functions/db-id-transact-sql):
// Sales and SALES are one database on a case-insensitive instance, two
// names on a case-sensitive one. Trailing blanks never count.
func DatabaseIDs(names []string) (string, []any, error) {
	if len(names) == 0 || len(names) > maxResolve {
		return "", nil, fmt.Errorf("database name lookup: %d names; give 1 to %d", len(names), maxResolve)
	}
	var b strings.Builder
	args := make([]any, len(names))
	b.WriteString("SELECT ")
	for i, n := range names {
		if err := CheckIdent(n); err != nil {
			return "", nil, fmt.Errorf("database name lookup: %w", err)
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "DB_ID(@p%d)", i+1)
		args[i] = n
	}
	return b.String(), args, nil
}
