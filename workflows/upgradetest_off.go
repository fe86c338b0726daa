//go:build !upgradetest

package workflows

import "go.temporal.io/sdk/workflow"

// upgradeTestStep issues no command: the product's builds are this one. The
// stack's rolling-upgrade test builds its "new" worker with -tags
// upgradetest (upgradetest_on.go).
func upgradeTestStep(workflow.Context) {}
