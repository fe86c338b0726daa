package mssql

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/backupcycle/backupcycle/internal/sqlsim"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// Localized texts of 3211 and 3014. The Japanese and Korean 3014 texts are
// the sys.messages templates shown on Microsoft Learn ("Errors 3000 - 3999"
// for SQL Server 2008, ja-jp and ko-kr) filled in; the German and French
// ones are plausible renderings of the same templates (the localized
// sys.messages text was not at hand), written both with the "%d.%03d"
// point SQL Server formats and with a decimal comma.
func TestProgressPercentAnyLanguage(t *testing.T) {
	for text, want := range map[string]int{
		"10 percent processed.":         10, // English
		"100 percent processed.":        100,
		"10 Prozent verarbeitet.":       10, // German
		"20 pour cent traités.":         20, // French
		"Bylo zpracováno 50 procent.":   50, // Czech: the number mid-sentence
		"30 パーセント処理されました。":              30,
		"  0 percent processed. (text)": 0,
	} {
		got, ok := ProgressPercent(Message{Number: MsgPercent, Text: text})
		if !ok || got != want {
			t.Errorf("ProgressPercent(3211 %q) = %d, %v; want %d", text, got, ok, want)
		}
	}
	for _, m := range []Message{
		{Number: 4035, Text: "Processed 128 pages for database 'Sales', file 'Sales' on file 1."}, // digits, other number
		{Number: 0, Text: "10 percent processed."},                                                // a text alone is not enough
		{Number: MsgPercent, Text: "101 percent processed."},
		{Number: MsgPercent, Text: "percent processed."},
	} {
		if got, ok := ProgressPercent(m); ok {
			t.Errorf("ProgressPercent(%d %q) = %d, true; want false", m.Number, m.Text, got)
		}
	}
}

func TestSummaryOfAnyLanguage(t *testing.T) {
	want := Summary{Pages: 26, Seconds: 0.01, MBps: 20.312}
	for text, op := range map[string]string{
		"BACKUP DATABASE successfully processed 26 pages in 0.010 seconds (20.312 MB/sec).":       "BACKUP DATABASE",
		"BACKUP DATABASE hat 26 Seiten in 0.010 Sekunden erfolgreich verarbeitet (20.312 MB/s).":  "BACKUP DATABASE",
		"RESTORE DATABASE hat 26 Seiten in 0,010 Sekunden erfolgreich verarbeitet (20,312 MB/s).": "RESTORE DATABASE",
		"BACKUP LOG a traité avec succès 26 pages en 0.010 secondes (20.312 Mo/s).":               "BACKUP LOG",
		"RESTORE DATABASE a traité avec succès 26 pages en 0,010 secondes (20,312 Mo/s).":         "RESTORE DATABASE",
		"BACKUP DATABASE により 26 ページが 0.010 秒間で正常に処理されました (20.312 MB/秒)。":                          "BACKUP DATABASE",
		"RESTORE DATABASE이(가) 26개의 페이지를 0.010초 동안 처리했습니다(20.312MB/초).":                            "RESTORE DATABASE",
		// An operation part the parser does not know: numbers still read.
		"Vorgang 2 hat 26 Seiten in 0.010 Sekunden erfolgreich verarbeitet (20.312 MB/s).": "",
	} {
		got, ok := SummaryOf(Message{Number: MsgSummary, Text: text})
		w := want
		w.Operation = op
		if !ok || got != w {
			t.Errorf("SummaryOf(3014 %q) = %+v, %v; want %+v", text, got, ok, w)
		}
		if got.Bytes() != 26*8192 {
			t.Errorf("Bytes() = %d", got.Bytes())
		}
	}
	big, ok := SummaryOf(Message{Number: MsgSummary,
		Text: "BACKUP DATABASE successfully processed 268435456 pages in 7261.503 seconds (288.811 MB/sec)."})
	if !ok || big.Pages != 268435456 || big.Seconds != 7261.503 || big.MBps != 288.811 {
		t.Errorf("2 TiB summary = %+v, %v", big, ok)
	}
	for _, m := range []Message{
		{Number: 4035, Text: "Processed 1024 pages for database 'Sales', file 'Sales' on file 1."},
		{Number: 0, Text: "BACKUP DATABASE successfully processed 26 pages in 0.010 seconds (20.312 MB/sec)."},
		{Number: MsgSummary, Text: "BACKUP DATABASE successfully processed pages."},
	} {
		if got, ok := SummaryOf(m); ok {
			t.Errorf("SummaryOf(%d %q) = %+v, true; want false", m.Number, m.Text, got)
		}
	}
}

// Every session the package opens runs in us_english, also for a login
// whose default language is German, and again after the pool resets the
// session; and when a session does run in German, progress and the summary
// are still read, by number.
func TestSessionsRunInEnglish(t *testing.T) {
	root := t.TempDir()
	share := filepath.Join(root, "share")
	if err := os.MkdirAll(share, 0o755); err != nil {
		t.Fatal(err)
	}
	in, err := sqlsim.New(sqlsim.Config{Name: "sql01", DataDir: filepath.Join(root, "sql01"),
		Principals: []sqlsim.Login{{Name: "hans", Password: "pw", Sysadmin: true, DefaultLanguage: "Deutsch"}},
		Shares:     map[string]string{`\\bak01\backup`: share}})
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Stop() })
	if err := in.CreateDatabase(sqlsim.DatabaseSpec{Name: "Sales", Size: 4 << 20}); err != nil {
		t.Fatal(err)
	}
	db, err := Open(testCtx(t), Target{Instance: "sql01", Address: in.Addr(), User: "hans", Password: "pw", Database: "master", Encrypt: "disable"})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // one session, reused: it goes through a reset

	if lang, err := db.Language(testCtx(t)); err != nil || lang != EnglishLanguage {
		t.Fatalf("session language %q, %v; want %s for a login whose default is Deutsch", lang, err, EnglishLanguage)
	}
	c, err := db.Conn(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ExecContext(testCtx(t), "SET LANGUAGE Deutsch"); err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	if lang, err := db.Language(testCtx(t)); err != nil || lang != EnglishLanguage {
		t.Errorf("after a session reset: %q, %v; want %s again", lang, err, EnglishLanguage)
	}

	stmt, err := tsql.BackupDatabase(tsql.BackupOptions{Database: "Sales", Disks: []string{`\\bak01\backup\s.bak`},
		Init: true, Format: true, Stats: 10})
	if err != nil {
		t.Fatal(err)
	}
	var percents []int
	german := false
	res, err := db.Run(testCtx(t), "BACKUP DATABASE", "SET LANGUAGE Deutsch; "+stmt, func(m Message) {
		if p, ok := ProgressPercent(m); ok {
			percents = append(percents, p)
			german = german || strings.Contains(m.Text, "Prozent")
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if !german || len(percents) == 0 || percents[len(percents)-1] != 100 {
		t.Errorf("German progress read by number: %v (German text seen: %v), want up to 100", percents, german)
	}
	var sum *Summary
	for _, m := range res.Messages {
		if s, ok := SummaryOf(m); ok {
			sum = &s
		}
	}
	if sum == nil || sum.Pages <= 0 || sum.Operation != "BACKUP DATABASE" {
		t.Errorf("German 3014 summary: %+v", sum)
	}
}
