package recovery

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/backupcycle/backupcycle/internal/logchain"
)

// Point is where a restore goes: the newest point the backups reach
// (Latest), or an instant.
type Point struct {
	Latest bool      `json:"latest,omitempty"`
	At     time.Time `json:"at,omitzero"` // instant (UTC)
}

// String names the point for people.
func (p Point) String() string {
	if p.Latest {
		return "the latest point the backups reach"
	}
	return p.At.UTC().Format(time.RFC3339Nano)
}

// Kind is what a step restores.
type Kind string

const (
	// KindFull is the full backup every restore starts with (RESTORE
	// DATABASE ... NORECOVERY).
	KindFull Kind = "full"
	// KindDiff is a differential backup on top of the full, before the
	// logs (RESTORE DATABASE ... NORECOVERY of the differential).
	KindDiff Kind = "diff"
	// KindLog is a log backup (RESTORE LOG ... NORECOVERY [, STOPAT]).
	KindLog Kind = "log"
)

// File is one file of a step's backup, as its manifest or chain record
// recorded it.
type File struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256,omitempty"`
}

// Step is one backup to restore, in order.
type Step struct {
	Kind     Kind   `json:"kind"`
	Sequence int64  `json:"sequence,omitempty"` // full or differential: the set's number
	Chain    int64  `json:"chain,omitempty"`    // log: its chain and number in it
	Number   int64  `json:"number,omitempty"`
	GUID     string `json:"backup_set_guid"`
	FirstLSN string `json:"first_lsn"`
	LastLSN  string `json:"last_lsn"`
	// Start and Finish are the instants (UTC) its BACKUP started and
	// finished; UTCOffsetMinutes is the source's offset from UTC then.
	Start            time.Time `json:"start,omitzero"`
	Finish           time.Time `json:"finish"`
	UTCOffsetMinutes int       `json:"utc_offset_minutes"`
	Files            []File    `json:"files"`
	// SoftwareVersion is the SQL Server build that wrote it, as its
	// manifest or chain record has it ("" when not recorded): the target
	// must read every step's.
	SoftwareVersion string `json:"software_version,omitempty"`
	// Servers are the reachable backup servers holding every file, in the
	// order to try them.
	Servers []string `json:"servers"`
	// Dir is the directory of Servers the files were staged in (a drill
	// from the immutable copy), "" for the sets' own.
	Dir string `json:"dir,omitempty"`
	// Proven: restored on the verification instance already (a full:
	// verified; a log: applied by a log proof).
	Proven bool  `json:"proven"`
	Bytes  int64 `json:"bytes"`
}

// Name is "set 12" or "log 7 of chain 3".
func (s Step) Name() string {
	if s.Kind == KindLog {
		return fmt.Sprintf("log %d of chain %d", s.Number, s.Chain)
	}
	return fmt.Sprintf("set %d", s.Sequence)
}

// Plan is a restore sequence: the full, (a differential,) the logs.
type Plan struct {
	Point Point  `json:"point"`
	Steps []Step `json:"steps"`
	// StopAt is the STOPAT instant of every log (zero: each log to its
	// end); StopAtOffsetMinutes the offset from UTC of the source's clock
	// in the log that reaches it, on which STOPAT is written.
	StopAt              time.Time `json:"stop_at,omitzero"`
	StopAtOffsetMinutes int       `json:"stop_at_offset_minutes,omitempty"`
	// RecoveryPoint is the newest instant every commit before which the
	// restore holds: the point itself for an instant; for the latest, the
	// start of the last backup restored (a log, or the differential or
	// full without logs). A BACKUP holds the log up to where it stands at
	// some moment between its start and its finish, so a commit after the
	// start may or may not be in it: only the start is certain.
	RecoveryPoint time.Time `json:"recovery_point"`
	// RecoveryPointBound is the instant no commit after which is in the
	// restore: the point itself for an instant, the last backup's finish
	// for the latest.
	RecoveryPointBound time.Time `json:"recovery_point_bound,omitzero"`
	// RecoveryPointFrom says which: "stopat", "last log's start",
	// "differential's start", "full's start".
	RecoveryPointFrom string   `json:"recovery_point_from"`
	Warnings          []string `json:"warnings,omitempty"`
}

// Full is the plan's full backup.
func (p Plan) Full() Step { return p.Steps[0] }

// Diff is the plan's differential backup, if it has one.
func (p Plan) Diff() (Step, bool) {
	for _, s := range p.Steps {
		if s.Kind == KindDiff {
			return s, true
		}
	}
	return Step{}, false
}

// Logs are the plan's log backups, in order.
func (p Plan) Logs() []Step {
	var out []Step
	for _, s := range p.Steps {
		if s.Kind == KindLog {
			out = append(out, s)
		}
	}
	return out
}

// Bytes is what the plan reads in all.
func (p Plan) Bytes() int64 {
	var n int64
	for _, s := range p.Steps {
		n += s.Bytes
	}
	return n
}

// Unreachable is why no restore from the backups held reaches the point.
type Unreachable struct {
	Point Point
	Why   string
}

func (u *Unreachable) Error() string {
	return fmt.Sprintf("no restore from the backups on the reachable backup servers reaches %s: %s", u.Point, u.Why)
}

// Choose is the restore sequence that reaches p: the newest verified full
// held on a reachable server that finished by p (for the latest, the
// newest of all), then the log backups from it, in order, without a hole,
// each held on a reachable server, up to the first that started at or
// after p (for the latest, as far as the chain goes). Logs not yet proven
// are used (their files are hash-checked and restored WITH CHECKSUM) and
// named in the warnings. A full whose logs do not reach p gives way to an
// older one whose do. Between the full and its logs goes the newest
// verified differential on it that finished by p (diffsOn); the logs then
// start after it.
func Choose(c Catalog, p Point) (Plan, error) {
	if !p.Latest && p.At.IsZero() {
		return Plan{}, &Unreachable{Point: p, Why: "no point given: give an instant or ask for the latest"}
	}
	p.At = p.At.UTC()
	var candidates []Set
	var notVerified []string
	for _, s := range c.Sets {
		switch {
		case !p.Latest && s.Finish.After(p.At):
		case !s.Verified:
			notVerified = append(notVerified, fmt.Sprintf("set %d (finished %s) is %s, not verified", s.Sequence, stamp(s.Finish), s.Manifest.State))
		case len(s.Holders) == 0:
			notVerified = append(notVerified, fmt.Sprintf("set %d (finished %s) is verified but held on no reachable backup server", s.Sequence, stamp(s.Finish)))
		default:
			candidates = append(candidates, s)
		}
	}
	if len(candidates) == 0 {
		return Plan{}, &Unreachable{Point: p, Why: noFull(c, p, notVerified)}
	}
	var first error
	for i, s := range candidates {
		plan, err := fromFull(c, s, p)
		if err == nil {
			if i > 0 {
				plan.Warnings = append(plan.Warnings, fmt.Sprintf("the newer verified set %d does not reach %s (%v): restoring from set %d",
					candidates[0].Sequence, p, first, s.Sequence))
			}
			if len(notVerified) > 0 && p.Latest {
				plan.Warnings = append(plan.Warnings, "not used: "+strings.Join(notVerified, "; "))
			}
			return plan, nil
		}
		if first == nil {
			first = err
		}
	}
	return Plan{}, &Unreachable{Point: p, Why: first.Error()}
}

// noFull says why no full can start the restore.
func noFull(c Catalog, p Point, notVerified []string) string {
	var why string
	switch {
	case len(c.Sets) == 0 && len(c.Diffs) > 0:
		why = fmt.Sprintf("no verified full backup of the database on %s: a differential restores only on top of its full", strings.Join(c.Servers, ", "))
	case len(c.Sets) == 0:
		why = fmt.Sprintf("no backup set of the database on %s", strings.Join(c.Servers, ", "))
	case !p.Latest:
		oldest := c.Sets[len(c.Sets)-1]
		for _, s := range c.Sets {
			if s.Verified && len(s.Holders) > 0 {
				oldest = s
			}
		}
		if oldest.Finish.After(p.At) {
			why = fmt.Sprintf("the point is before the oldest verified full backup held (set %d, finished %s)", oldest.Sequence, stamp(oldest.Finish))
		} else {
			why = "no verified full backup held on a reachable backup server finished by then"
		}
	default:
		why = "no verified full backup is held on a reachable backup server"
	}
	if len(notVerified) > 0 {
		why += " (" + strings.Join(notVerified, "; ") + ")"
	}
	return why
}

// fromFull is the plan that starts with set s, or why its logs do not
// reach p: with the newest verified differential on s that finished by p
// and whose logs reach p, else without one.
func fromFull(c Catalog, s Set, p Point) (Plan, error) {
	var warnings []string
	for _, d := range diffsOn(c, s, p) {
		plan, err := fromBase(c, s, &d, p)
		if err == nil {
			plan.Warnings = append(warnings, plan.Warnings...)
			return plan, nil
		}
		warnings = append(warnings, fmt.Sprintf("differential set %d on set %d is not used: %v", d.Sequence, s.Sequence, err))
	}
	plan, err := fromBase(c, s, nil, p)
	plan.Warnings = append(warnings, plan.Warnings...)
	return plan, err
}

// diffsOn are the differentials that may follow full s towards p, newest
// first: based on s (its backup set GUID), verified, held on a reachable
// server, finished at or before p. A differential holds every change up
// to its LastLSN, so the logs after it are those a restore needs
// ("Differential Backups (SQL Server)").
func diffsOn(c Catalog, s Set, p Point) []Set {
	var out []Set
	for _, d := range c.Diffs {
		if d.Base == nil || !strings.EqualFold(d.Base.BackupSetGUID, s.GUID) || !d.Verified || len(d.Holders) == 0 ||
			!p.Latest && d.Finish.After(p.At) || !s.LastLSN.Less(d.LastLSN) {
			continue
		}
		out = append(out, d)
	}
	return out
}

// fromBase is the plan that restores full s, then differential d (nil:
// none), then the logs after it.
func fromBase(c Catalog, s Set, d *Set, p Point) (Plan, error) {
	plan := Plan{Point: p, Steps: []Step{setStep(s, KindFull)}}
	f := logchain.Full{Sequence: s.Sequence, BackupSetGUID: s.GUID, FirstLSN: s.FirstLSN, LastLSN: s.LastLSN, Finish: s.Finish, Verified: true}
	from, what := s, "full's"
	if d != nil {
		plan.Steps = append(plan.Steps, setStep(*d, KindDiff))
		// The logs continue where the differential left the copy.
		f.LastLSN, f.Finish, from, what = d.LastLSN, d.Finish, *d, "differential's"
	}
	ch := chainAfter(c, f)
	// An instant at the full's (or differential's) finish is reached by
	// the logs after it with STOPAT, as any later one: the set alone holds
	// for certain only what committed before it started.
	if ch == nil && p.Latest {
		plan.Warnings = append(plan.Warnings, fmt.Sprintf("no log backup follows set %d on the reachable backup servers: the restore ends with the %s "+
			"(what committed before it started for certain, nothing after its finish)", from.Sequence, strings.TrimSuffix(what, "'s")))
		plan.reachesEndOf(setStep(from, KindFull), what)
		return plan, nil
	}
	if ch == nil {
		return Plan{}, fmt.Errorf("no log backup after set %d (finished %s) is held on a reachable backup server", from.Sequence, stamp(from.Finish))
	}
	logs, hole := usable(ch, f)
	var reach []logchain.Log
	if p.Latest {
		reach = logs
		if hole != "" {
			plan.Warnings = append(plan.Warnings, "the restore stops where the chain does: "+hole)
		}
	} else {
		for i, l := range logs {
			if !l.Start.Before(p.At) {
				reach = logs[:i+1]
				break
			}
		}
		if reach == nil {
			return Plan{}, beyond(ch, logs, hole, from, p)
		}
	}
	var unproven []string
	plan.Steps = slices.Grow(plan.Steps, len(reach))
	for _, l := range reach {
		plan.Steps = append(plan.Steps, logStep(ch, l))
		if l.Proven == nil {
			unproven = append(unproven, fmt.Sprint(l.Number))
		}
	}
	if len(unproven) > 0 {
		plan.Warnings = append(plan.Warnings, fmt.Sprintf("log(s) %s of chain %d are not proven yet (not restored on the verification instance): "+
			"their files are hash-checked and restored WITH CHECKSUM", strings.Join(unproven, ", "), ch.ID))
	}
	last := plan.Steps[len(plan.Steps)-1]
	switch {
	case !p.Latest:
		if err := clockNames(plan.Steps, p.At); err != nil {
			return Plan{}, err
		}
		plan.StopAt, plan.StopAtOffsetMinutes = p.At, last.UTCOffsetMinutes
		plan.RecoveryPoint, plan.RecoveryPointBound, plan.RecoveryPointFrom = p.At, p.At, "stopat"
	case len(reach) == 0:
		plan.reachesEndOf(setStep(from, KindFull), what)
	default:
		plan.reachesEndOf(last, "last log's")
	}
	return plan, nil
}

// reachesEndOf sets the recovery point of a restore that applies step to
// its end: its start for certain, its finish at most. ("Full database
// backups represent the database at the time the backup finished", Microsoft
// Learn, Full database backups: approximately so; the log in a backup ends
// where it stood when its last LSN was taken, before the finish, and a
// commit in between is not in it.) Without a recorded
// start (a set written before starts were recorded), its finish is both,
// and the plan says so.
func (p *Plan) reachesEndOf(step Step, what string) {
	p.RecoveryPointBound = step.Finish
	if step.Start.IsZero() || step.Start.After(step.Finish) {
		p.RecoveryPoint, p.RecoveryPointFrom = step.Finish, what+" finish"
		p.Warnings = append(p.Warnings, fmt.Sprintf("%s records no start: the recovery point given is its finish, "+
			"and a transaction that committed while it ran may not be in it", step.Name()))
		return
	}
	p.RecoveryPoint, p.RecoveryPointFrom = step.Start, what+" start"
}

// clockNames checks that STOPAT, written on the source's clock as the
// last log has it, names at on the clock SQL Server reads the commit times
// of every step on (its local time: "RESTORE Statements - Arguments",
// STOPAT,
// https://learn.microsoft.com/en-us/sql/t-sql/statements/restore-statements-arguments-transact-sql):
// where the restore stands after each earlier step (a full's or a
// differential's end, a log's start) on that step's clock, and where the
// clock went back between two steps (a time zone change, the end of
// daylight saving time) the old clock at the later one's start, read no
// later than the point. Otherwise commits made before the point carry
// later clock times than it: SQL Server would stop short of it, or refuse
// it with 4335 when the full already ended later on the clock. And the
// last log must have been written on one clock (the step before it on
// the same): a clock that changed while it was written leaves its commits
// on two, which one STOPAT cannot split at the point.
func clockNames(steps []Step, at time.Time) error {
	last := steps[len(steps)-1]
	if n := len(steps); n > 1 && steps[n-2].UTCOffsetMinutes != last.UTCOffsetMinutes {
		prev := steps[n-2]
		return fmt.Errorf("the source's clock changed from %s to %s between %s and %s, the log that holds the point (a time zone change, "+
			"or daylight saving time): its commits are on two clocks, which one STOPAT cannot split at the point; recover to a point after %s "+
			"(the start of %s), or to the latest", utcOffset(prev.UTCOffsetMinutes), utcOffset(last.UTCOffsetMinutes), prev.Name(), last.Name(),
			stamp(last.Start), last.Name())
	}
	stop := onClock(at, last.UTCOffsetMinutes)
	var latest time.Time
	for i, s := range steps {
		if i < len(steps)-1 {
			end := s.Finish
			if s.Kind == KindLog {
				end = s.Start
			}
			if r := onClock(end, s.UTCOffsetMinutes); !end.IsZero() && r.After(latest) {
				latest = r
			}
		}
		if i > 0 && steps[i-1].UTCOffsetMinutes > s.UTCOffsetMinutes && !s.Start.IsZero() {
			if r := onClock(s.Start, steps[i-1].UTCOffsetMinutes); r.After(latest) {
				latest = r
			}
		}
	}
	if !latest.After(stop) {
		return nil
	}
	why := "the source's clock went back"
	for i := len(steps) - 1; i > 0; i-- {
		if a, b := steps[i-1], steps[i]; a.UTCOffsetMinutes > b.UTCOffsetMinutes {
			why = fmt.Sprintf("the source's clock went back from %s to %s between %s and %s (a time zone change, or the end of daylight saving time)",
				utcOffset(a.UTCOffsetMinutes), utcOffset(b.UTCOffsetMinutes), a.Name(), b.Name())
			break
		}
	}
	from := latest.Add(-time.Duration(last.UTCOffsetMinutes) * time.Minute)
	return fmt.Errorf("%s: commits made before the point read up to %s on its clock, later than the %s STOPAT would name, "+
		"so SQL Server would stop short of the point (or refuse it, 4335); recover to a point after %s, or to the latest",
		why, latest.Format("2006-01-02T15:04:05"), stop.Format("2006-01-02T15:04:05.000"), stamp(from))
}

// onClock is instant t as a clock offset minutes from UTC reads it.
func onClock(t time.Time, offset int) time.Time {
	return t.UTC().Add(time.Duration(offset) * time.Minute)
}

// utcOffset names an offset from UTC: UTC+05:30, UTC-08:00.
func utcOffset(minutes int) string {
	sign := "+"
	if minutes < 0 {
		sign, minutes = "-", -minutes
	}
	return fmt.Sprintf("UTC%s%02d:%02d", sign, minutes/60, minutes%60)
}

// chainAfter is the chain holding the log that rolls f forward (its
// LastLSN inside a log's range), the newest such; nil when none does.
func chainAfter(c Catalog, f logchain.Full) *Chain {
	for i := len(c.Chains) - 1; i >= 0; i-- {
		ch := &c.Chains[i]
		for _, l := range ch.Logs {
			if l.Contains(f.LastLSN) {
				return ch
			}
		}
	}
	return nil
}

// usable are the logs that restore in order after f and are held on a
// reachable server, up to the first hole; hole says where the chain stops
// ("" when it goes on to its newest log).
func usable(ch *Chain, f logchain.Full) ([]logchain.Log, string) {
	logs, gap := ch.Restorable(f)
	for i, l := range logs {
		if len(l.Servers) == 0 {
			return logs[:i], fmt.Sprintf("log %d of chain %d is held on no reachable backup server", l.Number, ch.ID)
		}
	}
	switch {
	case gap != nil:
		return logs, gap.String()
	case ch.Break != nil:
		return logs, fmt.Sprintf("chain %d broke at %s (%s: %s)", ch.ID, stamp(ch.Break.At), ch.Break.Reason, ch.Break.Detail)
	}
	return logs, ""
}

// beyond says why the logs from s do not reach p, and the newest point
// they do reach.
func beyond(ch *Chain, logs []logchain.Log, hole string, s Set, p Point) error {
	newest := s.Finish
	if n := len(logs); n > 0 {
		newest = logs[n-1].Start
	}
	why := fmt.Sprintf("the logs after set %d reach %s at the latest (the start of the last log held", s.Sequence, stamp(newest))
	if n := len(logs); n > 0 {
		why += fmt.Sprintf(", log %d of chain %d", logs[n-1].Number, ch.ID)
	}
	why += ")"
	if hole != "" {
		why += "; then " + hole
	} else {
		why += "; no later log backup is held yet: restore with --latest to its end, or to a point before " + stamp(newest)
	}
	return fmt.Errorf("%s", why)
}

// setStep is the step restoring set s, a full or a differential.
func setStep(s Set, kind Kind) Step {
	m := s.Manifest
	st := Step{Kind: kind, Sequence: s.Sequence, GUID: s.GUID, FirstLSN: string(s.FirstLSN), LastLSN: string(s.LastLSN),
		Finish: s.Finish, Servers: slices.Clone(s.Holders), Proven: s.Verified}
	if h := m.Header; h != nil {
		st.Start, st.SoftwareVersion = h.BackupStartUTC, h.SoftwareVersion
		if h.UTCOffsetMinutes != nil {
			st.UTCOffsetMinutes = *h.UTCOffsetMinutes
		}
	}
	for _, f := range m.Stripes {
		st.Files = append(st.Files, File{Name: f.Name, Size: f.Size, SHA256: f.SHA256})
		st.Bytes += f.Size
	}
	return st
}

func logStep(ch *Chain, l logchain.Log) Step {
	st := Step{Kind: KindLog, Chain: ch.ID, Number: l.Number, GUID: ch.GUIDs[l.Number], FirstLSN: string(l.FirstLSN), LastLSN: string(l.LastLSN),
		Start: l.Start, Finish: l.Finish, UTCOffsetMinutes: ch.Offsets[l.Number], SoftwareVersion: ch.Versions[l.Number],
		Servers: slices.Clone(l.Servers), Proven: l.Proven != nil}
	for _, f := range l.Files {
		st.Files = append(st.Files, File{Name: f.Name, Size: f.Size, SHA256: f.SHA256})
		st.Bytes += f.Size
	}
	return st
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }
