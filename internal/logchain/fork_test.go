package logchain

import "testing"

// A backup continues a chain when its recovery path passes through the
// chain's end: on the same fork, or crossing from the chain's fork at or
// after its end, or onto the chain's fork at or before it.
func TestForkContinues(t *testing.T) {
	const a, b, c = "AAAA", "BBBB", "CCCC"
	for _, tc := range []struct {
		name string
		f    Fork
		fork string
		end  LSN
		want bool
	}{
		{"same fork", Fork{a, a, ""}, a, "100", true},
		{"same fork, other case", Fork{"aaaa", "aaaa", ""}, a, "100", true},
		{"another fork", Fork{a, a, ""}, b, "100", false},
		{"crossing after the chain's end", Fork{a, b, "150"}, a, "100", true},
		{"crossing at the chain's end", Fork{a, b, "100"}, a, "100", true},
		{"crossing before the chain's end: a restore to an earlier point", Fork{a, b, "80"}, a, "100", false},
		{"crossing onto the chain's fork before its end", Fork{a, b, "80"}, b, "100", true},
		{"crossing onto the chain's fork after its end", Fork{a, b, "120"}, b, "100", false},
		{"crossing between two other forks", Fork{a, b, "80"}, c, "100", false},
		{"unknown backup fork", Fork{}, a, "100", true},
		{"unknown chain fork", Fork{a, a, ""}, "", "100", true},
	} {
		if got := tc.f.Continues(tc.fork, tc.end); got != tc.want {
			t.Errorf("%s: %+v continues (%s, %s) = %v, want %v", tc.name, tc.f, tc.fork, tc.end, got, tc.want)
		}
	}
}
