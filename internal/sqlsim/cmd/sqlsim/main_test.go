package main

import (
	"strings"
	"testing"
)

func TestParseDB(t *testing.T) {
	spec, err := parseDB("Sales:2GiB:4files")
	if err != nil || spec.Name != "Sales" || spec.Size != 2<<30 || spec.DataFiles != 4 {
		t.Fatalf("parseDB = %+v, %v", spec, err)
	}
	spec, err = parseDB("Tiny")
	if err != nil || spec.Size != 64<<20 || spec.DataFiles != 1 {
		t.Fatalf("parseDB defaults = %+v, %v", spec, err)
	}
	for _, bad := range []string{":1GiB", "X:lots", "X:1GiB:zero", "X:1GiB:0", "X:1:2:3"} {
		if _, err := parseDB(bad); err == nil {
			t.Errorf("parseDB(%q) accepted", bad)
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"1048576": 1 << 20, "512KiB": 512 << 10, "100MiB": 100 << 20, "2GiB": 2 << 30, "1GB": 1e9, "0": 0, "1.5MiB": 3 << 19} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	if _, err := parseSize("fast"); err == nil {
		t.Error("parseSize accepted junk")
	}
}

func TestRunNeedsDataDir(t *testing.T) {
	err := run([]string{"--listen", "127.0.0.1:0"})
	if err == nil || !strings.Contains(err.Error(), "--data is required") {
		t.Fatalf("run without --data: %v", err)
	}
	err = run([]string{"--data", t.TempDir(), "--share", "nodir"})
	if err == nil || !strings.Contains(err.Error(), "PREFIX=DIR") {
		t.Fatalf("run with a bad --share: %v", err)
	}
}
