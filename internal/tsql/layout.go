package tsql

import (
	"fmt"
	"strings"
)

// MaxStripes is the most backup devices one BACKUP statement accepts.
const MaxStripes = 64

// Stripe is one backup file of a set and where SQL Server writes it.
type Stripe struct {
	Index int    // 1-based
	Count int    // stripes in the set
	Dir   string // the NIC path (UNC share directory) this stripe goes through
	Name  string // SetNames.Stripe(seq, Index, Count)
	Path  string // JoinPath(Dir, Name): what goes into DISK = N'...'
}

// Layout spreads the n stripes of a set over the backup server's NIC paths,
// round-robin (seed 000, "Using Multiple NICs": one UNC path per NIC IP, files
// evenly spread, e.g. 4 NICs x 2 = 8 files, stripe i on NIC (i-1) mod NICs).
// Consecutive stripes land on different NICs; every NIC carries n/NICs
// stripes, or one more when n is not a multiple of the NIC count
// (internal/plan.CheckBalance rejects that for configured counts). names
// is the set's naming: NamesOf for a new set, its manifest's for one
// already written.
func Layout(nicPaths []string, names SetNames, seq int64, n int) ([]Stripe, error) {
	db := names.Database
	if len(nicPaths) == 0 {
		return nil, fmt.Errorf("stripe layout for %q: no backup paths given; configure at least one UNC path per backup server", db)
	}
	if n < 1 || n > MaxStripes {
		return nil, fmt.Errorf("stripe layout for %q: %d stripes is out of range; SQL Server accepts 1 to %d backup files", db, n, MaxStripes)
	}
	if seq < 0 {
		return nil, fmt.Errorf("stripe layout for %q: negative sequence number %d", db, seq)
	}
	seen := make(map[string]bool, len(nicPaths))
	for _, p := range nicPaths {
		if strings.TrimSpace(p) == "" {
			return nil, fmt.Errorf("stripe layout for %q: an empty backup path in %q; remove it or fill it in", db, nicPaths)
		}
		if seen[p] {
			return nil, fmt.Errorf("stripe layout for %q: backup path %q is listed twice; list each NIC path once", db, p)
		}
		seen[p] = true
	}
	out := make([]Stripe, n)
	for i := range out {
		dir := nicPaths[i%len(nicPaths)]
		name := names.Stripe(seq, i+1, n)
		out[i] = Stripe{Index: i + 1, Count: n, Dir: dir, Name: name, Path: JoinPath(dir, name)}
	}
	return out, nil
}

// Paths returns the Path of every stripe, in order: the DISK list of
// BACKUP and RESTORE.
func Paths(stripes []Stripe) []string {
	out := make([]string, len(stripes))
	for i, s := range stripes {
		out[i] = s.Path
	}
	return out
}

// JoinPath joins a directory as SQL Server sees it with a file name. UNC and
// Windows paths (`\\192.168.2.2\backup`, `C:\restore`) are joined with `\`;
// a directory written with forward slashes only (a Linux SQL Server, the
// emulator) is joined with `/`. Trailing separators are not doubled.
func JoinPath(dir, name string) string {
	sep := `\`
	if strings.Contains(dir, "/") && !strings.Contains(dir, `\`) {
		sep = "/"
	}
	trimmed := strings.TrimRight(dir, `\/`)
	if trimmed == "" && dir != "" {
		// the root itself ("/" or `\`)
		return dir[:1] + name
	}
	return trimmed + sep + name
}

// baseName is the last element of a Windows or POSIX path.
func baseName(p string) string {
	p = strings.TrimRight(p, `\/`)
	if i := strings.LastIndexAny(p, `\/`); i >= 0 {
		return p[i+1:]
	}
	return p
}
