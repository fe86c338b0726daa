package chaos

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	mssqldb "github.com/microsoft/go-mssqldb"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/protobuf/proto"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
)

// Violation is one broken invariant.
type Violation struct {
	Invariant int    // 1..6
	Detail    string // what, where; never a secret
	key       string // the same finding is reported once
}

// setKey is a backup set number of one database.
type setKey struct {
	Instance, Database string
	Sequence           int64
}

// setID is one backup set: its number and the GUID of its BACKUP.
type setID struct {
	setKey
	GUID string
}

func (s setID) String() string {
	return fmt.Sprintf("%s/%s seq %d (backup set %s)", s.Instance, s.Database, s.Sequence, shortGUID(s.GUID))
}

func shortGUID(g string) string {
	if len(g) > 8 {
		return g[:8]
	}
	if g == "" {
		return "no guid"
	}
	return g
}

// manifestFile is one manifest found on a backup server.
type manifestFile struct {
	Server, File string
	M            *catalog.Manifest
	ID           setID
	Raw          []byte
}

// evidence is what may mark a set failed: content, never an outage.
var evidence = []catalog.Evidence{catalog.EvidenceBackupIncomplete, catalog.EvidenceCorruptBackup,
	catalog.EvidenceCheckDBFailed, catalog.EvidenceSanityFailed, catalog.EvidenceHashMismatch}

func normGUID(g string) string { return strings.ToLower(strings.Trim(strings.TrimSpace(g), "{}")) }

// Checker holds what the invariants remember across runs: every set number
// ever seen with its GUID (I4) and the bytes of every set the moment it was
// first seen verified (I1).
type Checker struct {
	f            *Fleet
	guids        map[setKey]string
	verified     map[setID]map[string]map[string][32]byte // set -> server -> stripe -> sha256
	proven       map[setID]bool                           // I2 passed once
	everVerified map[Target]bool
	reported     map[string]bool
	damaged      map[string]bool  // stripe names the harness flipped a byte of (I5)
	scanned      map[string]bool  // closed workflow runs whose history was read (I6)
	logOffsets   map[string]int64 // worker log bytes already scanned (I6)
	lastScan     int
	// stmts replaces the emulators' statement logs (tests); nil reads them.
	stmts func(instance string) []sqlsim.StatementRecord
}

// NewChecker starts with nothing seen.
func NewChecker(f *Fleet) *Checker {
	return &Checker{f: f, guids: map[setKey]string{}, verified: map[setID]map[string]map[string][32]byte{},
		proven: map[setID]bool{}, everVerified: map[Target]bool{}, reported: map[string]bool{}, damaged: map[string]bool{},
		scanned: map[string]bool{}, logOffsets: map[string]int64{}}
}

// Stats says how much the checks covered, for the report.
func (c *Checker) Stats() string {
	var logBytes int64
	for _, n := range c.logOffsets {
		logBytes += n
	}
	return fmt.Sprintf("checked %d manifests in the last scan, %d sets seen verified, %d set numbers, %d workflow histories, %d MiB of worker logs",
		c.lastScan, len(c.verified), len(c.guids), len(c.scanned), logBytes>>20)
}

// Notes are problems of the fleet the checker ran into that are not
// invariant violations (an unreadable manifest); the caller prints them.
type Notes []string

// Check reads every manifest and file on both servers, the verification
// instance's restore history, the workflow histories and the worker logs,
// and returns the violations not reported before. errs are the error texts
// of the run's workflows (I6).
func (c *Checker) Check(ctx context.Context, errs []string) ([]Violation, Notes) {
	var out []Violation
	var notes Notes
	add := func(inv int, key, format string, args ...any) {
		key = fmt.Sprintf("I%d|%s", inv, key)
		if c.reported[key] {
			return
		}
		c.reported[key] = true
		detail := strings.Join(strings.Fields(c.redact(fmt.Sprintf(format, args...))), " ")
		out = append(out, Violation{Invariant: inv, Detail: detail, key: key})
	}
	files, n := c.scan()
	notes = append(notes, n...)
	c.lastScan = len(files)

	c.checkI4(files, add)
	c.checkI1(files, add)
	n = c.checkI2(ctx, files, add)
	notes = append(notes, n...)
	c.checkI3(files, add)
	c.checkI5(files, add)
	n = c.checkI6(ctx, files, errs, add)
	notes = append(notes, n...)
	return out, notes
}

// scan reads every manifest of both servers.
func (c *Checker) scan() ([]manifestFile, Notes) {
	var out []manifestFile
	var notes Notes
	for _, s := range Servers {
		entries, err := os.ReadDir(c.f.ShareDir(s))
		if err != nil {
			notes = append(notes, fmt.Sprintf("cannot list %s: %v", s, err))
			continue
		}
		for _, e := range entries {
			name := e.Name()
			if !e.Type().IsRegular() || !strings.HasSuffix(name, ".manifest.json") || strings.HasPrefix(name, ".") {
				continue
			}
			raw, err := os.ReadFile(filepath.Join(c.f.ShareDir(s), name))
			if err != nil {
				notes = append(notes, fmt.Sprintf("cannot read %s/%s: %v", s, name, err))
				continue
			}
			m, err := catalog.Decode(raw)
			if err != nil {
				notes = append(notes, fmt.Sprintf("manifest %s/%s does not decode: %v", s, name, err))
				continue
			}
			mf := manifestFile{Server: s, File: name, M: m, Raw: raw,
				ID: setID{setKey: setKey{Instance: m.SourceInstance, Database: m.Database, Sequence: m.Sequence}}}
			if m.Header != nil {
				mf.ID.GUID = normGUID(m.Header.BackupSetGUID)
			}
			out = append(out, mf)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Server != out[j].Server {
			return out[i].Server < out[j].Server
		}
		return out[i].File < out[j].File
	})
	return out, notes
}

type addFunc func(inv int, key, format string, args ...any)

// I4: a (instance, database, sequence) never names two backup sets.
func (c *Checker) checkI4(files []manifestFile, add addFunc) {
	for _, mf := range files {
		if mf.ID.GUID == "" {
			continue
		}
		first, ok := c.guids[mf.ID.setKey]
		if !ok {
			c.guids[mf.ID.setKey] = mf.ID.GUID
			continue
		}
		if first != mf.ID.GUID {
			add(4, fmt.Sprintf("%v|%s", mf.ID.setKey, mf.ID.GUID),
				"%s/%s sequence %d used again: backup set %s, first seen as %s; now in %s/%s (state %s, run %s)",
				mf.ID.Instance, mf.ID.Database, mf.ID.Sequence, mf.ID.GUID, first, mf.Server, mf.File, mf.M.State, mf.M.WorkflowID)
		}
	}
}

func hashFile(path string) ([32]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return [32]byte{}, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return [32]byte{}, err
	}
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	return sum, nil
}

func stripePath(dir, name string) (string, bool) {
	if name == "" || filepath.Base(name) != name || strings.HasPrefix(name, ".") {
		return "", false
	}
	return filepath.Join(dir, name), true
}

// I1: no byte of a set that was ever verified changes while any manifest
// still calls it verified.
func (c *Checker) checkI1(files []manifestFile, add addFunc) {
	verifiedNow := map[setID]bool{}
	verifiedOn := map[setID]map[string]bool{}
	for _, mf := range files {
		if mf.M.State != catalog.StateVerified {
			continue
		}
		c.everVerified[Target{mf.ID.Instance, mf.ID.Database}] = true
		verifiedNow[mf.ID] = true
		if verifiedOn[mf.ID] == nil {
			verifiedOn[mf.ID] = map[string]bool{}
		}
		verifiedOn[mf.ID][mf.Server] = true
		if c.verified[mf.ID] == nil {
			c.verified[mf.ID] = map[string]map[string][32]byte{}
		}
		if _, ok := c.verified[mf.ID][mf.Server]; ok {
			continue
		}
		// First seen verified on this server: remember its bytes.
		sums := map[string][32]byte{}
		for _, st := range mf.M.Stripes {
			p, ok := stripePath(c.f.ShareDir(mf.Server), st.Name)
			if !ok {
				add(1, fmt.Sprintf("%v|%s|badname|%s", mf.ID, mf.Server, st.Name), "verified %s on %s lists stripe %q, which is not a file name", mf.ID, mf.Server, st.Name)
				continue
			}
			sum, err := hashFile(p)
			if err != nil {
				add(1, fmt.Sprintf("%v|%s|missing|%s", mf.ID, mf.Server, st.Name), "verified %s on %s: stripe %s is missing when first seen verified: %v", mf.ID, mf.Server, st.Name, err)
				continue
			}
			sums[st.Name] = sum
		}
		c.verified[mf.ID][mf.Server] = sums
	}
	ids := make([]setID, 0, len(c.verified))
	for id := range c.verified {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i].String() < ids[j].String() })
	for _, id := range ids {
		if !verifiedNow[id] {
			continue // no manifest calls it verified any more
		}
		for server, sums := range c.verified[id] {
			for name, want := range sums {
				p, _ := stripePath(c.f.ShareDir(server), name)
				got, err := hashFile(p)
				switch {
				case errors.Is(err, os.ErrNotExist):
					// Retention may delete a server's copy; a manifest on the
					// same server that still says verified may not survive it.
					if verifiedOn[id][server] {
						add(1, fmt.Sprintf("%v|%s|gone|%s", id, server, name), "verified %s: stripe %s deleted on %s while its manifest there still says verified", id, name, server)
					}
				case err != nil:
					add(1, fmt.Sprintf("%v|%s|unreadable|%s", id, server, name), "verified %s: stripe %s on %s unreadable: %v", id, name, server, err)
				case got != want:
					var where []string
					for s := range verifiedOn[id] {
						where = append(where, s)
					}
					sort.Strings(where)
					add(1, fmt.Sprintf("%v|%s|changed|%s", id, server, name), "verified %s: stripe %s on %s changed (sha256 %x, was %x) while the manifest on %v still calls it verified",
						id, name, server, got[:6], want[:6], where)
				}
			}
		}
	}
}

// restoreRow is one msdb.dbo.restorehistory row joined to msdb.dbo.backupset.
type restoreRow struct {
	ID   int64
	Date time.Time
	Dest string
	GUID string
}

// restoreHistory reads the verification instance's restore history with
// the GUID of each restored backup set.
func (c *Checker) restoreHistory(ctx context.Context) ([]restoreRow, error) {
	db, err := c.f.DB(Verify01)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rows, err := db.QueryContext(ctx, "SELECT rh.restore_history_id, rh.restore_date, rh.destination_database_name, bs.backup_set_uuid "+
		"FROM msdb.dbo.restorehistory rh JOIN msdb.dbo.backupset bs ON bs.backup_set_id = rh.backup_set_id")
	if err != nil {
		return nil, fmt.Errorf("read the restore history of %s: %w", Verify01, err)
	}
	defer rows.Close()
	var out []restoreRow
	for rows.Next() {
		var r restoreRow
		var u mssqldb.UniqueIdentifier
		if err := rows.Scan(&r.ID, &r.Date, &r.Dest, &u); err != nil {
			return nil, err
		}
		r.GUID = normGUID(u.String())
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, rows.Err()
}

// wall drops the location: DATETIME carries none, and the emulator's
// statement log is in local time.
func wall(t time.Time) time.Time {
	t = t.Local()
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}

func wallUTC(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}

// I2: every verified manifest's set was restored from its own backup (its
// GUID in the verification instance's restore history) and a clean CHECKDB
// ran on that restored copy before anything replaced it.
func (c *Checker) checkI2(ctx context.Context, files []manifestFile, add addFunc) Notes {
	var todo []manifestFile
	for _, mf := range files {
		if mf.M.State == catalog.StateVerified && !c.proven[mf.ID] {
			todo = append(todo, mf)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	if c.f.Instances[Verify01] == nil {
		return Notes{"I2 not checked: no verification instance"}
	}
	history, err := c.restoreHistory(ctx)
	if err != nil {
		return Notes{fmt.Sprintf("I2 not checked: %v", err)}
	}
	stmts := c.f.Instances[Verify01].Statements()
	const slack = 20 * time.Millisecond
	for _, mf := range todo {
		id := mf.ID
		if id.GUID == "" {
			add(2, fmt.Sprintf("%v|%s|noheader", id, mf.Server), "verified %s on %s has no backup set GUID (no header): nothing proves what was restored", id, mf.Server)
			continue
		}
		var restores []restoreRow
		for _, r := range history {
			if r.GUID == id.GUID {
				restores = append(restores, r)
			}
		}
		if len(restores) == 0 {
			add(2, fmt.Sprintf("%v|norestore", id), "verified %s (manifest on %s, verify database %q) was never restored: its GUID is not in %s's restore history",
				id, mf.Server, mf.M.VerifyDB, Verify01)
			continue
		}
		checked := false
		for _, r := range restores {
			if mf.M.VerifyDB != "" && !strings.EqualFold(r.Dest, mf.M.VerifyDB) {
				continue
			}
			restoredAt := wallUTC(r.Date)
			var next time.Time // the next restore into the same database
			for _, o := range history {
				if o.ID > r.ID && strings.EqualFold(o.Dest, r.Dest) {
					next = wallUTC(o.Date)
					break
				}
			}
			for _, s := range stmts {
				if s.Kind != "DBCC CHECKDB" || s.Outcome != "ok" || !strings.EqualFold(s.Database, r.Dest) {
					continue
				}
				start, end := wall(s.Start), wall(s.End)
				if start.Before(restoredAt.Add(-slack)) || (!next.IsZero() && !start.Before(next)) {
					continue
				}
				// Nothing restored over the copy while CHECKDB read it.
				clean := true
				for _, o := range stmts {
					if o.Kind == "RESTORE DATABASE" && strings.EqualFold(o.Database, r.Dest) {
						ostart := wall(o.Start)
						if ostart.After(restoredAt.Add(slack)) && ostart.Before(end) {
							clean = false
						}
					}
				}
				if clean {
					checked = true
					break
				}
			}
			if checked {
				break
			}
		}
		if !checked {
			add(2, fmt.Sprintf("%v|nocheckdb", id), "verified %s (manifest on %s): restored into %q (restore history %d) but no clean CHECKDB ran on that copy before it was replaced",
				id, mf.Server, restores[len(restores)-1].Dest, restores[len(restores)-1].ID)
			continue
		}
		{
			p := mf.M.Proof
			switch {
			case p == nil:
				add(2, fmt.Sprintf("%v|%s|noproof", id, mf.Server), "verified %s on %s has no proof (restore history id and GUID of the checked copy)", id, mf.Server)
				continue
			case normGUID(p.BackupSetGUID) != id.GUID:
				add(2, fmt.Sprintf("%v|%s|proofguid", id, mf.Server), "verified %s on %s: proof names backup set %s, the manifest's header %s", id, mf.Server, p.BackupSetGUID, id.GUID)
				continue
			}
			ok := false
			for _, r := range history {
				if r.ID == p.RestoreHistoryID {
					ok = r.GUID == id.GUID && (p.VerifyDatabase == "" || strings.EqualFold(r.Dest, p.VerifyDatabase))
				}
			}
			if !ok {
				add(2, fmt.Sprintf("%v|%s|proofrow", id, mf.Server), "verified %s on %s: proof's restore history id %d is not a restore of this set into %q on %s",
					id, mf.Server, p.RestoreHistoryID, p.VerifyDatabase, Verify01)
				continue
			}
		}
		c.proven[id] = true
	}
	return nil
}

// intactOn reports whether server holds set id intact: a manifest of the
// same set that is not failed or cancelled, and every stripe of ref with
// its size and SHA-256.
func (c *Checker) intactOn(files []manifestFile, server string, ref manifestFile) (bool, string) {
	var m *manifestFile
	for i := range files {
		if files[i].Server == server && files[i].ID == ref.ID {
			m = &files[i]
		}
	}
	if m == nil {
		return false, "no manifest of it"
	}
	if m.M.State == catalog.StateFailed || m.M.State == catalog.StateCancelled {
		return false, "its manifest says " + string(m.M.State)
	}
	for _, st := range ref.M.Stripes {
		p, ok := stripePath(c.f.ShareDir(server), st.Name)
		if !ok {
			return false, fmt.Sprintf("stripe %q is not a file name", st.Name)
		}
		fi, err := os.Stat(p)
		if err != nil {
			return false, fmt.Sprintf("stripe %s missing", st.Name)
		}
		if st.Size > 0 && fi.Size() != st.Size {
			return false, fmt.Sprintf("stripe %s has %d bytes, manifest %d", st.Name, fi.Size(), st.Size)
		}
		got, err := hashFile(p)
		if err != nil {
			return false, fmt.Sprintf("stripe %s unreadable", st.Name)
		}
		want := st.SHA256
		if want == "" {
			for _, sums := range c.verified[ref.ID] {
				if s, ok := sums[st.Name]; ok {
					want = hex.EncodeToString(s[:])
					break
				}
			}
		}
		if want != "" && !strings.EqualFold(want, hex.EncodeToString(got[:])) {
			return false, fmt.Sprintf("stripe %s differs from its sha256", st.Name)
		}
	}
	return true, ""
}

// I3: for every database with a verified set, the newest verified set
// (by the instant its backup finished, as the manifests record:
// catalog.Manifest.Newer) is intact on two servers.
func (c *Checker) checkI3(files []manifestFile, add addFunc) {
	newest := map[Target]manifestFile{}
	for _, mf := range files {
		if mf.M.State != catalog.StateVerified {
			continue
		}
		t := Target{mf.ID.Instance, mf.ID.Database}
		cur, ok := newest[t]
		if !ok || mf.M.Newer(cur.M) {
			newest[t] = mf
		}
	}
	targets := make([]Target, 0, len(c.everVerified))
	for t := range c.everVerified {
		targets = append(targets, t)
	}
	sort.Slice(targets, func(i, j int) bool { return targets[i].String() < targets[j].String() })
	for _, t := range targets {
		ref, ok := newest[t]
		if !ok {
			add(3, fmt.Sprintf("%s|none", t), "%s had a verified set, now no manifest on any server calls a set of it verified", t)
			continue
		}
		var good []string
		var why []string
		for _, s := range Servers {
			if ok, reason := c.intactOn(files, s, ref); ok {
				good = append(good, s)
			} else {
				why = append(why, s+": "+reason)
			}
		}
		if len(good) < 2 {
			add(3, fmt.Sprintf("%s|%v|%v", t, ref.ID, good), "newest verified set of %s, %s, is intact on %d server(s) %v, want 2 (%s)",
				t, ref.ID, len(good), good, strings.Join(why, "; "))
		}
	}
}

// statements is what an instance ran (its emulator's statement log).
func (c *Checker) statements(instance string) []sqlsim.StatementRecord {
	if c.stmts != nil {
		return c.stmts(instance)
	}
	in := c.f.Instances[instance]
	if in == nil {
		return nil
	}
	return in.Statements()
}

// Damaged records that the harness flipped a byte of a stripe file (by
// name: a copy made after the flip carries it too). Evidence of a damaged
// content is then expected for that set.
func (c *Checker) Damaged(stripe string) { c.damaged[stripe] = true }

// backupOutcomes are the outcomes of the BACKUP statements that wrote the
// set's stripes on its source instance (oldest first).
func (c *Checker) backupOutcomes(mf manifestFile) []string {
	if len(mf.M.Stripes) == 0 {
		return nil
	}
	var out []string
	for _, st := range c.statements(mf.ID.Instance) {
		if st.Kind == "BACKUP DATABASE" && strings.Contains(st.SQL, mf.M.Stripes[0].Name) {
			out = append(out, st.Outcome)
		}
	}
	return out
}

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

// redact replaces every configured password in s.
func (c *Checker) redact(s string) string {
	for _, p := range c.f.Secrets() {
		s = strings.ReplaceAll(s, p, "<password>")
	}
	return s
}

// secretIn returns the environment variable whose password b contains, or "".
func (c *Checker) secretIn(b []byte) string {
	for env, p := range c.f.passwords {
		if bytes.Contains(b, []byte(p)) {
			return env
		}
	}
	return ""
}

// I6: no workflow history, worker log line, manifest or workflow error
// contains a configured password.
func (c *Checker) checkI6(ctx context.Context, files []manifestFile, errs []string, add addFunc) Notes {
	var notes Notes
	for _, e := range errs {
		if env := c.secretIn([]byte(e)); env != "" {
			add(6, "error|"+env+"|"+c.redact(e), "the password of %s is in a workflow error: %s", env, e)
		}
	}
	for _, mf := range files {
		if env := c.secretIn(mf.Raw); env != "" {
			add(6, "manifest|"+env+"|"+mf.Server+"/"+mf.File, "the password of %s is in manifest %s/%s", env, mf.Server, mf.File)
		}
	}
	for _, path := range c.f.WorkerLogs() {
		if n := c.scanLog(path, add); n != "" {
			notes = append(notes, n)
		}
	}
	if n := c.scanHistories(ctx, add); n != "" {
		notes = append(notes, n)
	}
	return notes
}

func (c *Checker) scanLog(path string, add addFunc) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("I6: cannot read %s: %v", path, err)
	}
	defer f.Close()
	off := c.logOffsets[path]
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return fmt.Sprintf("I6: %s: %v", path, err)
	}
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 && line[len(line)-1] == '\n' {
			off += int64(len(line))
			if env := c.secretIn(line); env != "" {
				add(6, "log|"+env+"|"+filepath.Base(path)+"|"+fmt.Sprint(off), "the password of %s is in %s: %s",
					env, filepath.Base(path), strings.TrimSpace(string(line)))
			}
		}
		if err != nil {
			break // a partial last line is read again next time
		}
	}
	c.logOffsets[path] = off
	return ""
}

// scanHistories reads the history of every workflow run not read before
// (closed runs once; running ones every time).
func (c *Checker) scanHistories(ctx context.Context, add addFunc) string {
	cl := c.f.Client()
	if cl == nil {
		return "I6: Temporal is down, histories not read"
	}
	var token []byte
	for page := 0; page < 1000; page++ {
		lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		resp, err := cl.ListWorkflow(lctx, &workflowservice.ListWorkflowExecutionsRequest{PageSize: 200, NextPageToken: token})
		cancel()
		if err != nil {
			return fmt.Sprintf("I6: list workflows: %v", err)
		}
		for _, e := range resp.GetExecutions() {
			id, run := e.GetExecution().GetWorkflowId(), e.GetExecution().GetRunId()
			key := id + "/" + run
			if c.scanned[key] {
				continue
			}
			closed := e.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
			it := cl.GetWorkflowHistory(ctx, id, run, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			complete := true
			for n := 0; it.HasNext() && n < 100000; n++ {
				ev, err := it.Next()
				if err != nil {
					complete = false
					break
				}
				b, err := proto.Marshal(ev)
				if err != nil {
					continue
				}
				if env := c.secretIn(b); env != "" {
					add(6, "history|"+env+"|"+key, "the password of %s is in the history of workflow %s (run %s), event %d %s",
						env, id, run, ev.GetEventId(), ev.GetEventType())
				}
			}
			if closed && complete {
				c.scanned[key] = true
			}
		}
		token = resp.GetNextPageToken()
		if len(token) == 0 {
			return ""
		}
	}
	return "I6: more than 1000 pages of workflows"
}
