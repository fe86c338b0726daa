package plan

import (
	"strings"
	"testing"
)

func TestProofSpaceOf(t *testing.T) {
	const data, log = 3 << 30, 1 << 30
	for _, tc := range []struct {
		mode   string
		keep   bool
		copies int
		always bool
		says   string
	}{
		{"", false, 1, false, "during the cycle"},
		{"", true, 1, true, "keep_verify_db"},
		{"standby", false, 2, true, "both at once, permanently"},
		{"standby", true, 2, true, "both at once, permanently"},
		{"nightly", false, 1, false, "scheduled apart"},
		{"nightly", true, 2, true, "beside it"},
	} {
		s := ProofSpaceOf(tc.mode, tc.keep, data, log)
		if s.Copies != tc.copies || s.PeakBytes != int64(tc.copies)*(data+log) || s.Permanently != tc.always || !strings.Contains(s.String(), tc.says) {
			t.Errorf("ProofSpaceOf(%q, keep %v) = %+v (%s), want %d copies, permanently %v, saying %q", tc.mode, tc.keep, s, s, tc.copies, tc.always, tc.says)
		}
	}
}
