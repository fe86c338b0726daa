// Package tsql is the one place where T-SQL text is built.
//
// Every identifier goes through QuoteIdent (QUOTENAME semantics) and every string
// literal through QuoteString/Literal, so a hostile database name such as
// `Sales]; DROP DATABASE x--` or a logical file name with a quote stays data.
// Values that a statement accepts as parameters (names in WHERE clauses) are
// returned as (sql, args) with @p1.. placeholders, which is how go-mssqldb binds
// positional arguments. BACKUP, RESTORE and DBCC do not take parameters for
// their device and database names, so those are quoted literals/identifiers.
//
// All statements are plain SQL Server 2016+ T-SQL: whatever the emulator
// (internal/sqlsim) accepts must also run on a real server.
package tsql
