package chaos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// I5, I7 and I8: what a failed or verified set claims about its content
// holds, against what the harness did and the emulators ran.

// I5: a set is failed only on evidence about its content, and the evidence
// is true: "backup_incomplete" only when no BACKUP of its files completed,
// damage (corrupt_backup, hash_mismatch, checkdb_failed, sanity_failed)
// only when the harness damaged a stripe of it or its BACKUP never
// completed. Anything else is an outage mislabelled as content.
func (c *Checker) checkI5(files []manifestFile, add addFunc) {
	for _, mf := range files {
		if mf.M.State != catalog.StateFailed {
			continue
		}
		var ev catalog.Evidence
		reason, step := "", ""
		if f := mf.M.Failure; f != nil {
			ev, reason, step = f.Evidence, f.Reason, string(f.Step)
		}
		if !slices.Contains(evidence, ev) {
			add(5, fmt.Sprintf("%s|%s|evidence", mf.Server, mf.File), "%s on %s (%s) is failed without content evidence (evidence %q, step %s): %s",
				mf.ID, mf.Server, mf.File, ev, step, reason)
			continue
		}
		damaged := false
		for _, st := range mf.M.Stripes {
			damaged = damaged || c.damaged[st.Name]
		}
		outcomes := c.backupOutcomes(mf)
		completed := slices.Contains(outcomes, "ok")
		switch {
		case damaged || len(outcomes) == 0:
			// Damaged on purpose, or nothing known about its BACKUP.
		case ev == catalog.EvidenceBackupIncomplete && completed:
			add(5, fmt.Sprintf("%s|%s|complete", mf.Server, mf.File), "%s on %s is failed as %s (step %s) although its BACKUP completed (statements %v) and nothing damaged it: %s",
				mf.ID, mf.Server, ev, step, outcomes, reason)
		case ev != catalog.EvidenceBackupIncomplete && completed:
			add(5, fmt.Sprintf("%s|%s|nodamage", mf.Server, mf.File), "%s on %s is failed as %s (step %s) but nothing damaged it and its BACKUP completed (statements %v): %s",
				mf.ID, mf.Server, ev, step, outcomes, reason)
		}
	}
}

// verifiedAt is when mf's manifest says its set became verified (the
// worker's clock).
func verifiedAt(m *catalog.Manifest) time.Time {
	for _, t := range m.History {
		if t.State == catalog.StateVerified {
			return t.At
		}
	}
	return m.UpdatedAt
}

// started is when a workflow run started (Temporal), for I7.
func (c *Checker) started(ctx context.Context, workflowID, runID string) (time.Time, error) {
	if c.runStart != nil {
		return c.runStart(ctx, workflowID, runID)
	}
	cl := c.f.Client()
	if cl == nil {
		return time.Time{}, errors.New("Temporal is down")
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	d, err := cl.DescribeWorkflowExecution(dctx, workflowID, runID)
	if err != nil {
		return time.Time{}, err
	}
	return d.GetWorkflowExecutionInfo().GetStartTime().AsTime(), nil
}

// I7: no set is verified unless a CHECKDB of its copy, sent by the run
// that verified it after the copy's RESTORE ended, ended clean on the
// verification instance before the set was marked verified. The restore is
// the one the set's proof names (its restore-history row); the RESTORE
// statement that wrote that row, in verify01's statement log, was sent
// after that run started; a CHECKDB naming the set (its batch carries the
// set's name) of the same database started after the RESTORE ended and
// ended "ok" (DBCC CHECKDB finished and found nothing: not cut, killed,
// dropped or failed) before the manifest's transition to verified, with no
// other RESTORE into that database in between (one SQL Server refused
// replaced nothing: overwrote). A CHECKDB of an earlier restore, of another
// set, one that ended with errors or never ended, or the source's
// LastGoodCheckDbTime carried into the copy, is no proof.
func (c *Checker) checkI7(ctx context.Context, files []manifestFile, add addFunc) Notes {
	todo, history, stmts, notes := c.unproven(files, c.checkedI7, "I7")
	for _, mf := range todo {
		id, p := mf.ID, mf.M.Proof
		if p == nil {
			add(7, fmt.Sprintf("%v|%s|noproof", id, mf.Server), "verified %s on %s names no restore (no proof): no CHECKDB can be tied to it", id, mf.Server)
			continue
		}
		var rec *restoreRow
		for i := range history {
			if history[i].ID == p.RestoreHistoryID {
				rec = &history[i]
			}
		}
		if rec == nil {
			add(7, fmt.Sprintf("%v|%s|norow", id, mf.Server), "verified %s on %s: its proof's restore (history id %d) is not in %s's restore history",
				id, mf.Server, p.RestoreHistoryID, Verify01)
			continue
		}
		// The RESTORE that wrote the row: restore_date is taken while it runs.
		var restore *sqlsim.StatementRecord
		for i := range stmts {
			st := &stmts[i]
			if st.Kind == "RESTORE DATABASE" && st.Outcome == "ok" && strings.EqualFold(st.Database, rec.Dest) &&
				!st.Start.After(rec.Date) && !st.End.Before(rec.Date) {
				restore = st
			}
		}
		if restore == nil {
			notes = append(notes, fmt.Sprintf("I7 not checked for %s: the RESTORE of restore history %d is not in %s's statement log", id, rec.ID, Verify01))
			continue
		}
		done := verifiedAt(mf.M)
		if begun, err := c.started(ctx, mf.M.WorkflowID, mf.M.RunID); err != nil {
			notes = append(notes, fmt.Sprintf("I7 for %s: start of run %s/%s not known (%v): its RESTORE not checked to be its own", id, mf.M.WorkflowID, mf.M.RunID, err))
		} else if restore.Start.Before(begun) {
			add(7, fmt.Sprintf("%v|oldrestore", id), "verified %s (manifest on %s, run %s): the restore its proof names (history id %d, RESTORE sent %s) was sent before that run started (%s)",
				id, mf.Server, mf.M.WorkflowID, rec.ID, restore.Start.Format(time.RFC3339Nano), begun.Format(time.RFC3339Nano))
			continue
		}
		marker := tsql.BackupSetName(id.Sequence)
		var seen []string
		ok := false
		for _, st := range stmts {
			if st.Kind != "DBCC CHECKDB" || !strings.EqualFold(st.Database, rec.Dest) || st.Start.Before(restore.End) || st.Start.After(done) {
				continue
			}
			seen = append(seen, fmt.Sprintf("%s %s-%s", st.Outcome, st.Start.Format("15:04:05.000"), st.End.Format("15:04:05.000")))
			if st.Outcome != "ok" || !strings.Contains(st.SQL, marker) || st.End.After(done) {
				continue
			}
			over := false
			for _, o := range stmts {
				if overwrote(o, rec.Dest) && o.Start.After(restore.End) && o.Start.Before(st.End) {
					over = true
				}
			}
			if !over {
				ok = true
				break
			}
		}
		if !ok {
			add(7, fmt.Sprintf("%v|nocheck", id), "verified %s (manifest on %s, verified %s): no CHECKDB of %q naming the set ended clean after its RESTORE ended (%s) and before it was marked verified; CHECKDBs of the copy in between: %v",
				id, mf.Server, done.Format(time.RFC3339Nano), rec.Dest, restore.End.Format(time.RFC3339Nano), seen)
			continue
		}
		c.checkedI7[id] = true
	}
	return notes
}

// contentTypes are the error types that are evidence about a set's
// content, by the evidence they give (activities.Evidence).
var contentTypes = map[catalog.Evidence]string{
	catalog.EvidenceCorruptBackup: activities.ErrCorruptBackup,
	catalog.EvidenceCheckDBFailed: activities.ErrCheckDBFailed,
	catalog.EvidenceSanityFailed:  activities.ErrSanityCheckFailed,
	catalog.EvidenceHashMismatch:  activities.ErrHashMismatch,
}

// environmentTypes are the error types of the environment, a version, a
// permission or the configuration: none says anything about a set's
// content. One may end a BACKUP half-way (the set is then incomplete,
// backup_incomplete), never condemn a set that was complete.
var environmentTypes = []string{activities.ErrInvalidConfig, activities.ErrVerifyInstanceFull, activities.ErrSanityCheckCouldNotRun,
	activities.ErrNoSanityProof, activities.ErrCheckDBCouldNotRun, activities.ErrLoginFailed, activities.ErrInsufficientMemory,
	activities.ErrVerifyDatabaseInUse, activities.ErrRestoreMismatch, activities.ErrStatementMayStillRun, activities.ErrFileSystemLimit,
	activities.ErrDatabaseNotFound, activities.ErrDatabaseUnavailable, activities.ErrCopyDeadlineExceeded, activities.ErrNoEvidence,
	activities.ErrSourceDatabaseDamaged}

// failureType is the error type a failure's reason starts with
// (MarkFailed writes "<type>: <reason>"); "" when it names none.
func failureType(reason string) string {
	t, _, ok := strings.Cut(reason, ": ")
	if !ok || t == "" {
		return ""
	}
	for _, r := range t {
		if !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z') {
			return ""
		}
	}
	return t
}

// unreadable says why verify01 could not read set m in estate e ("" when
// it could): a build of an older major version than the one that wrote
// it, or no certificate of its TDE thumbprint.
func unreadable(m *catalog.Manifest, e Estate) string {
	h := m.Header
	if h == nil {
		return ""
	}
	if v, w := major(e.BuildOf(Verify01)), major(h.SoftwareVersion); v > 0 && w > v {
		return fmt.Sprintf("%s ran %s, older than the set's writer %s", Verify01, e.BuildOf(Verify01), h.SoftwareVersion)
	}
	if h.TDEThumbprint != "" && !e.TDECert {
		return fmt.Sprintf("%s lacked the TDE certificate %s", Verify01, h.TDEThumbprint)
	}
	return ""
}

// I8: no set is failed for a reason that lies outside its content. I5 asks
// whether the evidence is true; I8 asks whether the failure's reason is
// content at all: a failure whose type is the environment's (a version, a
// certificate, a permission, the configuration, a host's capacity) marks a
// set failed only as incomplete, at its BACKUP, when a BACKUP of it ran and
// did not complete; damage evidence carries the type that proves it
// (corrupt_backup from CorruptBackup, ...); backup_incomplete is found at
// the BACKUP step only; and no set is condemned at its RESTORE, CHECKDB or
// sanity checks while the estate made it unreadable on the verification
// instance (an older version, a missing TDE certificate), unless the
// harness damaged it.
func (c *Checker) checkI8(files []manifestFile, add addFunc) {
	for _, mf := range files {
		f := mf.M.Failure
		if mf.M.State != catalog.StateFailed || f == nil {
			continue
		}
		key := fmt.Sprintf("%s|%s", mf.Server, mf.File)
		typ := failureType(f.Reason)
		damaged := false
		for _, st := range mf.M.Stripes {
			damaged = damaged || c.damaged[st.Name]
		}
		switch want, isDamage := contentTypes[f.Evidence]; {
		case isDamage && typ != want:
			add(8, key+"|type", "%s on %s is failed as %s at %s for %q, not for %s: %s", mf.ID, mf.Server, f.Evidence, f.Step, typ, want, f.Reason)
			continue
		case f.Evidence == catalog.EvidenceBackupIncomplete && f.Step != catalog.StepBackup:
			add(8, key+"|step", "%s on %s is failed as %s at step %s, after its BACKUP: %s", mf.ID, mf.Server, f.Evidence, f.Step, f.Reason)
			continue
		case f.Evidence == catalog.EvidenceBackupIncomplete && slices.Contains(environmentTypes, typ):
			// A BACKUP SQL Server refused at once (3013, its devices not
			// opened) ran and did not complete, though the emulator's
			// statement log, which starts with the first page, lacks it.
			abnormal := strings.Contains(f.Reason, "(error 3013)")
			if outcomes := c.backupOutcomes(mf); len(outcomes) == 0 && !abnormal || slices.Contains(outcomes, "ok") {
				add(8, key+"|env", "%s on %s is failed as %s for %s, but no BACKUP of it ran and stopped half-way (statements %v): %s",
					mf.ID, mf.Server, f.Evidence, typ, outcomes, f.Reason)
				continue
			}
		}
		switch f.Step {
		case catalog.StepRestore, catalog.StepCheckDB, catalog.StepSanity:
		default:
			continue
		}
		if e, ok := c.estateAt(f.At); ok && !damaged {
			if why := unreadable(mf.M, e); why != "" {
				add(8, key+"|estate", "%s on %s is failed as %s at %s while %s: the environment, not its content: %s",
					mf.ID, mf.Server, f.Evidence, f.Step, why, f.Reason)
			}
		}
	}
}
