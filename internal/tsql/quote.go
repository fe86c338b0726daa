package tsql

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxIdentLen is the longest identifier SQL Server accepts (sysname =
// nvarchar(128), counted in UTF-16 code units, as QUOTENAME counts).
const MaxIdentLen = 128

// ErrInvalidIdent is wrapped by every identifier rejection, so callers can
// classify bad names as non-retryable input errors.
var ErrInvalidIdent = errors.New("invalid SQL identifier")

// ErrInvalidLiteral is wrapped when a string cannot become a T-SQL literal.
var ErrInvalidLiteral = errors.New("invalid SQL string literal")

// QuoteIdent quotes s as a delimited identifier the way QUOTENAME(s) does:
// `[` + s with every `]` doubled + `]`. It rejects what QUOTENAME would turn
// into NULL or what no SQL Server name may contain: the empty string, NUL,
// invalid UTF-8 and names longer than 128 UTF-16 code units.
func QuoteIdent(s string) (string, error) {
	if err := CheckIdent(s); err != nil {
		return "", err
	}
	return "[" + strings.ReplaceAll(s, "]", "]]") + "]", nil
}

// CheckIdent reports whether s can be used as a SQL Server identifier.
func CheckIdent(s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: the name is empty; give the database/object name", ErrInvalidIdent)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: %q is not valid UTF-8; fix the encoding of the configured name", ErrInvalidIdent, s)
	case strings.ContainsRune(s, 0):
		return fmt.Errorf("%w: %q contains a NUL character, which no SQL Server name may contain; remove it", ErrInvalidIdent, s)
	}
	if n := utf16Len(s); n > MaxIdentLen {
		return fmt.Errorf("%w: %q is %d characters long, SQL Server names are at most %d; use a shorter name", ErrInvalidIdent, short(s), n, MaxIdentLen)
	}
	return nil
}

// QuoteString returns s as a Unicode string literal N'...' with every `'`
// doubled. It is for strings known to be NUL-free (constants, names already
// passed through CheckIdent); anything that comes from outside goes through
// Literal, which rejects NUL instead of silently embedding it.
func QuoteString(s string) string {
	return "N'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// Literal is QuoteString with validation: NUL and invalid UTF-8 are rejected
// (a path or name containing them is a configuration mistake, not data).
func Literal(s string) (string, error) {
	if !utf8.ValidString(s) {
		return "", fmt.Errorf("%w: %q is not valid UTF-8", ErrInvalidLiteral, s)
	}
	if strings.ContainsRune(s, 0) {
		return "", fmt.Errorf("%w: %q contains a NUL character; remove it", ErrInvalidLiteral, s)
	}
	return QuoteString(s), nil
}

// QualifiedName quotes each part and joins them with dots:
// ("db", "dbo", "T") -> [db].[dbo].[T]. One to four parts, as SQL Server allows.
func QualifiedName(parts ...string) (string, error) {
	if len(parts) == 0 || len(parts) > 4 {
		return "", fmt.Errorf("%w: a qualified name has 1 to 4 parts, got %d", ErrInvalidIdent, len(parts))
	}
	quoted := make([]string, len(parts))
	for i, p := range parts {
		q, err := QuoteIdent(p)
		if err != nil {
			return "", err
		}
		quoted[i] = q
	}
	return strings.Join(quoted, "."), nil
}

func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// short keeps error messages readable when a name is very long.
func short(s string) string {
	if utf8.RuneCountInString(s) <= 40 {
		return s
	}
	r := []rune(s)
	return string(r[:37]) + "..."
}
