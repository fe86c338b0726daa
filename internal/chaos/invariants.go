package chaos

import (
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

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
	"github.com/backupcycle/backupcycle/internal/sqlsim/tds"
)

// Violation is one broken invariant.
type Violation struct {
	Invariant int    // 1..16
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
	checkedI7    map[setID]bool // I7 passed once
	estates      []estateSpan   // the estate of each run, from its start (I8)
	applying     time.Time      // when the fleet began to change to the next estate
	hostile      hostile        // what the plant faults left (I13)
	untrusted    []manifestFile // the unauthenticated manifests of the last scan (I13)
	// later are checks the simulation queued during a run (I13 poisoning,
	// I15 starts), run by the next Check.
	later []func(addFunc)
	// logs is what the simulation told the log chain's checks (I9-I11).
	logs logChecks
	// recs counts what I12 judged (recovercheck.go).
	recs recoverChecks
	// vault is what I16 remembers of the immutable copies (vaultcheck.go).
	vault vaultState
	// stmts replaces the emulators' statement logs, restores verify01's
	// restore history and runStart the start of a workflow run (tests);
	// nil reads the fleet.
	stmts    func(instance string) []sqlsim.StatementRecord
	restores func() []sqlsim.RestoreRecord
	runStart func(ctx context.Context, workflowID, runID string) (time.Time, error)
}

// estateSpan is the estate from an instant on; since is when the fleet
// began to change to it (its instances restarted in between, each on
// its old or new build and zone).
type estateSpan struct {
	from, since time.Time
	e           Estate
}

// EstateApplying records that the fleet begins to change to the next
// estate at t (EstateFrom says which, once applied).
func (c *Checker) EstateApplying(t time.Time) { c.applying = t }

// EstateFrom records that the fleet is in estate e from t on.
func (c *Checker) EstateFrom(t time.Time, e Estate) {
	since := t
	if !c.applying.IsZero() && c.applying.Before(t) {
		since = c.applying
	}
	c.applying = time.Time{}
	c.estates = append(c.estates, estateSpan{from: t, since: since, e: e})
}

// estateAt is the estate at t (false before the first run).
func (c *Checker) estateAt(t time.Time) (Estate, bool) {
	for i := len(c.estates) - 1; i >= 0; i-- {
		if !c.estates[i].from.After(t) {
			return c.estates[i].e, true
		}
	}
	return Estate{}, false
}

// NewChecker starts with nothing seen.
func NewChecker(f *Fleet) *Checker {
	return &Checker{f: f, guids: map[setKey]string{}, verified: map[setID]map[string]map[string][32]byte{},
		proven: map[setID]bool{}, everVerified: map[Target]bool{}, reported: map[string]bool{}, damaged: map[string]bool{},
		scanned: map[string]bool{}, logOffsets: map[string]int64{}, checkedI7: map[setID]bool{}}
}

// Stats says how much the checks covered, for the report.
func (c *Checker) Stats() string {
	var logBytes int64
	for _, n := range c.logOffsets {
		logBytes += n
	}
	return fmt.Sprintf("checked %d manifests in the last scan (%d more not authenticated), %d sets seen verified (%d with their CHECKDB found, I7), %d set numbers, %d workflow histories, %d MiB of worker logs; %d files planted on %s, %d of them reported (status or a worker's log)",
		c.lastScan, len(c.untrusted), len(c.verified), len(c.checkedI7), len(c.guids), len(c.scanned), logBytes>>20,
		len(c.hostile.files), HostileServer, len(c.hostile.reported)) + "; " + c.logs.stats() + "; " + c.vaultStats()
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
	n = c.checkI7(ctx, files, add)
	notes = append(notes, n...)
	c.checkI8(files, add)
	n = c.checkI13(ctx, add)
	notes = append(notes, n...)
	c.checkI14(add)
	c.checkI15(files, add)
	n = c.checkI16(ctx, files, add)
	notes = append(notes, n...)
	n = c.checkLogs(ctx, files, add)
	notes = append(notes, n...)
	for _, f := range c.later {
		f(add)
	}
	c.later = nil
	return out, notes
}

// MaxManifestRead is how much of a manifest the checker reads, as the
// product (storage.MaxSmallFile): a bigger file is no manifest.
const MaxManifestRead = 1 << 20

// readManifest reads at most MaxManifestRead bytes of path; too big is an
// error.
func readManifest(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, MaxManifestRead+1))
	if err == nil && len(raw) > MaxManifestRead {
		err = fmt.Errorf("over %d bytes: no manifest", MaxManifestRead)
	}
	return raw, err
}

// scan reads every manifest of both servers that the product trusts
// (signed with the workers' key); the others are in c.untrusted.
func (c *Checker) scan() ([]manifestFile, Notes) {
	var out, untrusted []manifestFile
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
			raw, err := readManifest(filepath.Join(c.f.ShareDir(s), name))
			if err != nil {
				if !c.isPlanted(s, name) {
					notes = append(notes, fmt.Sprintf("cannot read %s/%s: %v", s, name, err))
				}
				continue
			}
			m, err := catalog.DecodeWith(raw, c.f.keys)
			if err != nil {
				if !c.isPlanted(s, name) {
					notes = append(notes, fmt.Sprintf("manifest %s/%s does not decode: %v", s, name, err))
				}
				continue
			}
			mf := manifestFile{Server: s, File: name, M: m, Raw: raw,
				ID: setID{setKey: setKey{Instance: m.SourceInstance, Database: m.Database, Sequence: m.Sequence}}}
			if m.Header != nil {
				mf.ID.GUID = normGUID(m.Header.BackupSetGUID)
			}
			if !m.Trusted() {
				untrusted = append(untrusted, mf)
				continue
			}
			out = append(out, mf)
		}
	}
	c.untrusted = untrusted
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
	Date time.Time // restore_date as an instant
	Dest string
	GUID string
}

// restoreHistory is the verification instance's restore history with the
// GUID of each restored backup set, oldest first. It comes from the
// emulator, whose rows keep the instant (msdb's restore_date is the wall
// clock of a zone that may have changed since).
func (c *Checker) restoreHistory() ([]restoreRow, error) {
	var recs []sqlsim.RestoreRecord
	switch {
	case c.restores != nil:
		recs = c.restores()
	case c.f.Instances[Verify01] != nil:
		recs = c.f.Instances[Verify01].RestoreHistory()
	default:
		return nil, errors.New("no verification instance")
	}
	out := make([]restoreRow, 0, len(recs))
	for _, r := range recs {
		out = append(out, restoreRow{ID: r.ID, Date: r.Date, Dest: r.Database, GUID: normGUID(r.BackupSetGUID)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// unproven are the verified manifests of sets an invariant (inv) has not
// proven yet (done), with the verification instance's restore history and
// statements to prove them by; none, with a note, when the history cannot
// be read.
func (c *Checker) unproven(files []manifestFile, done map[setID]bool, inv string) ([]manifestFile, []restoreRow, []sqlsim.StatementRecord, Notes) {
	var todo []manifestFile
	for _, mf := range files {
		if mf.M.State == catalog.StateVerified && !done[mf.ID] {
			todo = append(todo, mf)
		}
	}
	if len(todo) == 0 {
		return nil, nil, nil, nil
	}
	history, err := c.restoreHistory()
	if err != nil {
		return nil, nil, nil, Notes{fmt.Sprintf("%s not checked: %v", inv, err)}
	}
	return todo, history, c.statements(Verify01), nil
}

// I2: every verified manifest's set was restored from its own backup (its
// GUID in the verification instance's restore history) and a clean CHECKDB
// ran on that restored copy before anything replaced it (a RESTORE SQL
// Server refused replaced nothing: overwrote).
func (c *Checker) checkI2(ctx context.Context, files []manifestFile, add addFunc) Notes {
	todo, history, stmts, notes := c.unproven(files, c.proven, "I2")
	if len(todo) == 0 {
		return notes
	}
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
			restoredAt := r.Date
			var next time.Time // the next restore into the same database
			for _, o := range history {
				if o.ID > r.ID && strings.EqualFold(o.Dest, r.Dest) {
					next = o.Date
					break
				}
			}
			for _, s := range stmts {
				if s.Kind != "DBCC CHECKDB" || s.Outcome != "ok" || !strings.EqualFold(s.Database, r.Dest) {
					continue
				}
				start, end := s.Start, s.End
				if start.Before(restoredAt.Add(-slack)) || (!next.IsZero() && !start.Before(next)) {
					continue
				}
				// Nothing restored over the copy while CHECKDB read it.
				clean := true
				for _, o := range stmts {
					if overwrote(o, r.Dest) && o.Start.After(restoredAt.Add(slack)) && o.Start.Before(end) {
						clean = false
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

// overwrote reports whether st is a RESTORE DATABASE into dest that may
// have written over it: any but one SQL Server refused before it touched
// the database, with 3101 "Exclusive access could not be obtained because
// the database is in use" (Database Engine events and errors 3000 to 3999,
// https://learn.microsoft.com/en-us/sql/relational-databases/errors-events/database-engine-events-and-errors-3000-to-3999):
// another session (a RESTORE, a CHECKDB) held it, and it stayed as it was.
// A RESTORE that failed later (a damaged page, a crash, KILL) had begun
// replacing it.
func overwrote(st sqlsim.StatementRecord, dest string) bool {
	if st.Kind != "RESTORE DATABASE" || !strings.EqualFold(st.Database, dest) {
		return false
	}
	var errs tds.Errors
	refused := errors.As(st.Error, &errs) && slices.ContainsFunc(errs, func(e *tds.Error) bool { return e.Number == 3101 })
	return !refused
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

// statements is what an instance ran (its emulator's statement log, with
// the BACKUP, RESTORE and CHECKDB statements of its earlier lives); for the
// group, what its replicas ran.
func (c *Checker) statements(instance string) []sqlsim.StatementRecord {
	if c.stmts != nil {
		return c.stmts(instance)
	}
	if instance == AGroup {
		var out []sqlsim.StatementRecord
		for _, r := range agReplicas {
			out = append(out, c.f.Statements(r)...)
		}
		return out
	}
	return c.f.Statements(instance)
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
