package mssql

import (
	"errors"
	"testing"

	mssqldb "github.com/microsoft/go-mssqldb"
)

// A BACKUP that meets damage in the source database (3043; 3203 with
// operating system error 23 or 1117 reading a data file) is the source's
// problem, not a damaged backup set; the same 3203 on one of the backup's
// own files is the backup device's.
func TestSourceDamage(t *testing.T) {
	devices := []string{`\\bak01\backup\sql01@Sales_00000007_1of2.bak`, `\\bak01\backup\sql01@Sales_00000007_2of2.bak`}
	fail := func(errs ...mssqldb.Error) error {
		return ClassifyErrors(Target{Address: "sql01:1433"}, "BACKUP DATABASE", errs)
	}
	for _, tc := range []struct {
		name string
		err  error
		file string // "" = not the source's damage
	}{
		{"page checksum", fail(sqlErr(3043, 16, `BACKUP 'Sales' detected an error on page (1:153) in file 'D:\data\Sales.mdf'.`), backupTerm),
			`D:\data\Sales.mdf`},
		{"CRC reading a data file", fail(sqlErr(3203, 16, `Read on "D:\data\Sales_2.ndf" failed: 23(Data error (cyclic redundancy check).)`), backupTerm),
			`D:\data\Sales_2.ndf`},
		{"I/O device error reading a data file", fail(sqlErr(3203, 16, `Read on "/var/opt/mssql/data/Sales.mdf" failed: 1117(The request could not be performed because of an I/O device error.)`), backupTerm),
			"/var/opt/mssql/data/Sales.mdf"},
		{"CRC on a backup device", fail(sqlErr(3203, 16, `Read on "\\BAK01\backup\sql01@Sales_00000007_1of2.bak" failed: 23(Data error (cyclic redundancy check).)`), backupTerm),
			""},
		{"a data file read past its end", fail(sqlErr(3203, 16, `Read on "D:\data\Sales.mdf" failed: 38(Reached the end of the file.)`), backupTerm), ""},
		{"share full", fail(sqlErr(3202, 16, `Write on "\\bak01\backup\x.bak" failed: 112(There is not enough space on the disk.)`), backupTerm), ""},
		{"not SQL Server's", errors.New("connection reset"), ""},
	} {
		file, ok := SourceDamage(tc.err, devices)
		if ok != (tc.file != "") || file != tc.file {
			t.Errorf("%s: SourceDamage = %q, %v; want %q", tc.name, file, ok, tc.file)
		}
	}
	// 3043 is never a CHECKDB finding.
	if err := fail(sqlErr(3043, 16, `BACKUP 'Sales' detected an error on page (1:153) in file 'D:\data\Sales.mdf'.`), backupTerm); errors.Is(err, ErrCheckDBFailed) ||
		!errors.Is(err, ErrSourceDamaged) {
		t.Errorf("3043 classified %v, want %v", err, ErrSourceDamaged)
	}
}
