package mssql

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

// Fingerprint names a text without showing it: its length and the first
// 8 hex digits of its SHA-256, so that a message in a workflow history can
// be matched with the worker's log line that holds the text.
func Fingerprint(s string) string {
	sum := sha256.Sum256([]byte(s))
	return fmt.Sprintf("%d bytes, sha256 %s", len(s), hex.EncodeToString(sum[:4]))
}

// Redacted is the failure as Error says it, without SQL Server's message
// texts (which may quote values of the database): the operation, the
// instance, the kind and ErrorSummary. A transport failure keeps its
// cause, the driver's own words.
func (f *Failure) Redacted() string {
	s := fmt.Sprintf("%s on %s: %s", f.Op, f.Target, f.Kind)
	switch {
	case len(f.Errors) > 0:
		return s + ": " + f.ErrorSummary()
	case f.Err != nil:
		return s + ": " + truncate(f.Err.Error(), maxCauseBytes)
	}
	return s
}

// ErrorSummary names the SQL Server errors of the failure without their
// texts: "SQL Server error 15517 (message 180 bytes, sha256 1a2b3c4d)".
func (f *Failure) ErrorSummary() string {
	nums := make([]string, 0, len(f.Errors))
	texts := make([]string, 0, len(f.Errors))
	for _, e := range f.Errors {
		nums = append(nums, strconv.Itoa(int(e.Number)))
		texts = append(texts, e.Message)
	}
	return fmt.Sprintf("SQL Server error %s (message %s)", strings.Join(nums, ", "), Fingerprint(strings.Join(texts, "\n")))
}
