package plan

import (
	"errors"
	"fmt"
	"strings"
)

// ErrNoServerReachable is wrapped when every backup server of the rotation is
// unreachable (stable error type: NoBackupServerReachable).
var ErrNoServerReachable = errors.New("no backup server reachable")

// NextServer picks the primary backup server of the next cycle by round robin
// over rotation (seed 000, figure 2: alternate BAK01/BAK02 so that after two
// cycles a complete server failure still leaves a valid backup on the other).
// lastUsed is the server of the previous cycle, read from the manifests (not
// kept in memory); "" or a server no longer in the rotation starts at the
// first one. Unreachable servers are skipped; the last used server itself is
// the last resort. Names compare exactly.
func NextServer(rotation []string, lastUsed string, unreachable map[string]bool) (string, error) {
	if len(rotation) == 0 {
		return "", errors.New("plan: the database has no backup servers in its rotation; list at least one under backup_servers")
	}
	seen := make(map[string]bool, len(rotation))
	start := 0
	for i, s := range rotation {
		if s == "" {
			return "", fmt.Errorf("plan: an empty name in the backup server rotation %q", rotation)
		}
		if seen[s] {
			return "", fmt.Errorf("plan: backup server %q appears twice in the rotation %q; list each server once", s, rotation)
		}
		seen[s] = true
		if s == lastUsed {
			start = i + 1
		}
	}
	for k := 0; k < len(rotation); k++ {
		s := rotation[(start+k)%len(rotation)]
		if !unreachable[s] {
			return s, nil
		}
	}
	return "", fmt.Errorf("plan: %w: all of %s are unreachable; bring one back or add another server to the rotation", ErrNoServerReachable, strings.Join(rotation, ", "))
}
