package plan

import (
	"strings"
	"testing"
)

func TestVersionRules(t *testing.T) {
	v := func(s string) Version {
		t.Helper()
		x, err := ParseVersion(s)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	for _, bad := range []string{"16", "16.0", "16.x.1", "16.0.4135.4.1"} {
		if _, err := ParseVersion(bad); err == nil {
			t.Errorf("ParseVersion(%q) accepted", bad)
		}
	}
	if got := v("13.0.4435.0").String(); got != "13.0.4435.0" {
		t.Errorf("String: %q", got)
	}
	if got := v("16.0.4135").Product(); got != "SQL Server 2022 (16.0.4135)" {
		t.Errorf("Product: %q", got)
	}

	cases := []struct {
		src, dst      string
		tdeCompressed bool
		want          string // "" restorable
	}{
		{"16.0.4135", "15.0.4385.2", false, "upgrade verify01 to SQL Server 2022"},
		{"15.0.4385", "16.0.4135.4", false, ""},
		{"16.0.4135", "16.0.1000.6", false, ""}, // a newer build of the same major restores
		{"15.0.4223", "15.0.4198.2", true, "patch verify01 to SQL Server 2019 CU16 (15.0.4223.1)"},
		{"15.0.4223", "15.0.4198.2", false, ""},
		{"15.0.4198", "15.0.4223.1", true, ""},
		{"15.0.4236", "15.0.2095.3", true, "KB5014298"}, // CU16 + GDR read by an RTM GDR build
		{"", "15.0.4198.2", true, ""},                   // unknown: not judged
	}
	for _, tc := range cases {
		why, fix := Incompatible(v(tc.src), v(tc.dst), tc.tdeCompressed, "verify01")
		if tc.want == "" {
			if why != "" {
				t.Errorf("%s -> %s (tde+compression %v): %q, want restorable", tc.src, tc.dst, tc.tdeCompressed, why)
			}
			continue
		}
		if !strings.Contains(why+" "+fix, tc.want) {
			t.Errorf("%s -> %s: %q / %q, want %q", tc.src, tc.dst, why, fix, tc.want)
		}
	}

	for s, want := range map[string]string{"13.0.4435.0": "SP1 CU4", "13.0.2204.0": "RTM CU7", "13.0.1745.2": "SP1 CU4",
		"13.0.4446.0": "", "13.0.2210.0": "", "13.0.6300.2": "", "15.0.4198.2": "CU16", "15.0.4223.1": "", "16.0.4135.4": ""} {
		why, fix := TDECompressionRisk(v(s))
		if (want == "") != (why == "") || !strings.Contains(fix, want) {
			t.Errorf("TDECompressionRisk(%s) = %q / %q, want fix naming %q", s, why, fix, want)
		}
	}
	for s, want := range map[string]int{"13.0.6300.2": DefaultMaxTransferSize, "14.0.3456.2": DefaultMaxTransferSize,
		"15.0.4033.1": DefaultMaxTransferSize, "15.0.4043.16": 0, "16.0.4135.4": 0, "": 0} {
		if got := TDEMaxTransferSize(v(s)); got != want {
			t.Errorf("TDEMaxTransferSize(%s) = %d, want %d", s, got, want)
		}
	}
}
