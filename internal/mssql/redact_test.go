package mssql

import (
	"errors"
	"strings"
	"testing"

	mssqldb "github.com/microsoft/go-mssqldb"
)

// Redacted keeps the numbers and drops SQL Server's texts, which may quote
// the database's values; the fingerprint ties it to the logged text.
func TestRedacted(t *testing.T) {
	f := ClassifyErrors(Target{Instance: "verify01", Address: "v:1433"}, "sanity check x", []mssqldb.Error{
		sqlErr(245, 16, "Conversion failed when converting the nvarchar value 'SECRET-42' to data type int.")}).(*Failure)
	got := f.Redacted()
	if strings.Contains(got, "SECRET-42") || !strings.Contains(got, "SQL Server error 245") || !strings.Contains(got, "verify01") ||
		!strings.Contains(got, Fingerprint(f.Errors[0].Message)) {
		t.Errorf("Redacted = %q", got)
	}
	if fp := Fingerprint("abc"); fp != "3 bytes, sha256 ba7816bf" {
		t.Errorf("Fingerprint(abc) = %q", fp)
	}
	lost := Classify(Target{Address: "v:1433"}, "connect", errors.New("unable to open tcp connection with host 'v:1433'")).(*Failure)
	if got := lost.Redacted(); !strings.Contains(got, "unable to open tcp connection") {
		t.Errorf("a transport failure keeps its cause: %q", got)
	}
}
