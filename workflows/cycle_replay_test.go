package workflows

import (
	"path/filepath"
	"testing"
)

// Determinism guard: histories of real cycles on the embedded server
// (recorded by the end-to-end tests of package activities with
// BACKUPCYCLE_RECORD_HISTORY=1) must replay against the current workflow
// code. A change that breaks running cycles fails here; shape changes need
// workflow.GetVersion.
func TestCycleHistoriesReplay(t *testing.T) {
	files, err := filepath.Glob("testdata/cycle_*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 5 {
		t.Fatalf("found %d recorded cycle histories in testdata, want the verified, failed and crash runs", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			if err := ReplayHistoryFile(f); err != nil {
				t.Fatalf("replay %s: %v", f, err)
			}
		})
	}
}
