package mssql

import (
	"context"
	"strings"
)

// RestoringState is where a copy that takes log backups stands
// (tsql.RestoringState).
type RestoringState struct {
	Found   bool
	State   string // state_desc: RESTORING (NORECOVERY), ONLINE (STANDBY or recovered), ...
	Standby bool   // is_in_standby
	// RedoLSN is redo_start_lsn of the primary data file in decimal digits:
	// the LSN roll forward continues from; "" (NULL) when the file must be
	// restored from a full backup.
	RedoLSN string
}

// RestoringState runs a restoring state query and returns its row.
func (db *DB) RestoringState(ctx context.Context, query string, args ...any) (RestoringState, error) {
	var out RestoringState
	err := db.scan(ctx, "restoring state", query, args, func(r row) {
		out = RestoringState{Found: true, State: strings.TrimSpace(r.str("state_desc")), Standby: r.bool("is_in_standby"),
			RedoLSN: r.str("redo_start_lsn")}
	})
	return out, err
}
