package mssql

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	mssqldb "github.com/microsoft/go-mssqldb"
)

func sqlErr(n int32, class uint8, msg string) mssqldb.Error {
	return mssqldb.Error{Number: n, Class: class, Message: msg}
}

var (
	backupTerm  = sqlErr(3013, 16, "BACKUP DATABASE is terminating abnormally.")
	restoreTerm = sqlErr(3013, 16, "RESTORE DATABASE is terminating abnormally.")
)

// Classification reads numbers and operating system error codes only: the
// German and French texts (as a login with that default language gets
// them) classify like the English ones.
func TestClassifyByNumber(t *testing.T) {
	cases := []struct {
		name      string
		errs      []mssqldb.Error
		want      error
		retryable bool
	}{
		{"truncated stripe: read past the end", []mssqldb.Error{
			sqlErr(3203, 16, `Read on "\\bak01\backup\Sales_7_1of2.bak" failed: 38(Reached the end of the file.)`), restoreTerm},
			ErrCorruptBackup, false},
		{"truncated stripe, German", []mssqldb.Error{
			sqlErr(3203, 16, `Fehler beim Lesen von "\\bak01\backup\Sales_7_1of2.bak": 38(Das Ende der Datei wurde erreicht.)`),
			sqlErr(3013, 16, "RESTORE DATABASE wird fehlerbedingt beendet.")},
			ErrCorruptBackup, false},
		{"read on a share that went away is no corruption", []mssqldb.Error{
			sqlErr(3203, 16, `Read on "\\bak01\backup\Sales_7_1of2.bak" failed: 64(The specified network name is no longer available.)`), restoreTerm},
			ErrBackupTargetUnreachable, true},
		{"CRC error reading the medium", []mssqldb.Error{
			sqlErr(3203, 16, `Read on "\\bak01\backup\Sales_7_1of2.bak" failed: 23(Data error (cyclic redundancy check).)`), restoreTerm},
			ErrCorruptBackup, false},
		{"damage detected", []mssqldb.Error{sqlErr(3189, 16, "Damage to the backup set was detected."), restoreTerm},
			ErrCorruptBackup, false},
		{"login database unavailable: 4060 then 18456", []mssqldb.Error{
			sqlErr(4060, 11, `Cannot open database "Sales" requested by the login. The login failed.`),
			sqlErr(18456, 14, "Login failed for user 'backup'.")},
			ErrDatabaseUnavailable, true},
		{"login database unavailable, French", []mssqldb.Error{
			sqlErr(4060, 11, `Impossible d'ouvrir la base de données "Sales" demandée par la connexion. La connexion a échoué.`),
			sqlErr(18456, 14, "Échec de la connexion de l'utilisateur 'backup'.")},
			ErrDatabaseUnavailable, true},
		{"database offline", []mssqldb.Error{sqlErr(942, 14, "Database 'Sales' cannot be opened because it is offline.")},
			ErrDatabaseUnavailable, true},
		{"database restoring", []mssqldb.Error{sqlErr(927, 14, "Database 'Sales_verify' cannot be opened. It is in the middle of a restore.")},
			ErrDatabaseUnavailable, true},
		{"wrong password", []mssqldb.Error{sqlErr(18456, 14, "Login failed for user 'backup'.")}, ErrLoginFailed, false},
		{"unknown database", []mssqldb.Error{sqlErr(911, 16, "Database 'Nope' does not exist. Make sure that the name is entered correctly.")},
			ErrDatabaseNotFound, false},
		{"CHECKDB could not run: tempdb full", []mssqldb.Error{
			sqlErr(1105, 17, "Could not allocate space for object 'dbo.SORT temporary run storage: 140737488355328' in database 'tempdb' because the 'PRIMARY' filegroup is full."),
			sqlErr(8921, 16, "Check terminated. A failure was detected while collecting facts. Possibly tempdb out of space or a system table is inconsistent. Check previous errors.")},
			ErrCheckDBCouldNotRun, true},
		{"CHECKDB scan aborted by a full tempdb reports no corruption", []mssqldb.Error{
			sqlErr(9002, 17, "The transaction log for database 'tempdb' is full due to 'ACTIVE_TRANSACTION'."),
			sqlErr(8965, 16, "Table error: Object ID 1029578706, index ID 1: the off-row data node at page (1:12123990), slot 2 was not seen in the scan.")},
			ErrCheckDBCouldNotRun, true},
		{"CHECKDB found corruption", []mssqldb.Error{
			sqlErr(8928, 16, "Object ID 581577110, index ID 1, partition ID 72057594043236352: Page (1:153) could not be processed."),
			sqlErr(8939, 16, "Table error: page (1:153) failed check.")},
			ErrCheckDBFailed, false},
		{"files held by another BACKUP", []mssqldb.Error{
			sqlErr(3201, 16, `Cannot open backup device '\\bak01\backup\Sales_7_1of2.bak'. Operating system error 32(The process cannot access the file because it is being used by another process.).`), backupTerm},
			ErrDeviceInUse, true},
		{"share name not found on a reachable host", []mssqldb.Error{
			sqlErr(3201, 16, `Cannot open backup device '\\bak01\bakcup\Sales_7_1of2.bak'. Operating system error 67(The network name cannot be found.).`), backupTerm},
			ErrBackupPathInvalid, false},
		{"host away", []mssqldb.Error{
			sqlErr(3201, 16, `Cannot open backup device '\\bak01\backup\Sales_7_1of2.bak'. Operating system error 53(The network path was not found.).`), backupTerm},
			ErrBackupTargetUnreachable, true},
		{"host away, German", []mssqldb.Error{
			sqlErr(3201, 16, `Das Sicherungsmedium '\\bak01\backup\Sales_7_1of2.bak' kann nicht geöffnet werden. Betriebssystemfehler 53(Der Netzwerkpfad wurde nicht gefunden.).`),
			sqlErr(3013, 16, "BACKUP DATABASE wird fehlerbedingt beendet.")},
			ErrBackupTargetUnreachable, true},
		{"connection to the share lost mid-write (64)", []mssqldb.Error{
			sqlErr(3202, 16, `Write on "\\bak01\backup\Sales_7_1of2.bak" failed: 64(The specified network name is no longer available.)`), backupTerm},
			ErrBackupTargetUnreachable, true},
		{"connection to the share lost mid-write (59)", []mssqldb.Error{
			sqlErr(3202, 16, `Write on "\\bak01\backup\Sales_7_1of2.bak" failed: 59(An unexpected network error occurred.)`), backupTerm},
			ErrBackupTargetUnreachable, true},
		{"a path with digits and parentheses is not an error code", []mssqldb.Error{
			sqlErr(3201, 16, `Cannot open backup device '\\bak01\backup2(old)\Sales 3(copy)\x.bak'. Operating system error 53(The network path was not found.).`), backupTerm},
			ErrBackupTargetUnreachable, true},
		{"disk full, French", []mssqldb.Error{
			sqlErr(3202, 16, `Échec de l'écriture sur "\\bak01\backup\Sales_7_1of2.bak" : 112(Espace insuffisant sur le disque.)`),
			sqlErr(3013, 16, "BACKUP DATABASE se termine anormalement.")},
			ErrShareFull, false},
		{"handle disk full", []mssqldb.Error{
			sqlErr(3202, 16, `Write on "/var/opt/mssql/backup/s.bak" failed: 39(The disk is full.)`), backupTerm},
			ErrShareFull, false},
		{"memory, German", []mssqldb.Error{
			sqlErr(701, 17, "Nicht genügend Systemarbeitsspeicher im 'default'-Ressourcenpool, um diese Abfrage auszuführen."), backupTerm},
			ErrInsufficientMemory, false},
		// An English word is no evidence: without a number that says
		// corruption, a bare 3013 is just a failed statement.
		{"English text alone proves nothing", []mssqldb.Error{
			sqlErr(3013, 16, "RESTORE DATABASE is terminating abnormally: backup checksum mismatch, cyclic redundancy, not enough space.")},
			ErrStatement, false},
		{"too many devices is not an unreachable device", []mssqldb.Error{
			sqlErr(3205, 16, "Too many backup devices specified for backup or restore; only 64 are allowed."), backupTerm},
			ErrStatement, false},
		{"severity 20 after a device error keeps the device error", []mssqldb.Error{
			sqlErr(3203, 16, `Read on "\\bak01\backup\s.bak" failed: 38(Reached the end of the file.)`),
			sqlErr(3624, 20, "A system assertion check has failed.")},
			ErrCorruptBackup, false},
		{"severity 20 alone", []mssqldb.Error{sqlErr(3624, 20, "A system assertion check has failed.")}, ErrUnreachable, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := ClassifyErrors(Target{Instance: "sql01", Address: "sql01:1433"}, "op", tc.errs)
			var f *Failure
			if !errors.As(err, &f) || !errors.Is(err, tc.want) {
				t.Fatalf("kind of %v: want %v", err, tc.want)
			}
			if f.Retryable() != tc.retryable {
				t.Errorf("Retryable() = %v, want %v", f.Retryable(), tc.retryable)
			}
		})
	}
}

// The same classification through a driver error (Classify), e.g. a login
// failure that go-mssqldb returns with every error of the reply in All.
func TestClassifyDriverError(t *testing.T) {
	e := sqlErr(18456, 14, "Login failed for user 'backup'.")
	e.All = []mssqldb.Error{sqlErr(4060, 11, `Cannot open database "Sales" requested by the login. The login failed.`), e}
	if err := Classify(Target{Address: "sql01:1433"}, "connect", e); !errors.Is(err, ErrDatabaseUnavailable) || errors.Is(err, ErrLoginFailed) {
		t.Errorf("4060 + 18456 = %v, want DatabaseUnavailable only", err)
	}
}

// A failure never puts megabytes into history: 10 000 errors of 1 KiB and
// one message of 1 MiB give a short text that still names the numbers.
func TestFailureTextIsCapped(t *testing.T) {
	var errs []mssqldb.Error
	errs = append(errs, sqlErr(8928, 16, strings.Repeat("é", 512<<10))) // 1 MiB, multi-byte
	for i := range 9990 {
		errs = append(errs, sqlErr(8939, 16, fmt.Sprintf("Table error %d: %s", i, strings.Repeat("x", 1000))))
	}
	for range 9 {
		errs = append(errs, sqlErr(2533, 16, "Table error: page (1:153) allocated to object ID 581577110 was not seen."))
	}
	errs = append(errs, sqlErr(8989, 10, "CHECKDB found 0 allocation errors and 9999 consistency errors in database 'Sales_verify'."))
	if len(errs) != 10001 {
		t.Fatalf("%d errors", len(errs))
	}
	err := ClassifyErrors(Target{Instance: "verify01", Address: "verify01:1433"}, "DBCC CHECKDB", errs)
	text := err.Error()
	if len(text) > 8<<10 {
		t.Errorf("failure text is %d bytes, want a few KiB", len(text))
	}
	if !utf8.ValidString(text) {
		t.Error("truncation split a character")
	}
	for _, want := range []string{"DBCC CHECKDB on verify01 (verify01:1433)", "(error 8928)", "Table error 0:", "Table error 3:",
		"and 9996 more (numbers: 8939 x9986, 2533 x9, 8989)"} {
		if !strings.Contains(text, want) {
			t.Errorf("failure text lacks %q:\n%.600s", want, text)
		}
	}
	if strings.Contains(text, "Table error 4:") {
		t.Error("more than 5 errors quoted in full")
	}
	if !errors.Is(err, ErrCheckDBFailed) || len(err.(*Failure).Errors) != 10001 {
		t.Error("the full error list stays available to code")
	}

	// Many distinct numbers: the list of numbers is capped too.
	errs = nil
	for n := range 200 {
		errs = append(errs, sqlErr(int32(50000+n), 16, "user error"))
	}
	text = ClassifyErrors(Target{Address: "sql01:1433"}, "op", errs).Error()
	if !strings.Contains(text, "and 195 more (numbers: 50005, 50006,") || !strings.Contains(text, ", 185 others)") {
		t.Errorf("distinct numbers not capped: %.400s", text)
	}
}

// A backup file SQL Server could not read or write because the network to
// its share went (the device message quotes a network error) is never a
// corrupt set, whatever SQL Server concluded from the bytes it did not get:
// 3241, 3183, 3208 or 3266 after it, or 3271, the "nonrecoverable I/O
// error" a lost share is often reported with.
func TestNetworkLossOnADeviceIsNeverCorruption(t *testing.T) {
	read := func(code string) mssqldb.Error {
		return sqlErr(3203, 16, `Read on "\\bak01\backup\Sales_7_1of2.bak" failed: `+code)
	}
	cases := []struct {
		name string
		errs []mssqldb.Error
	}{
		{"64 then a malformed media family", []mssqldb.Error{read("64(The specified network name is no longer available.)"),
			sqlErr(3241, 16, `The media family on device '\\bak01\backup\Sales_7_1of2.bak' is incorrectly formed. SQL Server cannot process this media family.`),
			restoreTerm}},
		{"59 then a damaged page read", []mssqldb.Error{read("59(An unexpected network error occurred.)"),
			sqlErr(3183, 16, `RESTORE detected an error on page (0:0) in database "Sales_verify" as read from the backup set.`), restoreTerm}},
		{"121 then an unexpected end of file", []mssqldb.Error{read("121(The semaphore timeout period has expired.)"),
			sqlErr(3208, 16, `Unexpected end of file while reading beginning of backup set.`), restoreTerm}},
		{"1231 then the end of the media malformed", []mssqldb.Error{read("1231(The network location cannot be reached.)"),
			sqlErr(3266, 16, `The backup data at the end of "\\bak01\backup\Sales_7_1of2.bak" is incorrectly formatted.`), restoreTerm}},
		{"3271 on a lost share", []mssqldb.Error{
			sqlErr(3271, 16, `A nonrecoverable I/O error occurred on file "\\bak01\backup\Sales_7_1of2.bak:" 64(The specified network name is no longer available.).`),
			restoreTerm}},
		{"3271 semaphore timeout, German", []mssqldb.Error{
			sqlErr(3271, 16, `Nicht behebbarer E/A-Fehler für die Datei "\\bak01\backup\Sales_7_1of2.bak:" 121(Das Zeitlimit für die Semaphore wurde erreicht.).`),
			sqlErr(3013, 16, "RESTORE DATABASE wird fehlerbedingt beendet.")}},
	}
	for _, op := range []string{"RESTORE DATABASE", "RESTORE VERIFYONLY", "op"} {
		for _, tc := range cases {
			t.Run(op+"/"+tc.name, func(t *testing.T) {
				err := ClassifyErrors(Target{Instance: "verify01", Address: "verify01:1433"}, op, tc.errs)
				var f *Failure
				if !errors.As(err, &f) || !errors.Is(err, ErrBackupTargetUnreachable) || !f.Retryable() {
					t.Fatalf("kind of %v: want %v, retryable", err, ErrBackupTargetUnreachable)
				}
			})
		}
	}
	// Without a network error the same numbers stay evidence.
	err := ClassifyErrors(Target{Instance: "verify01"}, "RESTORE DATABASE", []mssqldb.Error{
		sqlErr(3241, 16, `The media family on device '\\bak01\backup\Sales_7_1of2.bak' is incorrectly formed. SQL Server cannot process this media family.`),
		restoreTerm})
	if !errors.Is(err, ErrCorruptBackup) {
		t.Errorf("3241 alone: %v, want %v", err, ErrCorruptBackup)
	}
	err = ClassifyErrors(Target{Instance: "verify01"}, "RESTORE DATABASE", []mssqldb.Error{
		sqlErr(3271, 16, `A nonrecoverable I/O error occurred on file "\\bak01\backup\Sales_7_1of2.bak:" 23(Data error (cyclic redundancy check).).`),
		restoreTerm})
	if !errors.Is(err, ErrCorruptBackup) {
		t.Errorf("3271 with a CRC error: %v, want %v", err, ErrCorruptBackup)
	}
}
