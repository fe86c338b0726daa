package plan

import (
	"errors"
	"strings"
	"testing"
)

func TestAutoStripesReproducesTable2(t *testing.T) {
	// Seed 000 Table 2, "Balanced file and disk combinations": CPU cores, NICs
	// for backup, backup files (the LUN and data-file columns do not affect the
	// backup file count). Row "16 cores, 4 NICs" appears with 8 and with 16
	// files; the rule picks 16, the one that also matches files = cores.
	large := int64(2) << 40
	rows := []struct{ cores, nics, files int }{
		{2, 1, 2}, {4, 2, 4}, {4, 2, 4}, {8, 2, 8}, {8, 2, 8}, {16, 2, 8}, {16, 4, 16}, {16, 4, 16},
		{16, 4, 16}, {32, 4, 16}, {32, 8, 32}, {32, 8, 32}, {64, 8, 32}, {64, 16, 64},
	}
	for _, r := range rows {
		got, err := AutoStripes(large, r.nics, r.cores)
		if err != nil {
			t.Fatal(err)
		}
		if got != r.files {
			t.Errorf("AutoStripes(2 TB, %d NICs, %d cores) = %d, Table 2 says %d", r.nics, r.cores, got, r.files)
		}
		if err := CheckBalance(got, r.nics); err != nil {
			t.Errorf("auto count %d is not balanced over %d NICs: %v", got, r.nics, err)
		}
		if per := got / r.nics; per < MinFilesPerNIC || per > MaxFilesPerNIC {
			t.Errorf("%d files over %d NICs = %d per NIC, outside 2..4", got, r.nics, per)
		}
	}
}

func TestAutoStripesSizeAndLimits(t *testing.T) {
	tests := []struct {
		bytes       int64
		nics, cores int
		want        int
	}{
		{300 << 20, 1, 0, 2}, // demo database: 2 files on the one path
		{300 << 20, 4, 0, 8}, // small database, 4 NICs: 2 per NIC
		{2 << 40, 4, 0, 16},  // large, cores unknown: 4 per NIC
		{2 << 40, 4, 24, 12}, // 24 cores: 12 files (24/12 = 2), 3 per NIC
		{2 << 40, 16, 0, 64}, // 16 x 4 = 64, the SQL Server maximum
		{2 << 40, 20, 0, 60}, // 20 x 4 = 80 > 64 -> 20 x 3
		{2 << 40, 32, 0, 64}, // 32 x 2
		{2 << 40, 3, 2, 6},   // fewer cores than files: still 2 per NIC
	}
	for _, tt := range tests {
		got, err := AutoStripes(tt.bytes, tt.nics, tt.cores)
		if err != nil || got != tt.want {
			t.Errorf("AutoStripes(%d, %d NICs, %d cores) = %d, %v; want %d", tt.bytes, tt.nics, tt.cores, got, err, tt.want)
		}
	}
	for _, nics := range []int{0, 33} {
		if _, err := AutoStripes(1, nics, 0); err == nil {
			t.Errorf("AutoStripes with %d NICs accepted", nics)
		}
	}
}

func TestCheckBalance(t *testing.T) {
	ok := []struct{ stripes, nics int }{{1, 1}, {2, 1}, {8, 4}, {8, 8}, {64, 16}, {64, 1}}
	for _, c := range ok {
		if err := CheckBalance(c.stripes, c.nics); err != nil {
			t.Errorf("CheckBalance(%d, %d) = %v", c.stripes, c.nics, err)
		}
	}
	bad := []struct {
		stripes, nics int
		msg           string
	}{
		{0, 1, "stripes = 0 is out of range"},
		{65, 1, "stripes = 65 is out of range"},
		{7, 4, "use a multiple of 4 (e.g. 4 or 8)"},
		{3, 4, "use a multiple of 4 (e.g. 4)"},
		{63, 8, "(e.g. 56 or 64)"},
		{61, 12, "(e.g. 60)"},
		{4, 0, "at least one UNC path"},
	}
	for _, c := range bad {
		err := CheckBalance(c.stripes, c.nics)
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("CheckBalance(%d, %d) = %v, want mention of %q", c.stripes, c.nics, err, c.msg)
		}
	}
}

func TestNextServer(t *testing.T) {
	rot := []string{"BAK01", "BAK02"}
	tests := []struct {
		name        string
		rotation    []string
		last        string
		unreachable map[string]bool
		want        string
	}{
		{"first cycle", rot, "", nil, "BAK01"},
		{"alternate after BAK01", rot, "BAK01", nil, "BAK02"},
		{"alternate after BAK02", rot, "BAK02", nil, "BAK01"},
		{"last used left the rotation", rot, "BAK09", nil, "BAK01"},
		{"next is down: fail over", rot, "BAK01", map[string]bool{"BAK02": true}, "BAK01"},
		{"three servers skip one", []string{"A", "B", "C"}, "A", map[string]bool{"B": true}, "C"},
		{"wrap around", []string{"A", "B", "C"}, "C", nil, "A"},
		{"single server", []string{"A"}, "A", nil, "A"},
		{"unknown unreachable name is ignored", rot, "BAK02", map[string]bool{"X": true}, "BAK01"},
	}
	for _, tt := range tests {
		got, err := NextServer(tt.rotation, tt.last, tt.unreachable)
		if err != nil || got != tt.want {
			t.Errorf("%s: NextServer = %q, %v; want %q", tt.name, got, err, tt.want)
		}
	}
	_, err := NextServer(rot, "BAK01", map[string]bool{"BAK01": true, "BAK02": true})
	if !errors.Is(err, ErrNoServerReachable) || !strings.Contains(err.Error(), "BAK01, BAK02") {
		t.Errorf("all down: %v", err)
	}
	for _, r := range [][]string{nil, {"A", "A"}, {"A", ""}} {
		if _, err := NextServer(r, "", nil); err == nil {
			t.Errorf("rotation %q accepted", r)
		}
	}
	// Round robin over a sequence of cycles alternates strictly.
	last := ""
	var got []string
	for i := 0; i < 4; i++ {
		s, err := NextServer(rot, last, nil)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, s)
		last = s
	}
	if strings.Join(got, ",") != "BAK01,BAK02,BAK01,BAK02" {
		t.Errorf("four cycles went to %v", got)
	}
}
