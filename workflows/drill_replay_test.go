package workflows

import (
	"testing"
)

// Determinism guard for recovers and drills: a drill of the demo's Sales
// to its latest point (three log backups) and the Recover it ran as its
// child, recorded on the embedded server before drills and recovers
// predicted their steps, must replay against the current workflow code.
// The prediction travels in activity results and the status, which adds
// no command; a change that adds or reorders one needs workflow.GetVersion.
// A drill from the immutable copy (staged, restored, unstaged: the
// drill-from-immutable version) is recorded too.
func TestRecoverAndDrillHistoriesReplay(t *testing.T) {
	for _, f := range []string{"testdata/drill_passed.json", "testdata/recover_of_drill.json", "testdata/drill_from_immutable.json"} {
		t.Run(f, func(t *testing.T) {
			if err := ReplayHistoryFile(f); err != nil {
				t.Fatalf("replay %s: %v", f, err)
			}
		})
	}
}
