package status

import (
	"context"
	"fmt"
	"time"

	"github.com/backupcycle/backupcycle/internal/catalog"
)

// DrillObjectives are a database's drill settings status judges it by:
// drill.every (0: no drills) and drill.max_age.
type DrillObjectives struct {
	DrillEvery  Duration `json:"drill_every_seconds,omitempty"`
	DrillMaxAge Duration `json:"drill_max_age_seconds,omitempty"`
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
// missed rto, or is older than drill.max_age.
func judgeDrills(now time.Time, dbs []Database, found []FoundDrill) {
	for i := range dbs {
		d := &dbs[i]
		if !d.Configured || d.DrillEvery <= 0 {
			continue
		}
		var last *LastDrill
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
		}
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
		d.LastDrill = last
		d.OutOfObjectives = len(d.Reasons) > 0
	}
}
