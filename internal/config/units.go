package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	// Longest suffixes first so "MiB" is not read as "B".
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"B", 1},
}

// ParseSize reads a byte count: 65536, 64KiB, 4MiB, 2GiB, 1TiB (binary) or
// 4MB, 1GB (decimal). A "/s" suffix is accepted for rates.
func ParseSize(s string) (Size, error) {
	t := strings.TrimSpace(s)
	t = strings.TrimSuffix(t, "/s")
	if t == "" {
		return 0, fmt.Errorf("empty size")
	}
	mult := int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(t, u.suffix) {
			mult = u.mult
			t = strings.TrimSpace(strings.TrimSuffix(t, u.suffix))
			break
		}
	}
	n, err := strconv.ParseFloat(t, 64)
	if err != nil || n < 0 || math.IsNaN(n) || math.IsInf(n, 0) {
		return 0, fmt.Errorf("%q is not a size: use bytes (65536) or a unit (64KiB, 4MiB, 2GiB)", s)
	}
	v := n * float64(mult)
	if v > math.MaxInt64/2 {
		return 0, fmt.Errorf("%q is too large", s)
	}
	if v != math.Trunc(v) {
		return 0, fmt.Errorf("%q is not a whole number of bytes", s)
	}
	return Size(v), nil
}

// String prints the size in the largest binary unit it reaches: exactly
// when it divides (4MiB), else with one decimal (46.9GiB).
func (s Size) String() string {
	units := []struct {
		suffix string
		mult   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}}
	for _, u := range units {
		if int64(s) >= u.mult {
			if int64(s)%u.mult == 0 {
				return fmt.Sprintf("%d%s", int64(s)/u.mult, u.suffix)
			}
			return fmt.Sprintf("%.1f%s", float64(s)/float64(u.mult), u.suffix)
		}
	}
	return fmt.Sprintf("%d bytes", int64(s))
}

// ParseDuration is time.ParseDuration plus a leading whole number of days
// ("7d", "1d12h"), which retention settings need.
func ParseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	var days int64
	if i := strings.IndexByte(t, 'd'); i > 0 {
		n, err := strconv.ParseInt(t[:i], 10, 64)
		if err != nil || n < 0 || n > 100000 {
			return 0, fmt.Errorf("%q is not a duration: use 30s, 15m, 2h or 7d", s)
		}
		days, t = n, t[i+1:]
	}
	var rest time.Duration
	if t != "" {
		d, err := time.ParseDuration(t)
		if err != nil {
			return 0, fmt.Errorf("%q is not a duration: use 30s, 15m, 2h or 7d", s)
		}
		rest = d
	} else if days == 0 {
		return 0, fmt.Errorf("%q is not a duration: use 30s, 15m, 2h or 7d", s)
	}
	return time.Duration(days)*24*time.Hour + rest, nil
}
