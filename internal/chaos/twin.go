package chaos

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
	"github.com/backupcycle/backupcycle/internal/tsql"
	"github.com/backupcycle/backupcycle/workflows"
)

// A set's files start with <instance>@<db>_<seq:08d>_, and so do every file
// of a database named <db>_<seq:08d> on the same instance (DW_20240131 and
// the like are ordinary names): once, cancelling set N of a database
// deleted every file of the database named like it. Before a run of sales
// (whose lower-case name its files carry as it is) that draws Plan.Twin,
// the simulation creates sales_<N:08d>, N the number the run's set is about
// to take, on sql01, whose selection sales* makes it part of the fleet, and
// runs one cycle of it to a verified set on both servers. The run then
// cancels, fails or verifies set N of sales beside it, and retention later
// removes that set: I1 and I3 guard the twin's set all along.

// TwinStats counts the twins made and how the set of sales they were named
// after ended.
type TwinStats struct {
	Made     int            // twins created and verified
	Outcomes map[string]int // state of sales's set N after its run: cancelled, failed, verified, ...
	// Removed counts the sets of sales named like a twin that retention
	// has removed since, the twin's set still verified on both servers.
	Removed int
	seqs    map[int64]string // set number of sales -> its twin
}

func (t TwinStats) String() string {
	return fmt.Sprintf("%d databases named like the set their run made, verified first; that set then: %s; %d of those sets since removed by retention beside their twin's verified set",
		t.Made, counts(t.Outcomes), t.Removed)
}

// twinsRemoved counts the sets of sales a twin is named after that no
// manifest lists any more (retention removed them) while the twin's set is
// verified on both servers.
func (s *Sim) twinsRemoved() int {
	files, _ := s.C.scan()
	n := 0
	for seq, twin := range s.Twins.seqs {
		gone := true
		for _, mf := range files {
			if mf.ID.Instance == Sql01 && mf.ID.Database == SalesDB && mf.ID.Sequence == seq {
				gone = false
			}
		}
		if gone && s.verifiedOnBoth(twin) {
			n++
		}
	}
	return n
}

// twin creates and verifies the database named like the set r is about to
// make, when r draws one and the estate lets sql01's sets verify.
func (s *Sim) twin(ctx context.Context, r *run) error {
	p := r.plan
	if !p.Twin || p.Target != (Target{Sql01, SalesDB}) {
		return nil
	}
	if p.Entry == EntryStarter && p.Pick%3 == 0 && s.unfinished(p) > 0 {
		r.note("no twin: the run resumes a set of %s", p.Target)
		return nil
	}
	if major(p.Estate.BuildOf(Verify01)) < major(p.Estate.BuildOf(Sql01)) {
		r.note("no twin: %s cannot verify %s's sets in this estate", Verify01, Sql01)
		return nil
	}
	seq, err := s.nextSales(ctx)
	if err != nil {
		r.note("no twin: the next sequence of %s not known: %v", p.Target, err)
		return nil
	}
	name := fmt.Sprintf("%s_%08d", SalesDB, seq)
	if !s.verifiedOnBoth(name) {
		// Made for an earlier run that did not take its number (it
		// resumed a set, or failed before): it is verified again if need be.
		if _, err := s.F.Instances[Sql01].DatabaseFiles(name); err != nil {
			if err := s.F.Instances[Sql01].CreateDatabase(sqlsim.DatabaseSpec{Name: name, Size: s.F.opts.DBSize / 2, DataFiles: 1}); err != nil {
				r.note("no twin: create %s: %v", name, err)
				return nil
			}
		}
		rctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		if _, err := s.F.Starter().RunCycle(rctx, workflows.CycleInput{Database: name, Instance: Sql01}); err != nil || !s.verifiedOnBoth(name) {
			r.note("twin %s not verified on both servers: %v", name, err)
			return nil
		}
	}
	r.twin, r.twinSeq = name, seq
	if s.Twins.Outcomes == nil {
		s.Twins.Outcomes, s.Twins.seqs = map[string]int{}, map[int64]string{}
	}
	s.Twins.seqs[seq] = name
	s.Twins.Made++
	r.note("twin %s verified on both servers before set %d of %s", name, seq, p.Target)
	return nil
}

// verifiedOnBoth reports whether a set of database name on sql01 is
// verified on both servers.
func (s *Sim) verifiedOnBoth(name string) bool {
	files, _ := s.C.scan()
	on := map[int64]map[string]bool{}
	for _, mf := range files {
		if mf.ID.Instance == Sql01 && mf.ID.Database == name && mf.M.State == catalog.StateVerified {
			if on[mf.ID.Sequence] == nil {
				on[mf.ID.Sequence] = map[string]bool{}
			}
			on[mf.ID.Sequence][mf.Server] = true
		}
	}
	for _, servers := range on {
		if len(servers) == len(Servers) {
			return true
		}
	}
	return false
}

// nextSales is the number the next set of sales takes with `sequence:
// table`: one above the table in the database and above every number on
// the backup servers.
func (s *Sim) nextSales(ctx context.Context) (int64, error) {
	db, err := s.F.DB(Sql01)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// No table before the first cycle of sales (208): 0.
	var table int64
	q := fmt.Sprintf("SELECT Number FROM [%s].[%s].[%s] WHERE ID = 1", SalesDB, tsql.SequenceSchema, tsql.SequenceTable)
	_ = db.QueryRowContext(qctx, q).Scan(&table)
	highest := int64(0)
	owner := tsql.NamesOf(Sql01, SalesDB).Owner()
	for _, srv := range Servers {
		entries, err := os.ReadDir(s.F.ShareDir(srv))
		if err != nil {
			return 0, err
		}
		for _, e := range entries {
			pn, ok := tsql.ParseStripeFileName(e.Name())
			if !ok {
				pn, ok = tsql.ParseManifestFileName(e.Name())
			}
			if ok && pn.Owner() == owner {
				highest = max(highest, pn.Sequence)
			}
		}
	}
	return max(table, highest) + 1, nil
}

// twinMet records how the set the run's twin is named after ended.
func (s *Sim) twinMet(r *run) {
	if r.twin == "" {
		return
	}
	// A failed or cancelled manifest on one server says how it ended;
	// else the furthest state.
	prio := func(st catalog.State) int {
		if st == catalog.StateFailed || st == catalog.StateCancelled {
			return 10
		}
		return st.Rank()
	}
	files, _ := s.C.scan()
	state, best := "absent", -2
	for _, mf := range files {
		if mf.ID.Instance == Sql01 && mf.ID.Database == SalesDB && mf.ID.Sequence == r.twinSeq && prio(mf.M.State) > best {
			state, best = string(mf.M.State), prio(mf.M.State)
		}
	}
	s.Twins.Outcomes[state]++
	r.note("set %d of %s beside twin %s: %s", r.twinSeq, r.plan.Target, r.twin, state)
}
