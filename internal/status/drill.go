package status

import (
	"context"
	"fmt"
	"time"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
)

// DrillObjectives are a database's drill settings status judges it by:
// drill.every (0: no drills) and drill.max_age.
type DrillObjectives struct {
	DrillEvery  Duration `json:"drill_every_seconds,omitempty"`
	DrillMaxAge Duration `json:"drill_max_age_seconds,omitempty"`
	// DrillFrom is drill.from: with immutable, the immutable copy must
	// have been proven restorable within drill.max_age.
	DrillFrom string `json:"drill_from,omitempty"`
}

// ImmutableProven is the newest passed drill from the immutable copy:
// when the third copy was last proven restorable.
type ImmutableProven struct {
	At       time.Time `json:"at"`
	Age      Duration  `json:"age_seconds"`
	Store    string    `json:"store"`
	Sequence int64     `json:"sequence"`
	// WorkflowID and RunID are the drill's.
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id"`
}

// FoundDrill is one drill record as read from one backup server.
type FoundDrill struct {
	Server string
	Record *catalog.DrillRecord
}

// LastDrill is what status says of a database's newest drill, from the
// authenticated drill records on the backup servers.
type LastDrill struct {
	catalog.DrillResult
	Age Duration `json:"age_seconds"` // now - the drill's end
	// Record says which server's record it was read from.
	Server string `json:"server"`
	// Unauthenticated counts drill records no worker's signature
	// verifies: they count for nothing.
	Unauthenticated int `json:"unauthenticated_records,omitempty"`
}

// readDrills reads the drill records of the databases of dbs with drills.
func readDrills(ctx context.Context, fsys catalog.FS, keys *catalog.Keys, server string, dbs []Target) ([]FoundDrill, map[string]string) {
	var out []FoundDrill
	broken := map[string]string{}
	for _, t := range dbs {
		if t.DrillEvery <= 0 {
			continue
		}
		r, err := catalog.LoadDrill(ctx, fsys, keys, t.Instance, t.Database)
		switch {
		case err != nil:
			broken[t.Instance+"/"+t.Database+" drill record"] = err.Error()
		case r != nil:
			out = append(out, FoundDrill{Server: server, Record: r})
		}
	}
	return out, broken
}

// judgeDrills sets each configured database's LastDrill from the drill
// records (any server's; the newest drill of a trusted one) and adds the
// reasons it is out of its objectives: no drill yet, the last one failed,
// missed rto, or is older than drill.max_age; with drill.from immutable,
// also when no drill from the immutable copy passed within drill.max_age
// (one from another source proves the backup servers' copies, not it).
func judgeDrills(now time.Time, dbs []Database, found []FoundDrill) {
	for i := range dbs {
		d := &dbs[i]
		if !d.Configured || d.DrillEvery <= 0 {
			continue
		}
		var last *LastDrill
		var proven *ImmutableProven
		untrusted := 0
		for _, f := range found {
			if f.Record.SourceInstance != d.Instance || f.Record.Database != d.Database {
				continue
			}
			if !f.Record.Trusted() {
				untrusted++
				continue
			}
			if l := f.Record.Last(); l != nil && (last == nil || l.At.After(last.At)) {
				last = &LastDrill{DrillResult: *l, Server: f.Server}
			}
			for _, r := range f.Record.Drills {
				if r.Immutable != nil && r.Outcome == catalog.DrillPassed && (proven == nil || r.At.After(proven.At)) {
					proven = &ImmutableProven{At: r.At, Store: r.Immutable.Store, Sequence: r.Sequence, WorkflowID: r.WorkflowID, RunID: r.RunID}
				}
			}
		}
		if proven != nil {
			if age := now.Sub(proven.At); age > 0 {
				proven.Age = Duration(age)
			}
		}
		d.ImmutableProven = proven
		switch {
		case last == nil:
			d.Reasons = append(d.Reasons, "no recovery drill recorded on any backup server")
		default:
			last.Unauthenticated = untrusted
			if age := now.Sub(last.At); age > 0 {
				last.Age = Duration(age)
			}
			switch {
			case last.Outcome != catalog.DrillPassed:
				d.Reasons = append(d.Reasons, fmt.Sprintf("the last recovery drill failed (%s)", last.ErrorType))
			case d.RTO > 0 && Duration(last.RTO) > d.RTO:
				d.Reasons = append(d.Reasons, fmt.Sprintf("the last recovery drill took %s to recover, above the RTO of %s", Duration(last.RTO), d.RTO))
			}
			if d.DrillMaxAge > 0 && last.Age > d.DrillMaxAge {
				d.Reasons = append(d.Reasons, fmt.Sprintf("the last recovery drill is %s old, above drill.max_age %s", last.Age, d.DrillMaxAge))
			}
		}
		if last == nil && untrusted > 0 {
			d.Reasons[len(d.Reasons)-1] += fmt.Sprintf(" (%d drill record(s) not authenticated, counted for nothing)", untrusted)
		}
		if d.DrillFrom == config.DrillFromImmutable {
			switch {
			case proven == nil && last != nil:
				d.Reasons = append(d.Reasons, "the immutable copy was never proven restorable: no drill from it passed")
			case d.DrillMaxAge > 0 && proven.Age > d.DrillMaxAge:
				d.Reasons = append(d.Reasons, fmt.Sprintf("the immutable copy was last proven restorable %s ago, above drill.max_age %s", proven.Age, d.DrillMaxAge))
			}
		}
		d.LastDrill = last
		d.OutOfObjectives = len(d.Reasons) > 0
	}
}
