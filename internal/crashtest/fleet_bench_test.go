package crashtest

import (
	"context"
	"sort"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/backupcycle/backupcycle/internal/sqlsim"
	"github.com/backupcycle/backupcycle/internal/tsql"
	"github.com/backupcycle/backupcycle/workflows"
)

// busy is, per set owner (instance@database), the union of the time the
// emulators spent in its statements and the storage in its stripe files:
// the work of a cycle, as opposed to its orchestration.
func (s *fleetSite) busy() map[string]time.Duration {
	spans := map[string][]op{}
	// Statements about a stripe file, a source database or its restored
	// copy belong to that set's owner.
	owners := map[string]string{} // instance|database -> owner
	for name := range s.instances {
		if name == "verify01" {
			continue
		}
		for _, d := range s.selected(name) {
			owners[name+"|"+d] = tsql.OwnerOf(name, d)
			owners["verify01|"+name+"_"+d+"_verify"] = tsql.OwnerOf(name, d)
		}
	}
	for name, in := range s.instances {
		for _, st := range in.Statements() {
			if st.End.IsZero() {
				continue
			}
			owner := owners[name+"|"+st.Database]
			if m := uncFile.FindStringSubmatch(st.SQL); m != nil {
				if p, ok := tsql.ParseStripeFileName(m[2]); ok {
					owner = p.Owner()
				}
			}
			if owner != "" {
				spans[owner] = append(spans[owner], op{owner: owner, start: st.Start, end: st.End})
			}
		}
	}
	// The copy is one span per set, from its first stripe file opened to
	// its last closed: in between it hashes and compares what it wrote.
	copies := map[string]op{}
	s.log.mu.Lock()
	for _, o := range s.log.ops {
		c, ok := copies[o.owner]
		if !ok || o.start.Before(c.start) {
			c.start = o.start
		}
		if o.end.After(c.end) {
			c.end = o.end
		}
		c.owner = o.owner
		copies[o.owner] = c
	}
	s.log.mu.Unlock()
	for owner, c := range copies {
		spans[owner] = append(spans[owner], c)
	}
	out := map[string]time.Duration{}
	for owner, ops := range spans {
		sort.Slice(ops, func(i, j int) bool { return ops[i].start.Before(ops[j].start) })
		var total time.Duration
		var cur op
		for i, o := range ops {
			switch {
			case i == 0:
				cur = o
			case o.start.After(cur.end):
				total += cur.end.Sub(cur.start)
				cur = o
			case o.end.After(cur.end):
				cur.end = o.end
			}
		}
		total += cur.end.Sub(cur.start)
		out[owner] = total
	}
	return out
}

// selected are the user databases of a source instance, minus Scratch.
func (s *fleetSite) selected(instance string) []string {
	var out []string
	for _, f := range s.dbNames[instance] {
		if f != "Scratch" {
			out = append(out, f)
		}
	}
	return out
}

// BenchmarkFleet200 runs the Fleet over 200 tiny databases on two
// instances and reports cycles per minute and the orchestration overhead
// per cycle: its wall time (child start to end) minus the time the
// emulators and the storage spent on its set.
func BenchmarkFleet200(b *testing.B) {
	srv := sharedTemporal(b)
	c := dial(b, srv)
	for i := 0; i < b.N; i++ {
		s := newFleet200(b)
		s.worker(b, c)
		res, _, wall := runFleet(b, c, s)
		ids, overhead, inside := verifiedCycles(b, s, res)
		cycles := len(ids)
		b.ReportMetric(float64(cycles)/wall.Minutes(), "cycles/min")
		b.ReportMetric((overhead / time.Duration(cycles)).Seconds(), "overhead-s/cycle")
		b.ReportMetric((inside / time.Duration(cycles)).Seconds(), "work-s/cycle")
	}
}

// newFleet200 is the fleet site of 200 small databases, four cycles at a
// time on each instance and backup server.
func newFleet200(b *testing.B) *fleetSite {
	s := newFleetSite(b, 100, "")
	for j := range s.cfg.BackupServers {
		s.cfg.BackupServers[j].MaxConcurrent = 4
	}
	for j := range s.cfg.SQLInstances {
		s.cfg.SQLInstances[j].MaxConcurrent = 4
	}
	return s
}

// verifiedCycles are the workflow ids of the fleet run's 200 verified
// cycles (it fails with fewer) and the orchestration overhead and the work
// they took in all: each one's wall time as the Fleet saw it (the child
// started to its result) minus its work, the time the emulators and the
// storage spent on its set (fleetSite.busy).
func verifiedCycles(b *testing.B, s *fleetSite, res workflows.FleetResult) (ids []string, overhead, work time.Duration) {
	busy := s.busy()
	for _, o := range res.Outcomes {
		if o.Outcome != workflows.OutcomeVerified {
			continue
		}
		ids = append(ids, o.WorkflowID)
		w := busy[tsql.OwnerOf(o.Instance, o.Database)]
		work += w
		overhead += o.Duration - w
	}
	if len(ids) != 200 {
		b.Fatalf("%d cycles verified, want 200: %v", len(ids), res.Counts)
	}
	return ids, overhead, work
}

// runFleet runs the Fleet of s to its end: its result, run and wall time.
func runFleet(b *testing.B, c client.Client, s *fleetSite) (workflows.FleetResult, client.WorkflowRun, time.Duration) {
	began := time.Now()
	run, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: "fleet-" + s.tq, TaskQueue: s.tq},
		workflows.FleetName, workflows.FleetInput{})
	if err != nil {
		b.Fatal(err)
	}
	var res workflows.FleetResult
	if err := run.Get(context.Background(), &res); err != nil {
		b.Fatal(err)
	}
	return res, run, time.Since(began)
}

// BenchmarkCycle1GiB is one cycle of a 1 GiB database: the orchestration
// overhead (wall time minus the time inside SQL and the copy) as a
// percentage of the wall time.
func BenchmarkCycle1GiB(b *testing.B) {
	srv := sharedTemporal(b)
	c := dial(b, srv)
	for i := 0; i < b.N; i++ {
		s := newFleetSite(b, 1, "")
		name, in := s.source(0)
		if err := in.CreateDatabase(sqlsim.DatabaseSpec{Name: "Big", Size: 1 << 30, DataFiles: 2}); err != nil {
			b.Fatal(err)
		}
		s.dbNames[name] = append(s.dbNames[name], "Big")
		s.worker(b, c)
		began := time.Now()
		run, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: workflows.CycleWorkflowID(name, "Big"), TaskQueue: s.tq},
			workflows.BackupCycleName, workflows.CycleInput{Database: "Big", Instance: name})
		if err != nil {
			b.Fatal(err)
		}
		if err := run.Get(context.Background(), nil); err != nil {
			b.Fatal(err)
		}
		wall := time.Since(began)
		w := s.busy()[tsql.OwnerOf(name, "Big")]
		b.ReportMetric(100*float64(wall-w)/float64(wall), "overhead-%")
		b.ReportMetric((wall - w).Seconds(), "overhead-s")
		b.ReportMetric(wall.Seconds(), "wall-s")
	}
}
