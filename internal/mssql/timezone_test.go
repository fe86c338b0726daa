package mssql

import "testing"

// A NULL backupset.time_zone is unknown (127), never an offset of zero:
// the caller falls back to the server's offset instead of taking UTC.
func TestTimeZoneNullIsUnknown(t *testing.T) {
	for _, tc := range []struct {
		val  any
		want int64
	}{{nil, 127}, {int64(4), 4}, {int64(-20), -20}} {
		r := row{idx: map[string]int{"time_zone": 0}, vals: []any{tc.val}}
		if got := timeZone(r); got != tc.want {
			t.Errorf("time_zone %v: %d, want %d", tc.val, got, tc.want)
		}
		if off, ok := (BackupSetInfo{TimeZone: timeZone(r)}).UTCOffsetMinutes(); tc.val == nil && ok {
			t.Errorf("NULL time_zone read as a known offset %d", off)
		}
	}
}
