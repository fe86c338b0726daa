package mssql

import (
	"errors"
	"regexp"
	"slices"
	"strings"

	mssqldb "github.com/microsoft/go-mssqldb"
)

// Damage a BACKUP finds in the database it reads is the production
// database's problem, not a damaged backup set:
//   - 3043 "BACKUP '%ls' detected an error on page (%d:%d) in file
//     '%ls'.": WITH CHECKSUM, a page of the source failed its checksum
//     (https://learn.microsoft.com/en-us/sql/relational-databases/errors-events/database-engine-events-and-errors-3000-to-3999);
//   - 3203 "Read on "%ls" failed: %ls" with operating system error 23
//     (ERROR_CRC, the disk returned damaged data) or 1117 (ERROR_IO_DEVICE)
//     on a file that is not one of the backup's devices: a data file.
//
// The fix is on the source: DBCC CHECKDB of the database, the disk under it
// ("Manage the suspect_pages table", "MSSQLSERVER_824").

// sourcePageNumbers: BACKUP WITH CHECKSUM met a damaged page of the source.
var sourcePageNumbers = []int32{3043}

// osIODevice is ERROR_IO_DEVICE: "The request could not be performed
// because of an I/O device error."
const osIODevice = 1117

var (
	// quotedPath is the first "..." of a 3203 message: the file read.
	quotedPath = regexp.MustCompile(`"([^"]+)"`)
	// pageFile is the last '...' of a 3043 message: the data file.
	pageFile = regexp.MustCompile(`'([^']+)'\.?\s*$`)
)

// SourceDamage reports whether err is a BACKUP's failure on damage in the
// source database itself, and the file it names. devices are the backup's
// own files (a 3203 on one of them is the backup device's problem).
func SourceDamage(err error, devices []string) (file string, ok bool) {
	var f *Failure
	if !errors.As(err, &f) {
		return "", false
	}
	for _, e := range f.Errors {
		switch {
		case slices.Contains(sourcePageNumbers, e.Number):
			if m := pageFile.FindStringSubmatch(e.Message); m != nil {
				return m[1], true
			}
			return "", true
		case e.Number == 3203 && (osError(e) == osCRC || osError(e) == osIODevice):
			m := quotedPath.FindStringSubmatch(e.Message)
			if m == nil || isDevice(m[1], devices) {
				continue
			}
			return m[1], true
		}
	}
	return "", false
}

// isDevice reports whether path is one of devices, compared as Windows
// compares paths (case-insensitively, / and \ alike).
func isDevice(path string, devices []string) bool {
	norm := func(p string) string { return strings.ToLower(strings.ReplaceAll(p, "/", `\`)) }
	return slices.ContainsFunc(devices, func(d string) bool { return norm(d) == norm(path) })
}

// hasSourcePage reports 3043 among errs (classifyNumbers).
func hasSourcePage(errs []mssqldb.Error) bool {
	return slices.ContainsFunc(errs, func(e mssqldb.Error) bool { return slices.Contains(sourcePageNumbers, e.Number) })
}
