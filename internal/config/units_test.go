package config

import (
	"testing"
	"time"
)

func TestParseSize(t *testing.T) {
	cases := []struct {
		in   string
		want Size
		ok   bool
	}{
		{"65536", 65536, true},
		{"64KiB", 64 << 10, true},
		{"4MiB", 4 << 20, true},
		{"4 MiB", 4 << 20, true},
		{"1.5GiB", 3 << 29, true},
		{"2GiB", 2 << 30, true},
		{"1TiB", 1 << 40, true},
		{"4MB", 4000000, true},
		{"200MiB/s", 200 << 20, true},
		{"512B", 512, true},
		{"0", 0, true},
		{"", 0, false},
		{"lots", 0, false},
		{"-1", 0, false},
		{"4XB", 0, false},
		{"1.5", 0, false}, // not a whole number of bytes
		{"99999999TiB", 0, false},
	}
	for _, c := range cases {
		got, err := ParseSize(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
}

func TestSizeString(t *testing.T) {
	for in, want := range map[Size]string{
		0: "0 bytes", 512: "512 bytes", 64 << 10: "64KiB", 4 << 20: "4MiB", 3000 * 2 << 20 * 8: "46.9GiB", 1 << 40: "1TiB",
	} {
		if got := in.String(); got != want {
			t.Errorf("Size(%d).String() = %q, want %q", int64(in), got, want)
		}
	}
}

func TestParseDuration(t *testing.T) {
	cases := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"30s", 30 * time.Second, true},
		{"2h", 2 * time.Hour, true},
		{"1h30m", 90 * time.Minute, true},
		{"7d", 7 * 24 * time.Hour, true},
		{"1d12h", 36 * time.Hour, true},
		{"0s", 0, true},
		{"", 0, false},
		{"d", 0, false},
		{"6 hours", 0, false},
		{"30", 0, false}, // a bare number has no unit: ambiguous
		{"xd", 0, false},
	}
	for _, c := range cases {
		got, err := ParseDuration(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
}
