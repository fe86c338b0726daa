package tsql

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

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
