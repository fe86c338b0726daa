package chaos

import "testing"

// A database whose cycles fail for a reason the run itself explains (the
// estate keeps verify01 from reading its sets, or a Web UI start typed the
// name with a blank and was refused, as it must be) is not stuck: such
// failures break a streak instead of adding to it, so only cycles that
// fail the same way with nothing to explain it count as a poisoned
// database (seed 20261201 run 126 reported HR poisoned after failures
// from an older verify01, a lost TDE certificate and blank-typed names).
func TestExplainedFailuresAreNoStreak(t *testing.T) {
	hr := Target{Instance: "sql02", Database: "HR"}
	s := &Sim{C: &Checker{}}
	fail := func(n int, unreadable, blank string) {
		r := &run{plan: Plan{Run: n, Target: hr, Blank: blank}, unreadable: unreadable}
		s.tally(r, []string{"failed InvalidConfig"})
	}
	fail(116, "verify01 without the TDE certificate", "")
	fail(119, "", "lead")
	fail(126, "", "")
	if n := len(s.C.later); n != 0 {
		t.Fatalf("%d poisoning checks queued after failures the runs explain; want none", n)
	}
	fail(127, "", "")
	fail(128, "", "")
	if n := len(s.C.later); n != 1 {
		t.Fatalf("%d poisoning checks queued after three unexplained failures in a row; want one", n)
	}
}
