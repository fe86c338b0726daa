package plan

import (
	"fmt"

	"github.com/backupcycle/backupcycle/internal/tsql"
)

// Files per NIC recommended by seed 000 ("Using Multiple NICs": "two to four
// files per NIC are a good choice").
const (
	MinFilesPerNIC = 2
	MaxFilesPerNIC = 4
)

// LargeDatabaseBytes is the size from which AutoStripes uses up to 4 files per
// NIC; below it 2 per NIC already saturate the links and more files only add
// writer threads and buffers.
const LargeDatabaseBytes = 100 << 30

// AutoStripes chooses the stripe count for stripes: "auto" from the database
// size, the NICs of the backup server and (if known, else 0) the CPU cores of
// the SQL host, following seed 000 Table 2 ("Balanced file and disk
// combinations"): the total is NICs x k with k files per NIC in 2..4, so every
// NIC carries the same number of files; among those, the largest total that
// does not exceed the core count with files/cores a power of two (1, 1/2,
// 1/4, ...; the first and most important of the seed's equations), else
// k = 2. This reproduces every row of Table 2 (see the test). Databases under
// LargeDatabaseBytes use k = 2. The result is at most 64 (SQL Server's limit).
func AutoStripes(dataBytes int64, nics, cores int) (int, error) {
	if nics < 1 {
		return 0, fmt.Errorf("plan: automatic stripe count needs at least one NIC path on the backup server, got %d", nics)
	}
	if nics*MinFilesPerNIC > tsql.MaxStripes {
		return 0, fmt.Errorf("plan: %d NIC paths x %d files each exceeds SQL Server's %d backup files; use at most %d NIC paths", nics, MinFilesPerNIC, tsql.MaxStripes, tsql.MaxStripes/MinFilesPerNIC)
	}
	maxK := MaxFilesPerNIC
	if dataBytes < LargeDatabaseBytes {
		maxK = MinFilesPerNIC
	}
	for k := maxK; k >= MinFilesPerNIC; k-- {
		total := nics * k
		if total > tsql.MaxStripes {
			continue
		}
		if cores <= 0 {
			return total, nil
		}
		if total <= cores && cores%total == 0 && isPow2(cores/total) {
			return total, nil
		}
	}
	return nics * MinFilesPerNIC, nil
}

func isPow2(n int) bool { return n > 0 && n&(n-1) == 0 }

// CheckBalance validates a configured stripe count against the backup
// server's NIC paths: 1..64 files (SQL Server), and a multiple of the NIC
// count so every NIC carries the same number of files (seed 000: "the backup
// files should be evenly distributed across network cards ... do not place
// two files on one LUN and one on the other").
func CheckBalance(stripes, nics int) error {
	if nics < 1 {
		return fmt.Errorf("plan: the backup server has %d NIC paths; configure at least one UNC path", nics)
	}
	if stripes < 1 || stripes > tsql.MaxStripes {
		return fmt.Errorf("plan: stripes = %d is out of range; SQL Server writes 1 to %d backup files, e.g. stripes: %d (%d per NIC) or \"auto\"", stripes, tsql.MaxStripes, clampStripes(nics*MinFilesPerNIC), MinFilesPerNIC)
	}
	if stripes%nics != 0 {
		lo := stripes / nics * nics
		hi := lo + nics
		return fmt.Errorf("plan: stripes = %d does not spread evenly over %d NIC paths; use a multiple of %d (e.g. %s) so every NIC carries the same number of files", stripes, nics, nics, suggest(lo, hi))
	}
	return nil
}

func clampStripes(n int) int {
	if n > tsql.MaxStripes {
		return tsql.MaxStripes
	}
	return n
}

func suggest(lo, hi int) string {
	switch {
	case lo < 1 && hi <= tsql.MaxStripes:
		return fmt.Sprint(hi)
	case hi > tsql.MaxStripes:
		return fmt.Sprint(lo)
	default:
		return fmt.Sprintf("%d or %d", lo, hi)
	}
}
