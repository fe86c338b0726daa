package logs

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/logchain"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// Other tools' log backups: found in msdb since the chain's last log
// backup (on the chain's own recovery fork), adopted into the chain when
// their files are reachable, else the break they make.

// foreignDetail is the break a foreign log backup not adopted makes: who
// took it, when, where to, its LSNs, and the fix (adoptErr: why
// adopt_foreign_logs could not take it in; nil when it is off).
func foreignDetail(f ForeignLog, first, last string, adoptErr error) string {
	fix := "stop that tool's log backups (owns_backup_chain), or set adopt_foreign_logs: true"
	if adoptErr != nil {
		fix = fmt.Sprintf("adopt_foreign_logs could not copy it into the chain (%v): stop that tool's log backups (owns_backup_chain), "+
			"or have it write to a backup server of the database", adoptErr)
	}
	return fmt.Sprintf("a log backup by another tool (%s, user %s) at %s to %s, LSN %s to %s: the log it holds is not in the chain; %s",
		orUnknown(f.Tool), orUnknown(f.User), f.Start.UTC().Format(time.RFC3339), f.Path, first, last, fix)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// foreignLogs reads msdb for log backups after the chain's end that are
// not the product's: each is recorded in the chain at its place (the hole
// is named there); with adopt_foreign_logs one whose files the worker
// reaches on a backup server is copied into the chain (hashed) and the
// chain goes on through it; otherwise the chain breaks (stop: the output
// asks for a full backup). part is the record part now newest: a foreign
// log that opens the next part is recorded there, and the chain's next
// number is claimed in it.
func (a *Activities) foreignLogs(ctx context.Context, sqlDB *mssql.DB, st storage.Storage, fsys catalog.FS, db *config.Database,
	inst *config.SQLInstance, rec *catalog.ChainRecord, fork *string, out *BackupLogOutput, log *zap.Logger) (part *catalog.ChainRecord, stop bool, err error) {
	d := &a.Base.Cycle
	after, _ := chainEnd(rec)
	if after == "" {
		return rec, false, nil // a later part without its logs' ends: the previous part's tail was checked when it was written
	}
	q, args, err := tsql.LogBackupsAfter(db.Name, after)
	if err != nil {
		return rec, false, activities.NonRetryable(activities.ErrInvalidConfig, err)
	}
	rows, err := sqlDB.LogBackupHistory(ctx, q, args...)
	if err != nil {
		return rec, false, activities.SQLError(err)
	}
	now, err := activities.ServerOffset(ctx, sqlDB)
	if err != nil {
		return rec, false, err
	}
	for _, set := range groupSets(rows) {
		r := set[0]
		// Its dates are on the clock it was taken with, which a change of
		// daylight saving time or of the server's zone since leaves
		// behind; msdb keeps that offset beside them.
		off, ok := r.UTCOffsetMinutes()
		if !ok {
			off = now
		}
		if r.CopyOnly {
			continue // "has no effect on the log chain"
		}
		if c, _, ok := tsql.ParseBackupLogName(r.Name); ok && c == rec.Chain {
			continue // ours (a pending claim finished unseen is read from its own files)
		}
		if !path(r.Fork).Continues(*fork, logchain.LSN(after)) {
			// Another recovery path's (taken before a restore): not this
			// chain's, whatever its LSNs.
			log.Debug("log backup of another recovery path left out", zap.String("file", r.Path), zap.String("fork", r.Fork.Last))
			continue
		}
		tool := r.Name
		if tool == "" {
			tool = r.Description
		}
		f := ForeignLog{Path: r.Path, Start: catalog.Instant(r.Start, off), Tool: tool, User: r.User}
		paths := make([]string, len(set))
		for i, fr := range set {
			paths[i] = fr.Path
		}
		n := rec.NextNumber()
		if catalog.PartOf(n) != rec.Part {
			// The foreign log opens the next part: recorded there.
			rec = catalog.NewChainRecord(rec.SourceInstance, rec.Database, rec.Chain, catalog.PartOf(n), d.Clock())
		}
		lb := catalog.LogBackup{Number: n, State: catalog.LogWritten, BackupSetGUID: r.GUID, FirstLSN: r.FirstLSN, LastLSN: r.LastLSN,
			BackupStart: r.Start, BackupFinish: r.Finish, Foreign: &catalog.ForeignLog{Tool: tool, User: r.User, Path: strings.Join(paths, ", ")},
			SoftwareVersion: r.SoftwareVersion, UpdatedAt: d.Clock().UTC()}
		lb.SetUTCOffset(off)
		var aerr error
		if db.AdoptForeignLogs {
			var files []catalog.Stripe
			files, aerr = a.adopt(ctx, st, db, inst, rec, n, paths)
			if aerr == nil {
				lb.Files, lb.Servers, lb.Foreign.Adopted, f.Adopted = files, []string{chainServer(db)}, true, true
			} else {
				log.Warn("foreign log backup not adopted", zap.String("file", r.Path), zap.Error(aerr))
			}
		}
		rec.Logs = append(rec.Logs, lb)
		out.Foreign = append(out.Foreign, f)
		if !f.Adopted {
			rec.Break = &catalog.ChainBreak{Reason: string(logchain.BreakForeign), Detail: foreignDetail(f, r.FirstLSN, r.LastLSN, aerr), At: d.Clock().UTC()}
		}
		if err := save(ctx, d, fsys, chainServer(db), rec); err != nil {
			return rec, false, err
		}
		if rec.Break != nil {
			log.Warn("log chain broken by another tool's log backup", zap.String("file", r.Path), zap.String("tool", tool))
			out.Break = &Break{Reason: rec.Break.Reason, Detail: rec.Break.Detail, At: rec.Break.At}
			out.NeedFull = true
			return rec, true, nil
		}
		*fork, after = r.Fork.Last, r.LastLSN
		log.Info("another tool's log backup adopted into the chain", zap.String("file", r.Path), zap.Int64("seq", n))
	}
	return rec, false, nil
}

// groupSets groups msdb rows (one per file) by backup set, in order.
func groupSets(rows []mssql.LogBackupRow) [][]mssql.LogBackupRow {
	var out [][]mssql.LogBackupRow
	for _, r := range rows {
		if k := len(out); k > 0 && out[k-1][0].SetID == r.SetID {
			out[k-1] = append(out[k-1], r)
			continue
		}
		out = append(out, []mssql.LogBackupRow{r})
	}
	return out
}

// adopt copies a foreign log backup's files into the chain, when the
// worker reaches them: each path must lie in a directory the instance
// reaches one of the database's backup servers by (its sql_paths or
// unc_paths); the copy is named as the chain's own log n and hashed.
func (a *Activities) adopt(ctx context.Context, dst storage.Storage, db *config.Database, inst *config.SQLInstance,
	rec *catalog.ChainRecord, n int64, paths []string) ([]catalog.Stripe, error) {
	d := &a.Base.Cycle
	var files []catalog.Stripe
	for i, p := range paths {
		srvName, rel, ok := locate(d, db, inst, p)
		if !ok {
			return nil, fmt.Errorf("%s is on no backup server of %s the worker reaches", p, db.ID())
		}
		srv, err := d.Server(srvName)
		if err != nil {
			return nil, err
		}
		src, err := d.OpenServer(ctx, srv)
		if err != nil {
			return nil, err
		}
		name := rec.LogFileName(n, i+1, len(paths))
		err = copyFile(ctx, src, dst, rel, name)
		src.Close()
		if err != nil {
			return nil, err
		}
		size, sum, err := hashFile(ctx, dst, name)
		if err != nil {
			return nil, err
		}
		files = append(files, catalog.Stripe{Name: name, Size: size, SHA256: sum})
	}
	return files, nil
}

// locate maps a path SQL Server wrote to a backup server of db and the
// file's name there.
func locate(d *activities.CycleDeps, db *config.Database, inst *config.SQLInstance, p string) (server, name string, ok bool) {
	norm := func(s string) string { return strings.ToLower(strings.ReplaceAll(s, "/", `\`)) }
	for _, s := range slices.Concat(db.BackupServers, []string{db.CopyTo}) {
		if s == "" {
			continue
		}
		srv, err := d.Server(s)
		if err != nil {
			continue
		}
		for _, dir := range srv.PathsFor(inst.Name) {
			prefix := norm(strings.TrimRight(dir, `\/`)) + `\`
			if rest, found := strings.CutPrefix(norm(p), prefix); found && !strings.ContainsAny(rest, `\`) {
				return s, p[len(prefix):], true
			}
		}
	}
	return "", "", false
}
