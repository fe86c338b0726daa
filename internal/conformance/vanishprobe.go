package conformance

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// The probes of a client that vanishes mid-statement: a BACKUP (and the
// statements of the later steps) whose connection closes without an
// attention, watched until SQL Server ends it.

// vanishedClient starts a slow BACKUP (one buffer of 64 KiB, no
// compression) and makes its client vanish (vanishStatement); whether it
// ran on, RESTORE HEADERONLY of its file tells, as it tells a retried
// step.
func (r *runner) vanishedClient(ctx context.Context) {
	disk := r.p.sourcePath(r.p.VanishBackup)
	name := r.p.setName() + " vanish"
	stmt, err := tsql.BackupDatabase(tsql.BackupOptions{Database: r.p.Scratch, Disks: []string{disk}, Init: true, Format: true,
		Compression: new(bool), CopyOnly: true, BufferCount: 1, MaxTransferSize: tsql.TransferUnit, Name: name})
	if err != nil {
		r.skip[IDVanishedBackup] = err.Error()
		return
	}
	prefix, err := tsql.BackupMarker(r.p.Scratch, disk)
	if err != nil {
		r.skip[IDVanishedBackup] = err.Error()
		return
	}
	r.made.file(r.p.VanishBackup)
	r.vanishBackup = r.vanishStatement(ctx, vanishing{id: IDVanishedBackup, db: r.src, sees: r.srcSees, op: "BACKUP DATABASE", stmt: stmt,
		command: tsql.CommandBackupDatabase, marker: mssql.Marker{Prefix: prefix},
		completed: func(ctx context.Context) (bool, string, error) {
			q, err := tsql.RestoreHeaderOnly([]string{disk})
			if err != nil {
				return false, "", err
			}
			hdrs, err := r.src.HeaderOnly(ctx, q)
			if err != nil {
				if e := sqlErrors(err); len(e) > 0 {
					return false, "RESTORE HEADERONLY: " + strings.Join(e, "; "), nil
				}
				return false, "", err
			}
			for _, h := range hdrs {
				if h.BackupName == name {
					return true, "RESTORE HEADERONLY shows the finished backup set", nil
				}
			}
			return false, fmt.Sprintf("RESTORE HEADERONLY shows %d backup sets, none named %q", len(hdrs), name), nil
		}})
}

// vanishing is a statement sent to see what SQL Server does when its
// client vanishes; completed tells, once it is gone, whether it ran to its
// end and by what (or what was found instead); an error when it cannot
// tell.
type vanishing struct {
	id        string
	db        *mssql.DB
	sees      bool
	op, stmt  string
	command   string // its sys.dm_exec_requests.command, for the product's query
	marker    mssql.Marker
	completed func(ctx context.Context) (bool, string, error)
}

// vanished is a statement whose client vanished, on its instance.
type vanished struct {
	s        *mssql.Sent
	db       *mssql.DB
	instance string
}

// vanishStatement sends v's statement, waits until the product's query
// finds it, closes its client's connection without an attention and
// watches what SQL Server does with it. nil when it could not be sent
// (r.skip says why).
func (r *runner) vanishStatement(ctx context.Context, v vanishing) *vanishObs {
	o := &vanishObs{Blind: !v.sees}
	if o.Blind {
		return o
	}
	s, err := v.db.Send(ctx, v.op, v.stmt)
	if err != nil {
		r.skip[v.id] = "the statement could not be sent: " + err.Error()
		return nil
	}
	r.running = append(r.running, s)
	text := textObs{Op: v.op, Sent: v.stmt}
	defer func() { r.texts = append(r.texts, text) }()
	start := time.Now()
	for !o.Seen {
		if ended(ctx, s) {
			o.EndedFirst = ctx.Err() == nil
			if ctx.Err() != nil {
				r.skip[v.id] = "interrupted"
			}
			return o
		}
		sg, ok, err := r.sight(ctx, v.db, s, v.command, v.marker, start)
		if err == nil && ok {
			o.Sightings = append(o.Sightings, sg)
			text.Seen = append(text.Seen, sg.Text)
			if sg.Found {
				o.Seen, o.PercentAtVanish = true, sg.Percent
				break
			}
		}
		if !r.sleep(ctx) {
			r.skip[v.id] = "interrupted"
			return o
		}
	}
	instance := r.p.Instance
	if v.db != r.src {
		instance = r.p.VerifyInstance
	}
	r.vanished = append(r.vanished, vanished{s: s, db: v.db, instance: instance})
	_ = s.Vanish()
	gone := time.Now()
	o.LastPercent = o.PercentAtVanish
	for {
		if !r.sleep(ctx) {
			r.skip[v.id] = "interrupted"
			return o
		}
		sg, ok, err := r.sight(ctx, v.db, s, v.command, v.marker, start)
		if err != nil {
			continue
		}
		if !ok {
			o.EndedAfter = time.Since(gone)
			break
		}
		o.Sightings = append(o.Sightings, sg)
		text.Seen = append(text.Seen, sg.Text)
		o.RanOnFor, o.LastPercent = time.Since(gone), sg.Percent
		if !sg.Found {
			o.MissedAfter++
		}
		if time.Since(gone) > r.o.VanishWait {
			v := r.vanished[len(r.vanished)-1]
			o.StillRuns, o.running = true, &v
			return o
		}
	}
	done, what, err := v.completed(ctx)
	switch {
	case err != nil:
		o.Unknown = err.Error()
	case done:
		o.Completed, o.Evidence = true, what
	default:
		o.HeaderErr = what
	}
	return o
}
