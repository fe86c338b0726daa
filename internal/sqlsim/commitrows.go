package sqlsim

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// CommitRow is a row of the workload's dbo.CommitLog as a client reads it:
// its id and commit time, the wall clock of the server that committed it
// (labelled UTC: datetime2 has no zone).
type CommitRow struct {
	ID int64
	At time.Time
}

// Key is the row as a comparable string, id and commit time.
func (r CommitRow) Key() string {
	return fmt.Sprintf("%d@%s", r.ID, r.At.Format("2006-01-02T15:04:05.0000000"))
}

// ReadCommitLog reads database's dbo.CommitLog over conn (any instance
// that holds it: a source, a restored copy), by id, for the tests and the
// demo that compare a restore with its source row by row.
func ReadCommitLog(ctx context.Context, conn *sql.DB, database string) ([]CommitRow, error) {
	q := "[" + strings.ReplaceAll(database, "]", "]]") + "]" // QUOTENAME
	qctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	rows, err := conn.QueryContext(qctx, "SELECT id, committed_at FROM "+q+".dbo.CommitLog ORDER BY id")
	if err != nil {
		return nil, fmt.Errorf("read %s.dbo.CommitLog: %w", database, err)
	}
	defer rows.Close()
	var out []CommitRow
	for rows.Next() {
		var r CommitRow
		if err := rows.Scan(&r.ID, &r.At); err != nil {
			return nil, err
		}
		r.At = wallClock(r.At)
		out = append(out, r)
	}
	return out, rows.Err()
}
