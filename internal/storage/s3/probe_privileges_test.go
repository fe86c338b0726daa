package s3

import (
	"strings"
	"testing"
	"time"
)

// A right that undoes the lock of the probe's mode fails the probe; any
// other is a warning in its verdict and the store stays immutable.
func TestAddPrivilegesFailsOnlyOnARightThatUndoesTheLock(t *testing.T) {
	checks := []PrivilegeCheck{
		{Name: PrivilegeDeleteBucket, Checked: true, Detail: "refused: AccessDenied"},
		{Name: PrivilegeBucketPolicy, Checked: true, Excess: true, Detail: "allowed: the same policy was put back"},
	}
	for _, tc := range []struct {
		mode      string
		immutable bool
	}{{ModeCompliance, true}, {ModeGovernance, false}} {
		r := ProbeResult{Mode: tc.mode, Immutable: true, Checks: []ProbeCheck{{Name: "delete the locked version", Held: true}}}
		r.AddPrivileges("backupworker", checks, time.Millisecond)
		says := "the key backupworker may " + PrivilegeBucketPolicy
		if r.Immutable != tc.immutable || !strings.Contains(r.Summary(), says) || !strings.Contains(r.Summary(), "s3:PutBucketPolicy") {
			t.Errorf("%s: immutable %v, verdict %q; want immutable %v, naming what the key may do and the action to deny", tc.mode, r.Immutable,
				r.Summary(), tc.immutable)
		}
		if got := len(r.Warnings); tc.immutable != (got == 1) {
			t.Errorf("%s: warnings %q", tc.mode, r.Warnings)
		}
	}
}
