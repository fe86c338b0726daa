package mssql

import (
	"context"
	"regexp"
	"strconv"
	"strings"

	"github.com/backupcycle/backupcycle/internal/tsql"
)

// Message numbers read by number, never by text: SQL Server translates the
// text into the session's language (a login's default language, or SET
// LANGUAGE) but keeps the number and the printf-style arguments. See
// https://learn.microsoft.com/en-us/sql/relational-databases/errors-events/database-engine-events-and-errors-3000-to-3999
const (
	// MsgPercent is "%d percent processed." (WITH STATS progress).
	MsgPercent = 3211
	// MsgSummary is "%hs successfully processed %I64d pages in %d.%03d
	// seconds (%d.%03d MB/sec)." closing a BACKUP or RESTORE.
	MsgSummary = 3014
)

// EnglishLanguage is the session language every connection of this package
// runs in: Open and the statement connections send tsql.SetLanguageEnglish
// after login and after every session reset (go-mssqldb's SessionInitSQL),
// because go-mssqldb v1.11.2 has no language connection parameter: its
// LOGIN7 leaves the language empty, so the server applies the login's
// default language, and a session reset (sp_reset_connection) returns to it.
const EnglishLanguage = "us_english"

var (
	// firstInt is the first run of digits in a text.
	firstInt = regexp.MustCompile(`\d+`)
	// summaryNumber is one number of message 3014: an integer (the pages)
	// or %d.%03d (seconds, MB/sec). A translation may write the decimal
	// point as a comma.
	summaryNumber = regexp.MustCompile(`\d+(?:[.,]\d+)?`)
	// englishSummary captures the operation of the English 3014 text.
	englishSummary = regexp.MustCompile(`^(.*?) successfully processed \d`)
	// operationName finds the operation in a translated 3014 text: the
	// %hs argument is a T-SQL statement name, which is not translated.
	operationName = regexp.MustCompile(`\b(?:BACKUP|RESTORE) (?:DATABASE|LOG)\b`)
)

// ProgressPercent reads the N of message 3211 ("N percent processed.") in
// any language: the first integer of the text (some translations put words
// before it, e.g. Czech "Bylo zpracováno 50 procent."). Other messages, and
// numbers above 100, give false.
func ProgressPercent(m Message) (int, bool) {
	if m.Number != MsgPercent {
		return 0, false
	}
	s := firstInt.FindString(m.Text)
	if s == "" {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	if err != nil || n > 100 {
		return 0, false
	}
	return n, true
}

// SummaryOf reads message 3014 in any language. Its three numbers keep
// their order in every translation (pages, seconds, MB/sec); they are the
// last three numbers of the text, so a digit in the operation part cannot
// shift them. Operation is the statement name ("BACKUP DATABASE", ...) when
// it can be found, else "".
func SummaryOf(m Message) (Summary, bool) {
	if m.Number != MsgSummary {
		return Summary{}, false
	}
	nums := summaryNumber.FindAllString(m.Text, -1)
	if len(nums) < 3 {
		return Summary{}, false
	}
	nums = nums[len(nums)-3:]
	pages, err1 := strconv.ParseInt(nums[0], 10, 64)
	secs, err2 := strconv.ParseFloat(strings.Replace(nums[1], ",", ".", 1), 64)
	mbps, err3 := strconv.ParseFloat(strings.Replace(nums[2], ",", ".", 1), 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return Summary{}, false
	}
	s := Summary{Pages: pages, Seconds: secs, MBps: mbps}
	if op := englishSummary.FindStringSubmatch(m.Text); op != nil {
		s.Operation = op[1]
	} else {
		s.Operation = operationName.FindString(m.Text)
	}
	return s, true
}

// Language is the language of a session of db (@@LANGUAGE), the one the
// server translates its messages into: EnglishLanguage on every connection
// this package opened.
func (db *DB) Language(ctx context.Context) (string, error) {
	var lang string
	if err := db.QueryRowContext(ctx, tsql.SessionLanguage).Scan(&lang); err != nil {
		return "", Classify(db.Target, "read the session language", err)
	}
	return lang, nil
}
