package conformance

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// vanishedCleanupWait is how long the cleanup waits for the BACKUP whose
// client vanished before it tries KILL: the scratch database cannot be
// dropped while it is backed up.
const vanishedCleanupWait = 2 * time.Minute

// cleanup removes what the run created, whatever happened before, with a
// context of its own (the run's may have ended: Ctrl-C). Statements still
// running are stopped first: an attention for those whose client is here,
// a wait (then KILL) for the one whose client vanished.
func (r *runner) cleanup(parent context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), cleanupTimeout)
	defer cancel()
	c := &r.rep.Cleanup
	for _, s := range r.running {
		if !r.isVanished(s) {
			s.Stop()
		}
	}
	for _, v := range r.vanished {
		if left := r.waitVanished(ctx, v); left != "" {
			c.Left = append(c.Left, Leftover{Kind: "statement", Where: v.instance, Name: fmt.Sprintf("session %d", v.s.Session), Error: left})
		}
	}
	// The copies first: the scratch database is their source.
	for i := len(r.made.dbs) - 1; i >= 0; i-- {
		d := r.made.dbs[i]
		db := r.src
		if d.instance == r.p.VerifyInstance {
			db = r.ver
		}
		existed, err := r.dropDatabase(ctx, db, d.name)
		switch {
		case err != nil:
			c.Left = append(c.Left, Leftover{Kind: "database", Where: d.instance, Name: d.name, Error: err.Error()})
		case existed:
			c.Removed = append(c.Removed, Removed{Kind: "database", Where: d.instance, Name: d.name})
		}
	}
	for _, f := range r.made.files {
		err := r.st.Remove(ctx, f)
		switch {
		case err == nil:
			c.Removed = append(c.Removed, Removed{Kind: "file", Where: r.p.Server, Name: f})
		case errors.Is(err, storage.ErrNotFound) && r.notSeen:
			c.Left = append(c.Left, Leftover{Kind: "file", Where: r.p.Server, Name: r.p.sourcePath(f),
				Error: "not found through " + r.p.Location + ", which is not the directory SQL Server writes to: look for it there"})
		case errors.Is(err, storage.ErrNotFound):
			// Never written (its BACKUP failed before creating it).
		default:
			c.Left = append(c.Left, Leftover{Kind: "file", Where: r.p.Server, Name: f, Error: err.Error()})
		}
	}
}

// isVanished reports a statement whose client vanished.
func (r *runner) isVanished(s *mssql.Sent) bool {
	for _, v := range r.vanished {
		if v.s == s {
			return true
		}
	}
	return false
}

// waitVanished waits for the statement whose client vanished to end on
// the server, then KILLs it (which needs ALTER ANY CONNECTION); "" when it
// ended, else why it may still run. Its database cannot be dropped before.
func (r *runner) waitVanished(ctx context.Context, v vanished) string {
	deadline := time.Now().Add(vanishedCleanupWait)
	for time.Now().Before(deadline) {
		cur, err := r.sessionRequest(ctx, v.db, v.s.Session)
		if err == nil && cur == nil {
			return ""
		}
		if !r.sleep(ctx) {
			break
		}
	}
	stmt, err := tsql.Kill(v.s.Session)
	if err == nil {
		_, err = v.db.Run(ctx, "KILL", stmt, nil)
	}
	if err != nil {
		return fmt.Sprintf("the statement whose client vanished still ran after %s and could not be stopped (%v): it ends on its own",
			vanishedCleanupWait, err)
	}
	return ""
}

// dropDatabase drops name with the product's drop statement, a few times
// while it is busy (a statement of the run still ending). existed: there
// was a database to drop.
func (r *runner) dropDatabase(ctx context.Context, db *mssql.DB, name string) (existed bool, err error) {
	stmt, err := tsql.DropDatabase(name)
	if err != nil {
		return false, err
	}
	var last error
	for try := 0; try < 5; try++ {
		st, err := r.state(ctx, db, name)
		if err == nil && st == nil {
			return try > 0, nil
		}
		if _, err := db.Run(ctx, "DROP DATABASE", stmt, nil); err != nil {
			last = err
		}
		if st, err := r.state(ctx, db, name); err == nil && st == nil {
			return true, nil
		}
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case <-time.After(time.Duration(try+1) * time.Second):
		}
	}
	if last == nil {
		last = errors.New("it is still there after DROP DATABASE")
	}
	return true, last
}
