package sqlsim

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/backupcycle/backupcycle/internal/sqlsim/tds"
)

// The tokenizer covers the T-SQL the product sends: keywords and plain
// identifiers (case-insensitive), [bracketed] and "quoted" identifiers with
// doubled closing delimiters, N'...' and '...' literals with doubled quotes,
// integers and decimals, @variables, @@functions, operators, and -- and /* */
// comments.

type tokKind int

const (
	tEOF    tokKind = iota
	tIdent          // plain word (keyword or identifier); Text as written
	tQIdent         // [bracketed] or "quoted" identifier; Text unescaped
	tString         // string literal; Text unescaped
	tNumber         // integer or decimal literal
	tVar            // @name (Text includes the @)
	tSysVar         // @@NAME (Text includes the @@)
	tOp             // operator or punctuation
	tBinary         // 0x... binary constant; Text the hex digits
)

type token struct {
	kind tokKind
	text string
	pos  int // byte offset in the batch
}

// is reports whether t is the keyword kw (plain, case-insensitive).
func (t token) is(kw string) bool { return t.kind == tIdent && strings.EqualFold(t.text, kw) }

func (t token) isOp(op string) bool { return t.kind == tOp && t.text == op }

// display is how SQL Server names the token in "Incorrect syntax near".
func (t token) display() string {
	switch t.kind {
	case tEOF:
		return ""
	case tString:
		return t.text
	case tQIdent:
		return t.text
	}
	return t.text
}

func lex(sql string) ([]token, error) {
	var toks []token
	i := 0
	for i < len(sql) {
		c := sql[i]
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v':
			i++
		case c == '-' && i+1 < len(sql) && sql[i+1] == '-':
			for i < len(sql) && sql[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(sql) && sql[i+1] == '*':
			depth, j := 1, i+2
			for j < len(sql) && depth > 0 {
				switch {
				case strings.HasPrefix(sql[j:], "/*"):
					depth, j = depth+1, j+2
				case strings.HasPrefix(sql[j:], "*/"):
					depth, j = depth-1, j+2
				default:
					j++
				}
			}
			if depth > 0 {
				return nil, syntaxErr(fmt.Sprintf("Missing end comment mark '*/'."), 113)
			}
			i = j
		case c == '[':
			s, n, ok := delimited(sql[i:], '[', ']')
			if !ok {
				return nil, syntaxErr(fmt.Sprintf("Unclosed quotation mark after the character string '%s'.", sql[i+1:]), 105)
			}
			if e := errIdentTooLong(s); e != nil {
				return nil, e
			}
			toks = append(toks, token{tQIdent, s, i})
			i += n
		case c == '"':
			s, n, ok := delimited(sql[i:], '"', '"')
			if !ok {
				return nil, syntaxErr(fmt.Sprintf("Unclosed quotation mark after the character string '%s'.", sql[i+1:]), 105)
			}
			if e := errIdentTooLong(s); e != nil {
				return nil, e
			}
			toks = append(toks, token{tQIdent, s, i})
			i += n
		case c == '\'' || ((c == 'N' || c == 'n') && i+1 < len(sql) && sql[i+1] == '\''):
			start := i
			if c != '\'' {
				i++
			}
			s, n, ok := delimited(sql[i:], '\'', '\'')
			if !ok {
				return nil, syntaxErr(fmt.Sprintf("Unclosed quotation mark after the character string '%s'.", sql[i+1:]), 105)
			}
			toks = append(toks, token{tString, s, start})
			i += n
		case c == '0' && i+1 < len(sql) && (sql[i+1] == 'x' || sql[i+1] == 'X'):
			// A binary constant: 0x followed by hex digits, possibly none
			// (https://learn.microsoft.com/en-us/sql/t-sql/data-types/constants-transact-sql#binary-constants).
			j := i + 2
			for j < len(sql) && strings.IndexByte("0123456789abcdefABCDEF", sql[j]) >= 0 {
				j++
			}
			toks = append(toks, token{tBinary, sql[i+2 : j], i})
			i = j
		case c >= '0' && c <= '9' || (c == '.' && i+1 < len(sql) && sql[i+1] >= '0' && sql[i+1] <= '9'):
			j := i
			for j < len(sql) && (sql[j] >= '0' && sql[j] <= '9' || sql[j] == '.') {
				j++
			}
			toks = append(toks, token{tNumber, sql[i:j], i})
			i = j
		case c == '@':
			j := i + 1
			kind := tVar
			if j < len(sql) && sql[j] == '@' {
				j++
				kind = tSysVar
			}
			for j < len(sql) && isWordByte(sql, j) {
				j++
			}
			toks = append(toks, token{kind, sql[i:j], i})
			i = j
		case isWordStart(sql, i):
			j := i
			for j < len(sql) && isWordByte(sql, j) {
				j++
			}
			if e := errIdentTooLong(sql[i:j]); e != nil {
				return nil, e
			}
			toks = append(toks, token{tIdent, sql[i:j], i})
			i = j
		default:
			two := ""
			if i+1 < len(sql) {
				two = sql[i : i+2]
			}
			switch two {
			case "<>", "!=", "<=", ">=", "!<", "!>", "+=", "-=", "::": // :: is a securable's class (OBJECT::x)
				toks = append(toks, token{tOp, two, i})
				i += 2
				continue
			}
			if strings.IndexByte("=<>+-*/%(),.;", c) >= 0 {
				toks = append(toks, token{tOp, string(c), i})
				i++
				continue
			}
			return nil, syntaxErr(fmt.Sprintf("Incorrect syntax near '%c'.", c), 102)
		}
	}
	toks = append(toks, token{kind: tEOF, pos: len(sql)})
	return toks, nil
}

// delimited reads an open...close delimited text starting at s[0], where a
// doubled close delimiter stands for one. It returns the unescaped text and
// the number of bytes consumed.
func delimited(s string, open, close byte) (string, int, bool) {
	var b strings.Builder
	for j := 1; j < len(s); j++ {
		if s[j] == close {
			if j+1 < len(s) && s[j+1] == close {
				b.WriteByte(close)
				j++
				continue
			}
			return b.String(), j + 1, true
		}
		b.WriteByte(s[j])
	}
	return "", 0, false
}

func isWordStart(s string, i int) bool {
	c := s[i]
	if c >= 0x80 {
		r := []rune(s[i:min(len(s), i+4)])
		return len(r) > 0 && unicode.IsLetter(r[0])
	}
	return c == '_' || c == '#' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isWordByte(s string, i int) bool {
	c := s[i]
	return c >= 0x80 || c == '_' || c == '#' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// errIdentTooLong is 103 for an identifier (plain, [bracketed] or "quoted")
// longer than 128 characters: "The %S_MSG that starts with '%.*ls' is too
// long. Maximum length is %d." with its first 128 characters; a compile
// error, so nothing of the batch runs
// (https://learn.microsoft.com/en-us/sql/relational-databases/errors-events/database-engine-events-and-errors-0-to-999,
// https://learn.microsoft.com/en-us/sql/relational-databases/databases/database-identifiers).
func errIdentTooLong(name string) *tds.Error {
	if sqlLen(name) <= maxSysname {
		return nil
	}
	return sqlErr(103, 15, "The identifier that starts with '%s' is too long. Maximum length is %d.", sqlPrefix(name, maxSysname), maxSysname)
}

// sqlPrefix is the first n characters of s, counted as sqlLen does.
func sqlPrefix(s string, n int) string {
	used := 0
	for i, r := range s {
		w := 1
		if r >= 0x10000 {
			w = 2
		}
		if used+w > n {
			return s[:i]
		}
		used += w
	}
	return s
}
