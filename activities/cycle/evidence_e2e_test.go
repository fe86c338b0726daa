package cycle_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/backupcycle/backupcycle/activities/cycle"
	"github.com/backupcycle/backupcycle/internal/evidence"
	"github.com/backupcycle/backupcycle/internal/sitetest"
	"github.com/backupcycle/backupcycle/internal/storage/local"
	"github.com/backupcycle/backupcycle/workflows"
)

// A verified cycle appends the set's record to the evidence ledger of both
// servers holding it, signed, chained, naming the set, its files, the
// restore proof, the CHECKDB and the sanity checks; the ledger verifies
// until a stripe is changed by hand, and then names that set's record.
func TestE2EVerifiedCycleAppendsEvidence(t *testing.T) {
	const db = "Sales"
	f := cycle.NewSQLFixtureOf(t, sitetest.Options{Database: db, ManifestKeys: []string{"k1"}, Evidence: true})
	e := newE2E(t, f, nil)
	var results []workflows.CycleResult
	for i := 0; i < 2; i++ {
		res, _, err := e.cycle(db)
		if err != nil {
			t.Fatalf("cycle %d: %v", i+1, err)
		}
		if len(res.Evidence) != 2 || len(res.Warnings) != 0 {
			t.Fatalf("cycle %d: evidence %+v, warnings %v; want a record on each holder", i+1, res.Evidence, res.Warnings)
		}
		for _, r := range res.Evidence {
			if r.Seq != int64(i+1) {
				t.Errorf("cycle %d: record %d on %s, want %d", i+1, r.Seq, r.Server, i+1)
			}
		}
		results = append(results, res)
	}
	keys, err := f.Config().Evidence.VerifyKeys()
	if err != nil {
		t.Fatal(err)
	}
	verify := func(server string) evidence.Result {
		t.Helper()
		st, err := local.Open(context.Background(), f.Dir(server))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		res, err := evidence.Verify(context.Background(), st, "sql01", db, evidence.Options{Keys: keys, Server: server})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for _, server := range []string{"bak01", "bak02"} {
		res := verify(server)
		if !res.OK() || res.Records != 2 || len(res.Verified) != 2 {
			t.Fatalf("ledger on %s: %+v", server, res)
		}
		for i, r := range res.Verified {
			m := f.Manifest(server, results[i].Sequence)
			if r.Kind != evidence.KindSet || r.Set.Sequence != m.Sequence || r.Set.BackupSetGUID != m.Header.BackupSetGUID ||
				r.Restore.BackupSetGUID != m.Proof.BackupSetGUID || r.Restore.RestoreHistoryID != m.Proof.RestoreHistoryID ||
				!strings.Contains(r.CheckDB.Command, m.Proof.VerifyDatabase) || r.Sanity == nil || !r.Sanity.Passed ||
				len(r.Files) != 1+len(m.Stripes) || r.Files[0].Name != m.FileName() || r.Worker == "" || r.Timings["checkdb"] <= 0 {
				t.Errorf("record %d on %s = %+v\nmanifest %+v", r.Seq, server, r, m)
			}
		}
	}

	// A stripe of the first set changed by hand on bak02, same size.
	m := f.Manifest("bak02", results[0].Sequence)
	p := filepath.Join(f.Dir("bak02"), m.Stripes[0].Name)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x01
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if res := verify("bak02"); len(res.Problems) != 1 || res.Problems[0].Seq != 1 || !strings.Contains(res.Problems[0].Why, m.Stripes[0].Name) {
		t.Errorf("after a stripe changed on bak02: %+v", res.Problems)
	}
	if res := verify("bak01"); !res.OK() {
		t.Errorf("bak01 untouched: %+v", res.Problems)
	}
}

// A nightly proof of the log chain appends its record to the ledger of the
// copy target, after the set's own record: the full it restored, the last
// log it applied and the recovery point that log reached.
func TestE2ENightlyProofAppendsEvidence(t *testing.T) {
	p := proofSiteWith(t, "nightly", "", func(o *sitetest.Options) { o.Evidence = true })
	out, last, err := p.nightlyAfter(2)
	if err != nil || !out.OK {
		t.Fatalf("NightlyProof: %+v, %v", out, err)
	}
	keys, err := p.f.Config().Evidence.VerifyKeys()
	if err != nil {
		t.Fatal(err)
	}
	st, err := local.Open(context.Background(), p.f.Dir("bak02"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	res, err := evidence.Verify(context.Background(), st, "sql01", "Ledger", evidence.Options{Keys: keys, Server: "bak02"})
	if err != nil || !res.OK() || len(res.Verified) != 2 {
		t.Fatalf("ledger on bak02: %+v, %v", res, err)
	}
	set, proof := res.Verified[0], res.Verified[1]
	if set.Kind != evidence.KindSet || proof.Kind != evidence.KindLogProof || proof.LogProof == nil || proof.LogProof.AppliedThrough != last ||
		proof.Set == nil || proof.Set.Sequence != out.Sequence || proof.Set.BackupSetGUID != set.Set.BackupSetGUID ||
		proof.Restore.Database != "Ledger_standby_proof" || !proof.RecoveryPoint.After(set.RecoveryPoint) || proof.Files[0] != set.Files[0] ||
		proof.WorkflowID == "" {
		t.Errorf("records: set %+v\nproof %+v", set, proof)
	}
}
