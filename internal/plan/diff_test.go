package plan

import (
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/catalog"
)

// A differential's timings measure no full-size step: its BackupSize is
// the changes only, while its restore step restored its base too and its
// CHECKDB read the whole copy. The rates come from the fulls.
func TestFromManifestsLeavesDifferentialsOut(t *testing.T) {
	steps := map[catalog.Step]time.Duration{catalog.StepBackup: 100 * time.Second, catalog.StepRestore: 100 * time.Second,
		catalog.StepCheckDB: 100 * time.Second}
	full := verifiedSet(t, 1, 10*gb, 10*gb, false, steps) // 102.4 MB/s each
	diff := verifiedSet(t, 2, gb, gb, false, steps)       // 10.24 MB/s, were it a full
	diff.Differential = &catalog.DiffBase{Sequence: 1, BackupSetGUID: full.Header.BackupSetGUID, LSN: "1"}
	got := FromManifests(catalog.Of("sql01", "Sales"), []*catalog.Manifest{full, diff})
	for name, r := range map[string]StepRate{"backup": got.Backup, "restore": got.Restore, "checkdb": got.CheckDB} {
		if !near(r.MBps, 102.4) || r.Sequence != 1 {
			t.Errorf("%s %+v, want the full's 102.4 MB/s", name, r)
		}
	}
}
