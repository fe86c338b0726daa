package plan

import (
	"strconv"
	"time"
)

// UTCSequence is the sequence number of the `utc` method (seed 000 "Handing
// Database Server Failure During Backup": a number built from the UTC date),
// to the second: yyyymmddhhmmss, e.g. 20261129192500. The seed's daily
// CONVERT(..., 112) stamp would reuse a number when a failed backup is
// retried the same day; here the result is always greater than last (the
// highest sequence already used), so a number is never reused even if the
// clock steps back or two cycles start in the same second. Pass
// workflow.Now, not time.Now, from workflow code.
func UTCSequence(now time.Time, last int64) int64 {
	u := now.UTC()
	s, _ := strconv.ParseInt(u.Format("20060102150405"), 10, 64)
	if s <= last {
		return last + 1
	}
	return s
}
