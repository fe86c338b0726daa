package crashtest

import (
	"path/filepath"
	"testing"

	"github.com/backupcycle/backupcycle/workflows"
)

// Determinism guard: the histories of this package's crash and bad-input
// runs (recorded with BACKUPCYCLE_RECORD_HISTORY=1) must replay against the
// current workflow code; a change that breaks running cycles fails here.
func TestHistoriesReplay(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	// The worker crashes (3), the server restart and the bad inputs.
	if len(files) < 10 {
		t.Fatalf("found %d recorded histories in testdata, want the crash, restart and bad-input runs: "+
			"record them with BACKUPCYCLE_RECORD_HISTORY=1 go test ./internal/crashtest/", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			if err := workflows.ReplayHistoryFile(f); err != nil {
				t.Fatalf("replay %s: %v", f, err)
			}
		})
	}
}
