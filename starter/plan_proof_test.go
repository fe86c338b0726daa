package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/backupcycle/backupcycle/internal/plan"
	"github.com/backupcycle/backupcycle/starter/client"
)

// The plan says what the log proof takes on the verification instance:
// with a size, the bytes of both copies; without, how many copies.
func TestPlanSaysTheLogProofSpace(t *testing.T) {
	for _, tc := range []struct {
		size int64
		want string
	}{
		{2 << 30, "log proof: 2 copies (log_proof standby) of 2.0 GiB each: 4.0 GiB; the standby copy stays restored beside the cycle's copy"},
		{0, "log proof: standby: 2 copies at once on verify01"},
	} {
		p := client.CyclePlan{Database: "sql01/Sales", VerifyInstance: "verify01", ProofSpace: plan.ProofSpaceOf("standby", false, tc.size, 0)}
		var out bytes.Buffer
		writePlan(&out, p, tc.size, nil)
		if !strings.Contains(out.String(), tc.want) {
			t.Errorf("size %d: the plan does not say %q:\n%s", tc.size, tc.want, out.String())
		}
	}
	var out bytes.Buffer
	writePlan(&out, client.CyclePlan{Database: "sql01/Sales", ProofSpace: plan.ProofSpaceOf("", false, 1<<30, 0)}, 1<<30, nil)
	if strings.Contains(out.String(), "log proof") {
		t.Errorf("a database without log backups gets a log proof line:\n%s", out.String())
	}
}
