package cycle

import (
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
)

// max_age reads datetime values and the backup's finish as the source
// server's wall clock; datetimeoffset values are instants.
func TestSanityMaxAgeInServerTime(t *testing.T) {
	off := 300 // UTC+5
	now := time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)
	local := func(t time.Time) time.Time { // the server's wall clock as go-mssqldb decodes it
		l := t.In(time.FixedZone("", off*60))
		return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), l.Second(), 0, time.UTC)
	}
	withHeader := &catalog.Manifest{Header: &catalog.Header{BackupFinish: local(now.Add(-10 * time.Minute))}}
	noHeader := &catalog.Manifest{}
	c := config.SanityCheck{Name: "fresh", Expect: config.ExpectMaxAge, MaxAge: time.Hour}
	for _, tc := range []struct {
		name   string
		v      time.Time
		m      *catalog.Manifest
		offset *int
		want   string
	}{
		{"local value, header", local(now.Add(-30 * time.Minute)), withHeader, &off, ""},
		{"local value, header, offset unknown", local(now.Add(-30 * time.Minute)), withHeader, nil, ""},
		{"old local value, header", local(now.Add(-3 * time.Hour)), withHeader, &off, "2h50m0s older"},
		{"UTC stored in a datetime reads 5 h old", now.Add(-5 * time.Minute), withHeader, &off, "4h55m0s older"},
		{"datetimeoffset value is an instant", now.Add(-30 * time.Minute).In(time.FixedZone("", -7*3600)), withHeader, &off, ""},
		{"no header: local value against the worker's clock", local(now.Add(-30 * time.Minute)), noHeader, &off, ""},
		{"no header: old local value", local(now.Add(-2 * time.Hour)), noHeader, &off, "2h0m0s older"},
	} {
		_, got := sanityMismatchAt(c, tc.v, true, tc.m, tc.offset, now)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
