package logs

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/logchain"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/storage/copier"
)

// CopyLogs copies every log backup of the chain that is written and not
// yet copied from the chain's server to its copy target (the database's
// copy target of that server), each file checked against the SHA-256 the
// chain record holds, and records the copy (state copied, the target among
// the log's servers) in the record on both servers, the remote one first.
// It is idempotent: a file already there with that content is not sent
// again, and a log already copied is skipped.
func (a *Activities) CopyLogs(ctx context.Context, in CopyLogsInput) (CopyLogsOutput, error) {
	d := &a.Base.Cycle
	db, err := logDatabase(d, in.Instance, in.Database)
	if err != nil {
		return CopyLogsOutput{}, err
	}
	from := chainServer(db)
	to := db.CopyTarget(from)
	out := CopyLogsOutput{Chain: in.Chain, From: from, To: to}
	if to == "" || to == from {
		return out, d.NotOfDatabase(db, "log copy target", to, "a copy target other than "+from, []string{to})
	}
	if in.Chain < 1 {
		return out, nil
	}
	log := activities.Logger(a.Base, ctx).With(zap.String("db", db.Name), zap.String("instance", db.Instance),
		zap.String("server", to), zap.String("step", StepCopyLogs))
	stopBeat := d.KeepAlive(ctx)
	defer stopBeat()
	fromSrv, err := d.Server(from)
	if err != nil {
		return out, err
	}
	toSrv, err := d.Server(to)
	if err != nil {
		return out, err
	}
	src, err := d.OpenServer(ctx, fromSrv)
	if err != nil {
		return out, err
	}
	defer src.Close()
	dst, err := d.OpenServer(ctx, toSrv)
	if err != nil {
		return out, err
	}
	defer dst.Close()
	keys, err := d.ManifestKeys()
	if err != nil {
		return out, err
	}
	l, err := catalog.ListChains(ctx, catalog.StorageFS{Storage: src}, keys, catalog.Of(db.Instance, db.Name))
	if err != nil {
		return out, activities.StorageError(from, err)
	}
	c := copier.New(copier.Options{})
	if err := recopyMissing(ctx, c, l, keys, catalog.Of(db.Instance, db.Name), in.Chain, src, dst, from, to, log); err != nil {
		return out, err
	}
	whole := true // every log so far is copied: Through moves on
	for _, r := range l.Records {
		if r.Chain != in.Chain {
			continue
		}
		if !r.Trusted() {
			return out, activities.NonRetryable(activities.ErrInvalidConfig, fmt.Errorf(
				"log chain record %s on %s is not trusted (%s): its log backups are not copied on its word", r.FileName(), from, r.Auth.Why()))
		}
		var copied []int64
		for i := range r.Logs {
			lb := &r.Logs[i]
			if lb.State != catalog.LogWritten || len(lb.Files) == 0 {
				continue
			}
			jobs := make([]copier.Job, len(lb.Files))
			for j, f := range lb.Files {
				jobs[j] = copier.Job{Src: f.Name, Dst: f.Name, SHA256: f.SHA256}
			}
			res, err := c.Copy(ctx, src, dst, jobs)
			if err != nil {
				if errors.Is(err, copier.ErrDifferentContent) {
					return out, activities.NonRetryable(activities.ErrHashMismatch, fmt.Errorf(
						"log %d of chain %d of %s: %w; the file on %s is left untouched", lb.Number, r.Chain, db.ID(), err, to))
				}
				return out, activities.StorageError(to, err)
			}
			for _, x := range res {
				out.Bytes += x.BytesSent
			}
			lb.State, lb.UpdatedAt = catalog.LogCopied, d.Clock().UTC()
			if !slices.Contains(lb.Servers, to) {
				lb.Servers = append(lb.Servers, to)
			}
			out.Copied = append(out.Copied, lb.Number)
			copied = append(copied, lb.Number)
		}
		if len(copied) > 0 {
			// Remote first: the record there is what says its copies are complete.
			if err := save(ctx, d, catalog.StorageFS{Storage: dst}, to, r); err != nil {
				return out, err
			}
			if err := markCopied(ctx, d, catalog.StorageFS{Storage: src}, keys, catalog.Of(db.Instance, db.Name), from, r, copied, to); err != nil {
				return out, err
			}
		}
		for _, lb := range r.Logs {
			switch {
			case !whole:
			case lb.State == catalog.LogCopied:
				out.Through = lb.Number
			case lb.State == catalog.LogWritten:
				whole = false // not copied (a foreign log not adopted): the copies stop being whole here
			}
		}
	}
	if len(out.Copied) > 0 {
		log.Info("log backups copied", zap.Int64("chain", in.Chain), zap.Int64s("logs", out.Copied), zap.Int64("bytes", out.Bytes))
		activities.Recorder(a.Base).StepDone(StepCopyLogs, db.Instance, db.Name, to, out.Bytes, 0)
	}
	return out, nil
}

// markCopied records logs copied of r's part copied to `to` in that part
// as the chain's server holds it now (r when it holds none): BackupLog
// claims and records the chain's next log there while the copy runs, and
// r, read before, would put back a record without it.
func markCopied(ctx context.Context, d *activities.CycleDeps, fsys catalog.FS, keys *catalog.Keys, of catalog.DB, server string,
	r *catalog.ChainRecord, copied []int64, to string) error {
	l, err := catalog.ListChains(ctx, fsys, keys, of)
	if err != nil {
		return activities.StorageError(server, err)
	}
	cur := r
	for _, p := range l.Records {
		if p.Chain == r.Chain && p.Part == r.Part && p.Trusted() {
			cur = p
		}
	}
	if cur != r {
		for i := range cur.Logs {
			lb := &cur.Logs[i]
			if !slices.Contains(copied, lb.Number) || lb.State != catalog.LogWritten && lb.State != catalog.LogCopied {
				continue
			}
			lb.State, lb.UpdatedAt = catalog.LogCopied, d.Clock().UTC()
			if !slices.Contains(lb.Servers, to) {
				lb.Servers = append(lb.Servers, to)
			}
		}
	}
	return save(ctx, d, fsys, server, cur)
}

// recopyMissing copies a copied log's file that is missing on one server
// again from the other (a file deleted by hand, a share restored from an
// older snapshot), checked against the record's SHA-256, for the logs a
// restore from the chain's newest full needs; a file missing on both is an
// error naming it: the chain cannot be restored past it until the next
// full backup. Only what both listings show is judged (an outage fails the
// listing, never makes a file missing).
func recopyMissing(ctx context.Context, c *copier.Copier, l catalog.ChainListing, keys *catalog.Keys, db catalog.DB, chain int64,
	src, dst storage.Storage, from, to string, log *zap.Logger) error {
	var newest logchain.LSN
	for _, r := range l.Records {
		for _, f := range r.Fulls {
			if r.Chain == chain && (newest == "" || newest.Less(logchain.LSN(f.LastLSN))) {
				newest = logchain.LSN(f.LastLSN)
			}
		}
	}
	dl, err := catalog.ListChains(ctx, catalog.StorageFS{Storage: dst}, keys, db)
	if err != nil {
		return activities.StorageError(to, err)
	}
	on := func(files []catalog.FileInfo) map[string]bool {
		m := map[string]bool{}
		for _, f := range files {
			m[f.Name] = true
		}
		return m
	}
	onSrc, onDst := on(l.LogFiles), on(dl.LogFiles)
	for _, r := range l.Records {
		if r.Chain != chain || !r.Trusted() {
			continue
		}
		for _, lb := range r.Logs {
			if lb.State != catalog.LogCopied || newest != "" && !newest.Less(logchain.LSN(lb.LastLSN)) {
				continue
			}
			for _, f := range lb.Files {
				job := []copier.Job{{Src: f.Name, Dst: f.Name, SHA256: f.SHA256}}
				var err error
				switch {
				case onSrc[f.Name] && onDst[f.Name]:
					continue
				case onSrc[f.Name]:
					_, err = c.Copy(ctx, src, dst, job)
				case onDst[f.Name]:
					_, err = c.Copy(ctx, dst, src, job)
				default:
					return activities.NonRetryable(activities.ErrCorruptBackup, fmt.Errorf(
						"log %d of chain %d of %s: its file %s is on neither %s nor %s: the chain cannot be restored past it until the next full backup is verified",
						lb.Number, chain, db, f.Name, from, to))
				}
				if err != nil {
					if errors.Is(err, copier.ErrDifferentContent) {
						return activities.NonRetryable(activities.ErrHashMismatch, fmt.Errorf(
							"log %d of chain %d of %s: copying its missing file %s again: %w", lb.Number, chain, db, f.Name, err))
					}
					return activities.StorageError(to, err)
				}
				log.Warn("a copied log backup's file was missing on one server: copied again from the other",
					zap.Int64("chain", chain), zap.Int64("log", lb.Number), zap.String("file", f.Name))
			}
		}
	}
	return nil
}

// copyFile copies one file between backup servers, hashed at both ends.
func copyFile(ctx context.Context, src, dst storage.Storage, srcName, dstName string) error {
	res, err := copier.New(copier.Options{}).Copy(ctx, src, dst, []copier.Job{{Src: srcName, Dst: dstName}})
	if err != nil {
		return err
	}
	if len(res) != 1 || res[0].Err != nil {
		return fmt.Errorf("copy %s: %v", srcName, res)
	}
	return nil
}
