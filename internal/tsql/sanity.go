package tsql

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// SanityUser is the user the sanity queries run as in the restored copy:
// created there WITHOUT LOGIN, a member of db_datareader, nothing else.
const SanityUser = "backupcycle_sanity"

// SanityKind selects what a sanity check measures on the restored copy.
type SanityKind string

const (
	// SanityRowCount: SELECT COUNT_BIG(*) FROM [db].[schema].[table]
	SanityRowCount SanityKind = "row_count"
	// SanityMax: SELECT MAX([column]) FROM [db].[schema].[table]
	// (freshness of a date column, highest id).
	SanityMax SanityKind = "max"
	// SanityQuery: the configured statement, verbatim.
	SanityQuery SanityKind = "query"
)

// Sanity describes one sanity query. For row_count and max the statement is
// built from quoted names only; nothing of it is pasted SQL.
type Sanity struct {
	Kind   SanityKind
	Schema string // default "dbo"
	Table  string
	Column string // max only
	// Query is used verbatim for kind "query". The DBA who writes it in the
	// configuration owns it: it is run as one batch against the restored
	// verification copy, never against the source, and is not parsed or
	// rewritten here. It should return one row with one value.
	Query string
}

// SanityStatement builds the statement of a sanity check against database db
// (the verification copy). For kind "query" the configured statement is
// returned unchanged: run it on a connection whose current database is db
// (see UseDatabase), since it names its tables without a database.
func SanityStatement(db string, s Sanity) (string, error) {
	switch s.Kind {
	case SanityQuery:
		q := strings.TrimSpace(s.Query)
		if q == "" {
			return "", fmt.Errorf("sanity check: kind %q needs a non-empty query", s.Kind)
		}
		if !utf8.ValidString(q) || strings.ContainsRune(q, 0) {
			return "", fmt.Errorf("sanity check: query %q contains NUL or invalid UTF-8; fix the configuration", short(q))
		}
		return q, nil
	case SanityRowCount, SanityMax:
	default:
		return "", fmt.Errorf("sanity check: unknown kind %q (want %q, %q or %q)", s.Kind, SanityRowCount, SanityMax, SanityQuery)
	}
	schema := s.Schema
	if schema == "" {
		schema = "dbo"
	}
	from, err := QualifiedName(db, schema, s.Table)
	if err != nil {
		return "", fmt.Errorf("sanity check %s on %s.%s: %w", s.Kind, schema, s.Table, err)
	}
	if s.Kind == SanityRowCount {
		return "SELECT COUNT_BIG(*) FROM " + from, nil
	}
	col, err := QuoteIdent(s.Column)
	if err != nil {
		return "", fmt.Errorf("sanity check max on %s.%s: column: %w", schema, s.Table, err)
	}
	return "SELECT MAX(" + col + ") FROM " + from, nil
}

// UseDatabase builds USE [db].
func UseDatabase(db string) (string, error) {
	q, err := QuoteIdent(db)
	if err != nil {
		return "", fmt.Errorf("USE: %w", err)
	}
	return "USE " + q, nil
}

// ParseObjectName reads a one- or two-part object name as a DBA writes it
// ("fn_IntegrityOK", "dbo.fn_IntegrityOK", "[app].[fn.x]"); the schema
// defaults to dbo.
func ParseObjectName(s string) (schema, name string, err error) {
	var parts []string
	var cur strings.Builder
	inBracket := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inBracket && c == ']' && i+1 < len(s) && s[i+1] == ']':
			cur.WriteByte(']')
			i++
		case inBracket && c == ']':
			inBracket = false
		case !inBracket && c == '[' && cur.Len() == 0:
			inBracket = true
		case !inBracket && c == '.':
			parts = append(parts, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(c)
		}
	}
	parts = append(parts, cur.String())
	if inBracket || len(parts) > 2 {
		return "", "", fmt.Errorf("%w: %q is not an object name (function or schema.function)", ErrInvalidIdent, s)
	}
	for _, p := range parts {
		if err := CheckIdent(strings.TrimSpace(p)); err != nil {
			return "", "", fmt.Errorf("object name %q: %w", s, err)
		}
	}
	if len(parts) == 1 {
		return "dbo", strings.TrimSpace(parts[0]), nil
	}
	return strings.TrimSpace(parts[0]), strings.TrimSpace(parts[1]), nil
}

// SanityUserSetup builds the statements, each sent on its own, that make
// SanityUser in the restored copy (the connection's current database): a
// user WITHOUT LOGIN, a member of db_datareader and nothing else (see
// SanityGrant for the functions a check calls). One left by an earlier
// attempt (or of that name in the source) is dropped first.
// Impersonating it (EXECUTE AS USER) confines a session to the copy
// ("Extending Database Impersonation by Using EXECUTE AS": the scope of
// impersonation is restricted to the database, unless it is TRUSTWORTHY,
// which a restored copy is not).
func SanityUserSetup() []string {
	user, _ := QuoteIdent(SanityUser)
	return []string{
		"IF DATABASE_PRINCIPAL_ID(" + QuoteString(SanityUser) + ") IS NOT NULL DROP USER " + user,
		"CREATE USER " + user + " WITHOUT LOGIN WITH DEFAULT_SCHEMA = [dbo]",
		"ALTER ROLE [db_datareader] ADD MEMBER " + user,
	}
}

// SanityGrant grants SanityUser EXECUTE on a function of the copy
// ("schema.name" or "name", see ParseObjectName).
func SanityGrant(function string) (string, error) {
	schema, name, err := ParseObjectName(function)
	if err != nil {
		return "", fmt.Errorf("sanity check grant_execute: %w", err)
	}
	qo, err := QualifiedName(schema, name)
	if err != nil {
		return "", fmt.Errorf("sanity check grant_execute: %w", err)
	}
	return "GRANT EXECUTE ON OBJECT::" + qo + " TO [" + SanityUser + "]", nil
}

// Statements around the sanity queries: enter SanityUser's context (it
// lasts for the session until REVERT), say who the session runs as,
// leave it, remove the user.
const (
	ExecuteAsSanityUser = "EXECUTE AS USER = N'" + SanityUser + "'"
	CurrentUser         = "SELECT USER_NAME()"
	Revert              = "REVERT"
	DropSanityUser      = "DROP USER IF EXISTS [" + SanityUser + "]"
)

// CopyOptions asks two options of database db (sys.databases): whether it
// is TRUSTWORTHY, the setting that would let a context inside it reach
// beyond it, and READ_ONLY (a restored copy keeps its source's).
func CopyOptions(db string) (string, []any, error) {
	if err := CheckIdent(db); err != nil {
		return "", nil, fmt.Errorf("options of %q: %w", db, err)
	}
	return "SELECT is_trustworthy_on, is_read_only FROM sys.databases WHERE name = @p1", []any{db}, nil
}

// SetReadOnly builds ALTER DATABASE [db] SET READ_ONLY or READ_WRITE, WITH
// ROLLBACK IMMEDIATE: it needs the database to itself (5070 otherwise), and
// the only other sessions in a restored copy are the cycle's own.
func SetReadOnly(db string, readOnly bool) (string, error) {
	q, err := QuoteIdent(db)
	if err != nil {
		return "", fmt.Errorf("READ_ONLY of %q: %w", db, err)
	}
	opt := "READ_WRITE"
	if readOnly {
		opt = "READ_ONLY"
	}
	return "ALTER DATABASE " + q + " SET " + opt + " WITH ROLLBACK IMMEDIATE", nil
}
