package config

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Keywords of sql_instances[].databases, as Ola Hallengren's DatabaseBackup
// names them (https://ola.hallengren.com/sql-server-backup.html, @Databases).
const (
	AllDatabases    = "ALL_DATABASES"
	SystemDatabases = "SYSTEM_DATABASES" // master, model, msdb (tempdb is never backed up)
	UserDatabases   = "USER_DATABASES"
)

var selectionKeywords = []string{AllDatabases, SystemDatabases, UserDatabases}

// SelectionItem is one item of sql_instances[].databases.
type SelectionItem struct {
	Text    string // as written
	Exclude bool   // written with a leading "-"
	// Keyword is AllDatabases, SystemDatabases or UserDatabases, or "" for
	// a name pattern.
	Keyword string
	// Pattern is a database name in which * matches any run of characters
	// and ? one character (when Keyword is "").
	Pattern string
}

// ParseSelectionItem parses one item of sql_instances[].databases; the
// error says what is wrong and how to write it.
func ParseSelectionItem(item string) (SelectionItem, error) {
	it := SelectionItem{Text: item}
	body := item
	if strings.HasPrefix(body, "-") {
		it.Exclude, body = true, body[1:]
	}
	switch {
	case strings.TrimSpace(body) == "":
		return it, errors.New("is empty: write a database name, a pattern such as \"Sales*\", a keyword (ALL_DATABASES, SYSTEM_DATABASES, USER_DATABASES), or -NAME to exclude")
	case strings.ContainsRune(body, 0) || !utf8.ValidString(body):
		return it, errors.New("contains a NUL byte or invalid UTF-8")
	case body != strings.TrimFunc(body, unicode.IsSpace):
		// "-HR " would exclude no database: names compare without
		// trailing blanks, the pattern with them.
		return it, errors.New("has a leading or trailing blank: write the name or pattern without it (SQL Server ignores trailing blanks when it compares names)")
	}
	// Keywords compare case-insensitively, as DatabaseBackup's do under a
	// server's default (case-insensitive) collation.
	for _, k := range selectionKeywords {
		if strings.EqualFold(body, k) {
			it.Keyword = k
			return it, nil
		}
	}
	if strings.EqualFold(body, "AVAILABILITY_GROUP_DATABASES") {
		return it, errors.New("AVAILABILITY_GROUP_DATABASES is not supported: list the databases by name or pattern")
	}
	if body == strings.ToUpper(body) && strings.Contains(body, "_") {
		for _, k := range selectionKeywords {
			if levenshtein(body, k) <= 3 {
				return it, fmt.Errorf("looks like a misspelt keyword: did you mean %s? (keywords: %s; to select a database of this very name, write it with a ? for one of its letters)", k, strings.Join(selectionKeywords, ", "))
			}
		}
	}
	if strings.Contains(body, "%") {
		return it, errors.New("uses %, T-SQL LIKE's wildcard: here * matches any characters and ? one character (a literal % is matched by ?)")
	}
	if n := utf16Len(strings.ReplaceAll(body, "*", "")); n > 128 {
		return it, fmt.Errorf("is %d characters (UTF-16), longer than SQL Server's limit of 128 for a database name, so it matches nothing", n)
	}
	it.Pattern = body
	return it, nil
}

// checkSelection validates sql_instances[].databases item by item.
func (d *decoder) checkSelection(items []string, path, owner string) {
	if len(items) == 0 {
		return
	}
	seen := map[string]int{}
	includes, bad := 0, 0
	for i, item := range items {
		ip := fmt.Sprintf("%s[%d]", path, i)
		it, err := ParseSelectionItem(item)
		if err != nil {
			d.errf(d.line(ip), ip, "%s: databases[%d] %q %v", owner, i, item, err)
			bad++
			continue
		}
		if !it.Exclude {
			includes++
		}
		key := strings.ToLower(item)
		if first, dup := seen[key]; dup {
			d.errf(d.line(ip), ip, "%s: databases[%d] %q is listed twice (first as databases[%d]; names compare case-insensitively): remove one", owner, i, item, first)
			continue
		}
		seen[key] = i
	}
	if includes == 0 && bad == 0 {
		d.errf(d.line(path), path, "%s: databases only excludes, so it selects nothing: start the list with what to back up, e.g. [USER_DATABASES, %s]", owner, items[0])
	}
}
