package tsql

import (
	"fmt"
	"strings"
)

// RunningStatements returns the query that lists the long statements
// running on the instance with their batch text, so a retried step finds
// the statement an earlier attempt sent by what it is, not by the database
// id it reports (for a RESTORE, sys.dm_exec_requests.database_id is not
// documented to be the target). Columns: session_id int, command nvarchar,
// percent_complete real, start_time datetime, text nvarchar(max).
//
// Without VIEW SERVER STATE (SQL Server 2022: VIEW SERVER PERFORMANCE STATE)
// a login sees only its own session here, that is none of these
// (https://learn.microsoft.com/sql/relational-databases/system-dynamic-management-views/sys-dm-exec-requests-transact-sql,
// "Permissions"); CanSeeOtherSessions tells.
func RunningStatements(commands ...string) (string, []any, error) {
	if len(commands) == 0 {
		commands = []string{CommandBackupDatabase, CommandRestoreDatabase, CommandCheckDB}
	}
	args := make([]any, 0, len(commands))
	ph := make([]string, len(commands))
	for i, c := range commands {
		if c == "" {
			return "", nil, fmt.Errorf("running statement lookup: empty command name")
		}
		args = append(args, c)
		ph[i] = fmt.Sprintf("@p%d", i+1)
	}
	return "SELECT r.session_id, r.command, r.percent_complete, r.start_time, t.text " +
		"FROM sys.dm_exec_requests r CROSS APPLY sys.dm_exec_sql_text(r.sql_handle) t " +
		"WHERE r.command IN (" + strings.Join(ph, ", ") + ") AND r.session_id <> @@SPID " +
		"ORDER BY r.start_time", args, nil
}

// CanSeeOtherSessions returns the query whose one row tells whether the
// login sees other sessions' requests: vss (VIEW SERVER STATE) or vsps (VIEW
// SERVER PERFORMANCE STATE, SQL Server 2022) is 1. HAS_PERMS_BY_NAME gives
// NULL for a permission the version does not know.
func CanSeeOtherSessions() string {
	return "SELECT HAS_PERMS_BY_NAME(NULL, NULL, 'VIEW SERVER STATE') AS vss, " +
		"HAS_PERMS_BY_NAME(NULL, NULL, 'VIEW SERVER PERFORMANCE STATE') AS vsps"
}

// BackupMarker is the start of the BACKUP statement that writes to
// firstDisk: with the set's own file names it is unique to the set.
func BackupMarker(db, firstDisk string) (string, error) {
	q, err := QuoteIdent(db)
	if err != nil {
		return "", fmt.Errorf("BACKUP marker: %w", err)
	}
	lit, err := Literal(firstDisk)
	if err != nil {
		return "", fmt.Errorf("BACKUP marker: %w", err)
	}
	return "BACKUP DATABASE " + q + " TO DISK = " + lit, nil
}

// RestoreMarker is the start of the RESTORE of the set whose first stripe is
// firstDisk into db.
func RestoreMarker(db, firstDisk string) (string, error) {
	q, err := QuoteIdent(db)
	if err != nil {
		return "", fmt.Errorf("RESTORE marker: %w", err)
	}
	lit, err := Literal(firstDisk)
	if err != nil {
		return "", fmt.Errorf("RESTORE marker: %w", err)
	}
	return "RESTORE DATABASE " + q + " FROM DISK = " + lit, nil
}

// CheckDBMarker is the start of the DBCC CHECKDB of db.
func CheckDBMarker(db string) (string, error) {
	q, err := QuoteIdent(db)
	if err != nil {
		return "", fmt.Errorf("DBCC CHECKDB marker: %w", err)
	}
	return "DBCC CHECKDB(" + q + ")", nil
}

// Kill ends session's request (KILL needs ALTER ANY CONNECTION:
// https://learn.microsoft.com/sql/t-sql/language-elements/kill-transact-sql,
// "Permissions"); SQL Server rolls the statement back.
func Kill(session int64) (string, error) {
	if session <= 0 || session > 32767 {
		return "", fmt.Errorf("%w: KILL of session %d: session ids are 1 to 32767", ErrInvalidOption, session)
	}
	return fmt.Sprintf("KILL %d", session), nil
}

// LastGoodCheckDB returns the query whose one value (last_good, datetime in
// the server's local time) is when the last DBCC CHECKDB of db that found
// nothing ended; 1900-01-01 when none did (DATABASEPROPERTYEX
// 'LastGoodCheckDbTime', SQL Server 2016 SP2 and later:
// https://learn.microsoft.com/sql/t-sql/functions/databasepropertyex-transact-sql).
func LastGoodCheckDB(db string) (string, []any, error) {
	if err := CheckIdent(db); err != nil {
		return "", nil, fmt.Errorf("last good CHECKDB lookup: %w", err)
	}
	return "SELECT DATABASEPROPERTYEX(@p1, 'LastGoodCheckDbTime') AS last_good", []any{db}, nil
}

// SetBackupMarker is the start every BACKUP of set seq of db sends, whatever
// its stripe count: BackupMarker up to the first stripe's "_1of".
func SetBackupMarker(nicPaths []string, names SetNames, seq int64) (string, error) {
	first, err := Layout(nicPaths, names, seq, 1)
	if err != nil {
		return "", err
	}
	m, err := BackupMarker(names.Database, first[0].Path)
	if err != nil {
		return "", err
	}
	return cutAfterFirstStripe(m), nil
}

// SetRestoreMarker is the start every RESTORE of set seq of db (its copies
// at nicPaths, named by names) into verifyDB sends, whatever its stripe
// count.
func SetRestoreMarker(verifyDB string, nicPaths []string, names SetNames, seq int64) (string, error) {
	first, err := Layout(nicPaths, names, seq, 1)
	if err != nil {
		return "", err
	}
	m, err := RestoreMarker(verifyDB, first[0].Path)
	if err != nil {
		return "", err
	}
	return cutAfterFirstStripe(m), nil
}

// cutAfterFirstStripe cuts a marker ending in the literal of stripe 1 of 1
// ("..._1of1.bak'") after its "_1of".
func cutAfterFirstStripe(m string) string {
	return strings.TrimSuffix(m, "1.bak'")
}
