package tsql

import (
	"fmt"
	"strings"
)

// RunningStatements returns the query that lists the long statements
// running on the instance with their batch text, so a retried step finds
// the statement an earlier attempt sent by what it is, not by the database
// id it reports (for a RESTORE, sys.dm_exec_requests.database_id is not
// documented to be the target). commands are LIKE patterns of
// sys.dm_exec_requests.command (CommandCheckDB covers every phase of a
// CHECKDB). Columns: session_id int, command nvarchar, percent_complete
// real, start_time datetime, text nvarchar(max), login_name nvarchar (the
// session's original_login_name: "the login with which the user created
// the session", sys.dm_exec_sessions,
// https://learn.microsoft.com/sql/relational-databases/system-dynamic-management-views/sys-dm-exec-sessions-transact-sql)
// and own_login nvarchar (ORIGINAL_LOGIN() of the querying session): a
// statement of another login is never this product's.
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
	return "SELECT r.session_id, r.command, r.percent_complete, r.start_time, t.text, " +
		"s.original_login_name AS login_name, ORIGINAL_LOGIN() AS own_login " +
		"FROM sys.dm_exec_requests r CROSS APPLY sys.dm_exec_sql_text(r.sql_handle) t " +
		"JOIN sys.dm_exec_sessions s ON s.session_id = r.session_id " +
		"WHERE (" + commandsLike("r.command", ph) + ") AND r.session_id <> @@SPID " +
		"ORDER BY r.start_time", args, nil
}

// commandsLike is col LIKE each of the placeholders, ORed.
func commandsLike(col string, ph []string) string {
	like := make([]string, len(ph))
	for i, p := range ph {
		like[i] = col + " LIKE " + p
	}
	return strings.Join(like, " OR ")
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

// CheckDBMarker is the whole text of the verification step's DBCC CHECKDB
// of set seq's copy db (VerifyCheckDB): only that statement is the step's,
// not a DBA's or another tool's CHECKDB of the same copy.
func CheckDBMarker(db string, seq int64) (string, error) {
	return VerifyCheckDB(db, seq)
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

// LastGoodCheckDB returns the query whose one row says when the last DBCC
// CHECKDB of db that found nothing ended, last_good (datetime; 1900-01-01
// when none did: DATABASEPROPERTYEX 'LastGoodCheckDbTime', SQL Server 2016
// SP2 and later:
// https://learn.microsoft.com/sql/t-sql/functions/databasepropertyex-transact-sql),
// and server_now, the server's GETDATE(). The value is kept in the
// database itself, on the clock of the server that ran that CHECKDB: a
// restored copy reports its source's, on the source's clock, until a
// CHECKDB of the copy ends clean. Only a change of the value, read against
// server_now of the same server, says a CHECKDB ran here.
func LastGoodCheckDB(db string) (string, []any, error) {
	if err := CheckIdent(db); err != nil {
		return "", nil, fmt.Errorf("last good CHECKDB lookup: %w", err)
	}
	return "SELECT DATABASEPROPERTYEX(@p1, 'LastGoodCheckDbTime') AS last_good, GETDATE() AS server_now", []any{db}, nil
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

// SessionID is the query for the session's own id: one row (spid smallint).
const SessionID = "SELECT @@SPID AS spid"

// SessionRequests returns the query for what session is running now, with
// the columns of RunningStatements and whatever its command: one row while
// it runs a request, none otherwise. It shows another session's request
// only to a login that sees other sessions (CanSeeOtherSessions).
func SessionRequests(session int64) (string, []any, error) {
	if session <= 0 || session > 32767 {
		return "", nil, fmt.Errorf("%w: session %d: session ids are 1 to 32767", ErrInvalidOption, session)
	}
	return "SELECT r.session_id, r.command, r.percent_complete, r.start_time, t.text, " +
		"s.original_login_name AS login_name, ORIGINAL_LOGIN() AS own_login " +
		"FROM sys.dm_exec_requests r CROSS APPLY sys.dm_exec_sql_text(r.sql_handle) t " +
		"JOIN sys.dm_exec_sessions s ON s.session_id = r.session_id " +
		"WHERE r.session_id = @p1", []any{session}, nil
}
