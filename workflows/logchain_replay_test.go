package workflows

import (
	"path/filepath"
	"testing"
)

// Determinism guard for the log chain: runs of the LogChain workflow on
// the embedded server (recorded by the end-to-end test of package
// activities with BACKUPCYCLE_RECORD_HISTORY=1: a first run, which asks
// for the full that starts the chain, takes its log backups, copies them
// and continues as new) must replay against the current workflow code.
// logchain_first_run_unversioned.json was recorded before the drain waited
// for the copy its last tick made due (workflow.GetVersion
// "logchain-drain-due-copy").
func TestLogChainHistoriesReplay(t *testing.T) {
	files, err := filepath.Glob("testdata/logchain_*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 2 {
		t.Fatalf("found %d recorded log chain histories in testdata, want 2", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			if err := ReplayHistoryFile(f); err != nil {
				t.Fatalf("replay %s: %v", f, err)
			}
		})
	}
}
