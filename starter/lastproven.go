package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/status"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// outOfObjectives is the exit-1 answer of `status --from-manifests`:
// monitoring calls the command and alarms on the exit code.
type outOfObjectives struct{ red, total, unread, notImmutable int }

func (e outOfObjectives) Error() string {
	var parts []string
	if e.notImmutable > 0 {
		parts = append(parts, fmt.Sprintf("%d object stores are not immutable (lines marked RED object store): a locked object could be deleted, shortened or overwritten there with the worker's credentials", e.notImmutable))
	}
	if e.red > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d databases are out of their objectives (lines marked RED: no verified set within rpo, or restore + CHECKDB above rto, or a log chain not proven within rpo, broken or behind its log_proof_lag)", e.red, e.total))
	}
	if e.unread > 0 {
		parts = append(parts, fmt.Sprintf("%d backup servers could not be read, so copies held there are not counted (lines marked SERVER)", e.unread))
	}
	return strings.Join(parts, "; ")
}

// lastProven answers "when was each database last proven restorable?" from
// the manifests on every configured backup server, optionally for one
// database name (exact, on every instance).
func lastProven(ctx context.Context, e *env, c *config.Config, database string, asJSON bool) error {
	ctx, cancel := e.withTimeout(ctx, defaultTimeout)
	defer cancel()
	r := status.Load(ctx, c, nil, time.Now())
	if r.Authentication == status.AuthenticationOff {
		fmt.Fprintf(e.stderr, "status: warning: manifests are not authenticated (no manifest_keys in %s): anyone who can write a backup share "+
			"can make a database look verified here; configure manifest_keys (README, \"Authenticated manifests\")\n", c.File)
	}
	if database != "" {
		var keep []status.Database
		for _, d := range r.Databases {
			if d.Database == database {
				keep = append(keep, d)
			}
		}
		if len(keep) == 0 {
			return fmt.Errorf("database %q is neither configured in %s nor found in the manifests of any backup server: check the name (it is exact)", database, c.File)
		}
		r.Databases = keep
	}
	if asJSON {
		if err := writeJSON(e.stdout, r); err != nil {
			return fmt.Errorf("write the status as JSON: %w", err)
		}
	} else {
		for _, s := range r.Servers {
			if s.Error != "" {
				fmt.Fprintf(e.stdout, "SERVER %s: %s\n", s.Name, s.Error)
			}
			names := make([]string, 0, len(s.Broken))
			for name := range s.Broken {
				names = append(names, name)
			}
			sort.Strings(names)
			for _, name := range names {
				fmt.Fprintf(e.stdout, "SERVER %s: manifest %s is unreadable and not counted: %s\n", s.Name, tsql.Printable(name), tsql.Printable(s.Broken[name]))
			}
		}
		for _, o := range r.ObjectStores {
			fmt.Fprintln(e.stdout, objectStoreLine(o))
		}
		for _, d := range r.Databases {
			fmt.Fprintln(e.stdout, provenLine(d))
		}
	}
	red := len(r.OutOfObjectives())
	unread := len(r.Incomplete())
	notImmutable := len(r.NotImmutable())
	if red > 0 || unread > 0 || notImmutable > 0 {
		return outOfObjectives{red: red, total: len(r.Databases), unread: unread, notImmutable: notImmutable}
	}
	return nil
}

// objectStoreLine is an object store's newest immutability probe on one
// line, RED when it found the store not immutable.
func objectStoreLine(o status.ObjectStore) string {
	loc := ""
	if o.Location != "" {
		loc = " (" + o.Location + ")"
	}
	switch {
	case o.NotImmutable():
		return fmt.Sprintf("RED  object store %s%s: probed %s: %s", o.Name, loc, stamp(o.ProbedAt), tsql.Printable(o.Verdict))
	case o.Probed:
		line := fmt.Sprintf("OK   object store %s%s: probed %s: %s", o.Name, loc, stamp(o.ProbedAt), tsql.Printable(o.Verdict))
		if o.Error != "" {
			line += "; its own record not read: " + tsql.Printable(o.Error)
		}
		return line
	}
	line := fmt.Sprintf("--   object store %s%s: not probed yet (the first copy there probes it)", o.Name, loc)
	if o.Error != "" {
		line += "; not read: " + tsql.Printable(o.Error)
	}
	return line
}

// immutableText is a verified set's immutable copy, for its line.
func immutableText(im *status.Immutable) string {
	if im == nil {
		return ""
	}
	switch im.State {
	case "copied":
		return fmt.Sprintf("; immutable copy on %s, %d objects locked %s until %s", im.Server, im.Objects, im.Mode, stamp(im.RetainUntil))
	case "not_immutable":
		return fmt.Sprintf("; NO immutable copy: %s is not immutable", im.Server)
	}
	return fmt.Sprintf("; immutable copy to %s %s at %s: %s", im.Server, im.State, stamp(im.At), tsql.Printable(im.Error))
}

// provenLine is one database on one line: the verdict first, so `grep RED`
// works; names are printed as they are (any character SQL Server allows),
// except that one holding a line break or another invisible character is
// quoted with it escaped (tsql.Printable), so it cannot forge a line.
func provenLine(d status.Database) string {
	var b strings.Builder
	verdict := "OK "
	if d.OutOfObjectives {
		verdict = "RED"
	}
	fmt.Fprintf(&b, "%s  %s / %s:", verdict, tsql.Printable(d.Instance), tsql.Printable(d.Database))
	if v := d.LastVerified; v != nil {
		fmt.Fprintf(&b, " verified seq %d taken %s (%s ago, rpo %s) on %s", v.Sequence, stamp(v.TakenAt), v.Age, d.RPO, strings.Join(v.Servers, ", "))
		if v.OffsetUnknown {
			b.WriteString(" (taken on the source's clock, its offset from UTC unknown)")
		}
		if v.TimeToRecover > 0 {
			fmt.Fprintf(&b, "; recover %s (restore %s + CHECKDB %s", v.TimeToRecover, v.Restore, v.CheckDB)
			if d.RTO > 0 {
				fmt.Fprintf(&b, ", rto %s", d.RTO)
			}
			b.WriteString(")")
		}
		b.WriteString(predictedText(v.Predicted))
		b.WriteString(immutableText(v.Immutable))
	} else {
		b.WriteString(" never verified")
	}
	if v := d.LastDifferential; v != nil {
		fmt.Fprintf(&b, "; differential seq %d on it taken %s (%s ago) on %s", v.Sequence, stamp(v.TakenAt), v.Age, strings.Join(v.Servers, ", "))
		if v.TimeToRecover > 0 {
			fmt.Fprintf(&b, "; recover %s (restore of both %s + CHECKDB %s)", v.TimeToRecover, v.Restore, v.CheckDB)
		}
	}
	if l := d.LogChain; l != nil {
		switch {
		case l.ProvenTo.IsZero():
			fmt.Fprintf(&b, "; log chain %d proven to no point yet", l.Chain)
		default:
			fmt.Fprintf(&b, "; proven to %s (%s ago, rpo %s) by log chain %d", stamp(l.ProvenTo), l.ProvenAge, d.RPO, l.Chain)
		}
		fmt.Fprintf(&b, ", log_proof %s", d.ProofMode)
	}
	b.WriteString(drillText(d))
	if f := d.LastFailure; f != nil {
		kind := ""
		if f.Base > 0 {
			kind = "differential "
		}
		fmt.Fprintf(&b, "; since then %sseq %d", kind, f.Sequence)
		if f.Base > 0 {
			fmt.Fprintf(&b, " (on seq %d)", f.Base)
		}
		fmt.Fprintf(&b, " %s at %s (%s) %s", f.Type, f.Step, tsql.Printable(f.Reason), stamp(f.At))
	}
	if u := d.Unauthenticated; len(u) > 0 {
		fmt.Fprintf(&b, "; %d set(s) with unauthenticated manifests, not counted (newest seq %d claims %s on %s, %s)",
			len(u), u[0].Sequence, u[0].State, strings.Join(u[0].Servers, ", "), u[0].Auth)
	}
	if !d.Configured {
		b.WriteString("; not in the config")
	}
	if len(d.Reasons) > 0 {
		fmt.Fprintf(&b, " -- %s", tsql.Printable(strings.Join(d.Reasons, "; ")))
	}
	return b.String()
}

// drillText is a drilled database's last recovery drill, for its line:
// its outcome, RTO against rto, the point reached, its age against
// drill.max_age.
func drillText(d status.Database) string {
	if d.DrillEvery <= 0 {
		return ""
	}
	l := d.LastDrill
	if l == nil {
		return "; no recovery drill yet"
	}
	out := fmt.Sprintf("; drill %s %s (%s ago, max %s): recover %s", l.Outcome, stamp(l.At), l.Age, d.DrillMaxAge, status.Duration(l.RTO))
	if d.RTO > 0 {
		out += fmt.Sprintf(" (rto %s)", d.RTO)
	}
	if !l.RecoveryPoint.IsZero() {
		out += " to " + stamp(l.RecoveryPoint)
	}
	out += " on " + tsql.Printable(l.Instance)
	if e, ok := catalog.ErrorOf(l.PredictionError, catalog.PredictRestore); ok {
		out += fmt.Sprintf(", restore predicted %s, error %s", rd(e.Predicted), errorText(e))
	}
	if l.ErrorType != "" {
		out += " [" + l.ErrorType + "]"
	}
	return out + immutableProvenText(d)
}

// immutableProvenText says when the immutable copy was last proven
// restorable (a drill from it passed), or that it never was when drills
// are from it.
func immutableProvenText(d status.Database) string {
	p := d.ImmutableProven
	switch {
	case p != nil:
		return fmt.Sprintf("; immutable copy on %s proven restorable %s (%s ago, set %d)", p.Store, stamp(p.At), p.Age, p.Sequence)
	case d.DrillFrom == config.DrillFromImmutable:
		return "; immutable copy never proven restorable"
	}
	return ""
}
