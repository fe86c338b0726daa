package evidence

import (
	"errors"
	"fmt"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// SetRecord is the record of verified set m as server holds it: manifest
// is the manifest file there (its bytes hashed as read), then every stripe
// with the size and SHA-256 the copy step checked; the restore proof, the
// CHECKDB that ran on that restore and the sanity checks that held on it,
// each step's time; worker is the build writing it.
func SetRecord(server string, m *catalog.Manifest, manifest File, worker string) (*Record, error) {
	if !m.Verified() || m.Header == nil || m.Proof == nil {
		return nil, fmt.Errorf("set %d of %s/%s is %s without a restore proof: only a verified set has evidence", m.Sequence, m.SourceInstance, m.Database, m.State)
	}
	r := &Record{
		Kind: KindSet, Server: server, Instance: m.SourceInstance, Database: m.Database,
		RecoveryPoint: m.TakenAt().UTC(),
		Set: &Set{Sequence: m.Sequence, BackupSetGUID: m.Header.BackupSetGUID, FirstLSN: m.Header.FirstLSN, LastLSN: m.Header.LastLSN,
			TakenAt: m.TakenAt().UTC()},
		Files:      []File{manifest},
		WorkflowID: m.WorkflowID, RunID: m.RunID, Worker: worker,
	}
	if m.Differential != nil {
		r.Set.Base = m.Differential.Sequence
	}
	for _, s := range m.Stripes {
		if s.SHA256 == "" {
			return nil, errors.New("stripe " + s.Name + " has no SHA-256 in its manifest")
		}
		r.Files = append(r.Files, File{Name: s.Name, Size: s.Size, SHA256: s.SHA256})
	}
	p := m.Proof
	r.Restore = &Restore{Instance: p.VerifyInstance, Database: p.VerifyDatabase, RestoreHistoryID: p.RestoreHistoryID, BackupSetGUID: p.BackupSetGUID}
	cmd, err := tsql.VerifyCheckDB(p.VerifyDatabase, m.Sequence)
	if err != nil {
		return nil, err
	}
	// The proof is written only after CHECKDB ran clean on that restore.
	r.CheckDB = &CheckDB{Command: cmd, Result: "clean: no errors reported", At: p.CheckedAt.UTC()}
	if sp := m.SanityProof; sp != nil {
		r.Sanity = &Sanity{Checks: sp.Checks, RanAs: sp.RanAs, Passed: sp.Passed}
	}
	if len(m.Timings) > 0 {
		r.Timings = map[string]float64{}
		for step, t := range m.Timings {
			r.Timings[string(step)] = t.DurationSeconds
		}
	}
	return r, nil
}
