package evidence

import (
	"fmt"
	"slices"
	"sort"
	"time"
)

// Report answers an auditor's questions per database over a period, from
// records that verified (Result.Verified): when was it last proven
// restorable, how often in the period, did each drill meet the RTO, and
// the proven recovery point over time.
type Report struct {
	From      time.Time        `json:"from"`
	To        time.Time        `json:"to"`
	Databases []DatabaseReport `json:"databases"`
}

// DatabaseReport is one database's answer.
type DatabaseReport struct {
	Instance string `json:"instance"`
	Database string `json:"database"`
	// Servers are the backup servers whose ledgers hold its records.
	Servers []string `json:"servers"`
	// LastProven is the newest proof at or before To, of any kind, and
	// LastRecoveryPoint what it proved restorable (zero: never proven).
	LastProven        time.Time `json:"last_proven,omitzero"`
	LastKind          Kind      `json:"last_kind,omitempty"`
	LastRecoveryPoint time.Time `json:"last_recovery_point,omitzero"`
	// Sets, LogProofs and Drills count the proofs in the period, each
	// once however many servers recorded it.
	Sets      int `json:"sets"`
	LogProofs int `json:"log_proofs"`
	// DrillResults are the drills in the period, oldest first; MetRTO and
	// MissedRTO count them.
	DrillResults []DrillLine `json:"drills"`
	MetRTO       int         `json:"drills_met_rto"`
	MissedRTO    int         `json:"drills_missed_rto"`
	// Points are every proof in the period, oldest first: the chart.
	Points []Point `json:"points"`
}

// DrillLine is one drill of the period.
type DrillLine struct {
	At               time.Time `json:"at"`
	RecoveryPoint    time.Time `json:"recovery_point,omitzero"`
	RTOSeconds       float64   `json:"rto_seconds"`
	TargetRTOSeconds float64   `json:"target_seconds"`
	MetRTO           bool      `json:"met_rto"`
	Passed           bool      `json:"passed"`
	// Immutable is the immutable copy it restored from; nil: the backup
	// servers.
	Immutable *ImmutableSource `json:"immutable,omitempty"`
}

// Point is one proof: when, of what kind, and the recovery point it proved.
type Point struct {
	At            time.Time `json:"at"`
	Kind          Kind      `json:"kind"`
	RecoveryPoint time.Time `json:"recovery_point"`
}

// proofKey identifies one proof however many ledgers recorded it.
func proofKey(r *Record) string {
	switch {
	case r.Kind == KindSet && r.Set != nil:
		return fmt.Sprintf("set %d %s", r.Set.Sequence, r.Set.BackupSetGUID)
	case r.Kind == KindLogProof && r.LogProof != nil:
		return fmt.Sprintf("logproof %d %d %s", r.LogProof.Chain, r.LogProof.AppliedThrough, r.RecoveryPoint)
	}
	return fmt.Sprintf("%s %s %s %s", r.Kind, r.WorkflowID, r.RunID, r.RecoveryPoint)
}

// Summarize builds the report of the period [from, to] from verified
// records of any ledgers.
func Summarize(records []Record, from, to time.Time) Report {
	type dbKey struct{ instance, database string }
	byDB := map[dbKey]*DatabaseReport{}
	seen := map[dbKey]map[string]bool{}
	sorted := append([]Record(nil), records...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].At.Before(sorted[j].At) })
	for i := range sorted {
		r := &sorted[i]
		k := dbKey{r.Instance, r.Database}
		d := byDB[k]
		if d == nil {
			d = &DatabaseReport{Instance: r.Instance, Database: r.Database}
			byDB[k], seen[k] = d, map[string]bool{}
		}
		if !slices.Contains(d.Servers, r.Server) {
			d.Servers = append(d.Servers, r.Server)
		}
		if r.At.After(to) || seen[k][proofKey(r)] {
			continue
		}
		seen[k][proofKey(r)] = true
		proven := r.Kind != KindDrill || r.Drill != nil && r.Drill.Passed
		if proven && !r.At.Before(d.LastProven) {
			d.LastProven, d.LastKind, d.LastRecoveryPoint = r.At, r.Kind, r.RecoveryPoint
		}
		if r.At.Before(from) {
			continue
		}
		switch r.Kind {
		case KindSet:
			d.Sets++
		case KindLogProof:
			d.LogProofs++
		case KindDrill:
			if r.Drill == nil {
				continue
			}
			l := DrillLine{At: r.At, RecoveryPoint: r.RecoveryPoint, RTOSeconds: r.Drill.RTOSeconds,
				TargetRTOSeconds: r.Drill.TargetRTOSeconds, MetRTO: r.Drill.MetRTO, Passed: r.Drill.Passed, Immutable: r.Drill.Immutable}
			d.DrillResults = append(d.DrillResults, l)
			if l.MetRTO {
				d.MetRTO++
			} else {
				d.MissedRTO++
			}
		}
		if proven {
			d.Points = append(d.Points, Point{At: r.At, Kind: r.Kind, RecoveryPoint: r.RecoveryPoint})
		}
	}
	rep := Report{From: from, To: to}
	for _, d := range byDB {
		sort.Strings(d.Servers)
		rep.Databases = append(rep.Databases, *d)
	}
	sort.Slice(rep.Databases, func(i, j int) bool {
		a, b := rep.Databases[i], rep.Databases[j]
		if a.Instance != b.Instance {
			return a.Instance < b.Instance
		}
		return a.Database < b.Database
	})
	return rep
}
