package sqlsim

import (
	"context"
	"strconv"
	"strings"
	"time"
)

// WAITFOR DELAY 'hh:mm[:ss[.fff]]' blocks the batch for that period (at most
// 24 hours; no date part), WAITFOR TIME '...' until that time of day. The
// statements after it in the batch run when it ends; an attention (the
// client cancelling) or a dropped connection ends it at once, and the rest
// of the batch does not run. Tests use it to model a slow query, e.g. a
// sanity check on a cold copy: `WAITFOR DELAY '00:02:00'; SELECT ...`.
//
// SQL Server: https://learn.microsoft.com/en-us/sql/t-sql/language-elements/waitfor-transact-sql
// (time_to_pass "is formatted as hh:mm[[:ss].fff]", up to 24 hours; "Dates
// can't be specified"). A string it cannot read fails with 148 "Incorrect
// time syntax in time string '...' used with WAITFOR.".
func (x *execCtx) waitfor(n *waitforStmt) error {
	v, err := (&env{x: x}).eval(n.e)
	if err != nil {
		return err
	}
	text := toString(v)
	var d time.Duration
	if t, ok := v.(time.Time); ok { // a datetime variable: its time of day
		d = time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute +
			time.Duration(t.Second())*time.Second + time.Duration(t.Nanosecond())
		text = t.Format("15:04:05.000")
	} else if d, ok = parseWaitTime(text); !ok {
		return sqlErr(148, 15, "Incorrect time syntax in time string '%s' used with WAITFOR.", text)
	}
	if !n.delay { // TIME: until the next such time of day (server local time)
		now := time.Now()
		at := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, now.Location()).Add(d)
		if !at.After(now) {
			at = at.AddDate(0, 0, 1)
		}
		d = at.Sub(now)
	}
	x.setCommand("WAITFOR", x.currentDB().ID, false)
	x.in.mu.Lock()
	x.req.waitType = "WAITFOR"
	x.in.mu.Unlock()
	defer func() {
		x.in.mu.Lock()
		x.req.waitType = ""
		x.in.mu.Unlock()
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-x.ctx.Done():
		return x.ctx.Err()
	case <-x.crashed:
		return context.Canceled
	}
}

// parseWaitTime reads hh:mm[:ss[.fff]] (hours 0-23, or exactly 24:00 for a
// full day); a date part is refused.
func parseWaitTime(s string) (time.Duration, bool) {
	s = strings.TrimSpace(s)
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return 0, false
	}
	num := func(p string, limit int) (int, bool) {
		if p == "" || len(p) > 2 {
			return 0, false
		}
		n, err := strconv.Atoi(p)
		return n, err == nil && n >= 0 && n <= limit
	}
	h, ok1 := num(parts[0], 24)
	m, ok2 := num(parts[1], 59)
	if !ok1 || !ok2 {
		return 0, false
	}
	d := time.Duration(h)*time.Hour + time.Duration(m)*time.Minute
	if len(parts) == 3 {
		sec, frac, hasFrac := strings.Cut(parts[2], ".")
		sv, ok := num(sec, 59)
		if !ok {
			return 0, false
		}
		d += time.Duration(sv) * time.Second
		if hasFrac {
			if frac == "" || len(frac) > 3 {
				return 0, false
			}
			for _, c := range frac {
				if c < '0' || c > '9' {
					return 0, false
				}
			}
			ms, _ := strconv.Atoi((frac + "00")[:3])
			d += time.Duration(ms) * time.Millisecond
		}
	}
	if d > 24*time.Hour {
		return 0, false
	}
	return d, true
}
