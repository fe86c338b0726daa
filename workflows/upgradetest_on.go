//go:build upgradetest

package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"
)

// UpgradeTestChange is the change id of the workflow change that only the
// "new" worker build of the stack's rolling-upgrade test carries (go build
// -tags upgradetest): a change made the way every change to workflow code
// is, behind workflow.GetVersion, so that this build can take over the
// cycles an older build started and the test can tell from a history which
// build ran it past the point.
const UpgradeTestChange = "upgrade-test-step"

// upgradeTestStep records the version marker and, on the new path, a short
// timer: a command that no older build issues.
func upgradeTestStep(ctx workflow.Context) {
	if workflow.GetVersion(ctx, UpgradeTestChange, workflow.DefaultVersion, 1) == 1 {
		// A cancelled cycle ends at its next activity; the timer has no
		// outcome to report.
		_ = workflow.Sleep(ctx, time.Millisecond)
	}
}
