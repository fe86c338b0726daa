package chaos

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/status"
	"github.com/backupcycle/backupcycle/internal/tsql"
	"github.com/backupcycle/backupcycle/workflows"
)

// Anyone who can write a backup share can plant files there (README,
// "Security model": share writers). The plant faults do so on one share,
// HostileServer, at a random moment of a run, and leave the files there:
//
//   - plant-symlinks: stripe-named symbolic links (<inst>@<db>_<seq>_1of1.bak,
//     and _2of2.bak, the name the set of that number gets) and a
//     half-copied stripe's name (<inst>@<db>_<seq>_1of8.bak.partial), all
//     pointing to a file outside the share;
//   - plant-huge-manifest: a 64 GiB sparse file named like a manifest of a
//     configured database (no disk is used);
//   - plant-forged-manifest: a copy of a real manifest altered to say
//     verified with a fresh time and another run id (or "", or the running
//     cycle's), its signature dropped or made with another key;
//   - plant-wide-sequence: an empty stripe numbered 999999999999999999.
//
// The sequence a planted name carries is the running cycle's own when it
// has one and the name is free, else the next free numbers of the
// database. I13 checks after every run that the file outside the share is
// neither written (content, size, mtime) nor read into a set (its marker in
// no file on either share), that the product's status counts no forged
// manifest's set as verified and reports what it can read of the planted
// manifests (unauthenticated, or broken), and that no database's cycles
// keep failing the same way while the planted files lie there.

// HostileServer is the backup server whose share the plant faults write to.
const HostileServer = Bak02

// outsideDir holds the file the planted links point to, outside every share.
const outsideDir = "outside"

// HugeManifestSize is the apparent size of the planted sparse manifest.
const HugeManifestSize = 64 << 30

// WideSequence is the number of the planted stripe: 18 digits, above
// tsql.MaxSequence.
const WideSequence = "999999999999999999"

// planted is one file a plant fault wrote.
type planted struct {
	Run    int
	Kind   Fault
	Name   string // on HostileServer
	Target Target
	Seq    int64
	What   string // for the report
}

// hostile is what the plant faults left and what I13 checks them against.
type hostile struct {
	outside string   // the file outside the share
	marker  []byte   // what every 64 bytes of it start with
	sum     [32]byte // its content, size and mtime when made
	size    int64
	mtime   time.Time
	files   []planted
	// reported are the planted files the product reported (status:
	// unauthenticated or broken; a worker log naming the file).
	reported map[string]bool
}

// outsideFile makes the file the links point to, once: a marker of random
// bytes repeated, so that any part of it copied anywhere shows.
func (c *Checker) outsideFile() (string, error) {
	h := &c.hostile
	if h.outside != "" {
		return h.outside, nil
	}
	marker := make([]byte, 32)
	if _, err := rand.Read(marker); err != nil {
		return "", err
	}
	block := append(append([]byte(nil), marker...), []byte(strings.Repeat("outside-the-share.", 2))[:32]...)
	content := bytes.Repeat(block, 4096) // 256 KiB
	path := filepath.Join(c.f.Root, outsideDir, "secret-of-another-tenant.bin")
	if err := os.WriteFile(path, content, 0o644); err != nil {
		return "", err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	sum, err := hashFile(path)
	if err != nil {
		return "", err
	}
	h.outside, h.marker, h.sum, h.size, h.mtime = path, marker, sum, fi.Size(), fi.ModTime()
	return path, nil
}

// isPlanted reports whether name on server is a file a plant fault wrote.
func (c *Checker) isPlanted(server, name string) bool {
	return server == HostileServer && slices.ContainsFunc(c.hostile.files, func(p planted) bool { return p.Name == name })
}

// plantSeqs are the numbers planted names of t use: the running cycle's
// (seq, when it has one) first, then the next ones above every number of
// t on both shares.
func (s *Sim) plantSeqs(t Target, seq int64) []int64 {
	names := tsql.AllNamesOf(t.Instance, t.Database)
	top := seq
	for _, srv := range Servers {
		entries, _ := os.ReadDir(s.F.ShareDir(srv))
		for _, e := range entries {
			p, ok := tsql.ParseStripeFileName(strings.TrimSuffix(e.Name(), ".partial"))
			if !ok {
				p, ok = tsql.ParseManifestFileName(e.Name())
			}
			if ok && slices.ContainsFunc(names, func(n tsql.SetNames) bool { return n.Owner() == p.Owner() }) {
				top = max(top, p.Sequence)
			}
		}
	}
	var out []int64
	if seq > 0 {
		out = append(out, seq)
	}
	return append(out, top+1, top+2)
}

// free reports whether name is free on the hostile share (no entry at all).
func (s *Sim) free(name string) bool {
	_, err := os.Lstat(filepath.Join(s.F.ShareDir(HostileServer), name))
	return errors.Is(err, os.ErrNotExist)
}

// plant writes the run's plant fault on HostileServer; "" when nothing
// could be planted.
func (s *Sim) plant(r *run) (string, error) {
	p := r.plan
	t := p.Target
	dir := s.F.ShareDir(HostileServer)
	names := tsql.NamesOf(t.Instance, t.Database)
	seqs := s.plantSeqs(t, r.seq)
	pickSeq := func(name func(int64) string) (int64, string, bool) {
		start := int(p.Pick % uint64(len(seqs)))
		for i := range seqs {
			seq := seqs[(start+i)%len(seqs)]
			if n := name(seq); s.free(n) {
				return seq, n, true
			}
		}
		return 0, "", false
	}
	var made []planted
	switch p.Fault {
	case FaultPlantLink:
		target, err := s.C.outsideFile()
		if err != nil {
			return "", err
		}
		for _, name := range []func(int64) string{
			func(seq int64) string { return names.Stripe(seq, 1, 1) },
			func(seq int64) string { return names.Stripe(seq, 1, 8) + ".partial" },
			// The name the set of that number gets (stripes: 2): SQL
			// Server would write through it, and the copy read it.
			func(seq int64) string { return names.Stripe(seq, 2, 2) },
		} {
			seq, n, ok := pickSeq(name)
			if !ok {
				continue
			}
			if err := os.Symlink(target, filepath.Join(dir, n)); err != nil {
				return "", err
			}
			made = append(made, planted{Name: n, Seq: seq, What: "symlink to " + filepath.Base(target)})
		}
	case FaultPlantHuge:
		seq, n, ok := pickSeq(names.Manifest)
		if !ok {
			break
		}
		f, err := os.OpenFile(filepath.Join(dir, n), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return "", err
		}
		err = f.Truncate(HugeManifestSize) // sparse: no block is allocated
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return "", err
		}
		made = append(made, planted{Name: n, Seq: seq, What: fmt.Sprintf("%d GiB sparse", HugeManifestSize>>30)})
	case FaultPlantForged:
		pl, err := s.forge(r, seqs)
		if err != nil || pl == nil {
			return "", err
		}
		made = append(made, *pl)
	case FaultPlantWideSeq:
		// 15 to 20 digits for the target's: above MaxSequence, past int64.
		wide := fmt.Sprintf("%015d", p.Offset%1e15) + WideSequence[:p.Offset%6]
		for _, n := range []string{Sql01 + "@Sales_" + WideSequence + "_1of1.bak", names.Owner() + "_9" + wide[1:] + "_1of1.bak"} {
			if !s.free(n) {
				continue
			}
			if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
				return "", err
			}
			made = append(made, planted{Name: n, What: "empty"})
		}
	}
	var out []string
	for _, pl := range made {
		pl.Run, pl.Kind, pl.Target = p.Run, p.Fault, t
		s.C.hostile.files = append(s.C.hostile.files, pl)
		out = append(out, fmt.Sprintf("%s (%s)", pl.Name, pl.What))
	}
	return strings.Join(out, ", "), nil
}

// forge writes a copy of a signed manifest of the target (else of any
// database) altered to say verified now, under a free number of the
// target's, with another run id, "" or the running cycle's, unsigned or
// signed with a key the workers do not hold.
func (s *Sim) forge(r *run, seqs []int64) (*planted, error) {
	p := r.plan
	files, _ := s.C.scan()
	// The base: a manifest of the target, verified if one is, else of any
	// database (then numbered among that database's sets).
	rank := func(mf *manifestFile) int {
		n := 0
		if mf.ID.Instance == p.Target.Instance && mf.ID.Database == p.Target.Database {
			n += 2
		}
		if mf.M.State == catalog.StateVerified {
			n++
		}
		return n
	}
	var base *manifestFile
	for i := range files {
		if base == nil || rank(&files[i]) > rank(base) {
			base = &files[i]
		}
	}
	if base == nil {
		return nil, nil
	}
	if rank(base) < 2 {
		seqs = s.plantSeqs(Target{base.ID.Instance, base.ID.Database}, 0)
	}
	var doc map[string]any
	if err := json.Unmarshal(base.Raw, &doc); err != nil {
		return nil, err
	}
	names := base.M.Names()
	var seq int64
	name := ""
	start := int(p.Pick % uint64(len(seqs)))
	for i := range seqs {
		if n := names.Manifest(seqs[(start+i)%len(seqs)]); s.free(n) {
			seq, name = seqs[(start+i)%len(seqs)], n
			break
		}
	}
	if name == "" {
		return nil, nil
	}
	now := time.Now().UTC()
	doc["sequence"] = seq
	doc["state"] = string(catalog.StateVerified)
	doc["updated_at"] = now
	hist, _ := doc["history"].([]any)
	doc["history"] = append(hist, map[string]any{"state": string(catalog.StateVerified), "at": now})
	delete(doc, "failure")
	delete(doc, "cancelled")
	var how []string
	switch (p.Pick / 3) % 3 {
	case 0:
		doc["run_id"] = newHex(16)
		how = append(how, "another run_id")
	case 1:
		doc["run_id"] = ""
		how = append(how, `run_id ""`)
	case 2:
		// The running cycle's own ids, as its history shows them.
		if ref, ok := s.observed(context.Background(), r); ok {
			doc["workflow_id"], doc["run_id"] = ref.ID, ref.RunID
			how = append(how, "the running cycle's ids")
		} else {
			doc["run_id"] = newHex(16)
			how = append(how, "another run_id")
		}
	}
	delete(doc, "signature")
	raw, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	if (p.Pick/9)%2 == 0 {
		how = append(how, "unsigned")
	} else {
		// Signed as a worker signs, with a key of the same id that is not
		// the workers': the signature verifies under no configured key.
		m, err := catalog.Decode(raw)
		if err == nil {
			keys, kerr := catalog.NewKeys(catalog.Key{ID: manifestKeyID, Secret: []byte(newHex(32))})
			if kerr == nil {
				if b, err := catalog.EncodeSigned(m, keys); err == nil {
					raw = b
					how = append(how, "signed with another key")
				}
			}
		}
		if len(how) == 1 {
			how = append(how, "unsigned")
		}
	}
	path := filepath.Join(s.F.ShareDir(HostileServer), name)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	_, err = f.Write(raw)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return &planted{Name: name, Seq: seq, What: fmt.Sprintf("forged from %s seq %d (%s): verified now, %s",
		base.Server, base.ID.Sequence, base.M.State, strings.Join(how, ", "))}, nil
}

func newHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// I13: what a share writer planted neither leaks nor steers: the file
// outside the share is unchanged (content, size, mtime) and its marker is
// in no file of either share; the product's status (status.Load over SMB,
// as `starter status --from-manifests` reads) counts no set as verified
// that only an unauthenticated manifest calls verified, and reports the
// planted manifests it reads (unauthenticated, or broken when too big).
func (c *Checker) checkI13(ctx context.Context, add addFunc) Notes {
	h := &c.hostile
	var notes Notes
	if h.outside != "" {
		fi, err := os.Stat(h.outside)
		switch {
		case err != nil:
			add(13, "outside|gone", "the file outside the share %s is gone: %v", h.outside, err)
		case fi.Size() != h.size || !fi.ModTime().Equal(h.mtime):
			add(13, "outside|changed", "the file outside the share %s changed: size %d mtime %s (was %d, %s)", h.outside, fi.Size(),
				fi.ModTime().Format(time.RFC3339Nano), h.size, h.mtime.Format(time.RFC3339Nano))
		default:
			if sum, err := hashFile(h.outside); err != nil || sum != h.sum {
				add(13, "outside|content", "the content of the file outside the share %s changed (%v)", h.outside, err)
			}
		}
		for _, srv := range Servers {
			dir := c.f.ShareDir(srv)
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				fi, err := e.Info()
				if err != nil || !fi.Mode().IsRegular() || fi.Size() > 1<<30 {
					continue // links are the planted ones; a sparse giant is no set
				}
				if found, _ := fileContains(filepath.Join(dir, e.Name()), h.marker); found {
					add(13, "leak|"+srv+"|"+e.Name(), "%s/%s holds the content of the file outside the share that a planted link points to", srv, e.Name())
				}
			}
		}
	}
	if len(h.files) == 0 {
		return notes
	}
	rep := status.Load(ctx, c.f.Cfg, nil, time.Now())
	trustedVerified := map[setKey]bool{}
	files, _ := c.scan()
	for _, mf := range files {
		if mf.M.State == catalog.StateVerified {
			trustedVerified[mf.ID.setKey] = true
		}
	}
	for _, srv := range rep.Servers {
		if srv.Error != "" {
			notes = append(notes, fmt.Sprintf("I13: status could not read %s: %s", srv.Name, srv.Error))
		}
		for name := range srv.Broken {
			if srv.Name == HostileServer {
				c.reportedPlant(name)
			}
		}
	}
	for _, d := range rep.Databases {
		if lv := d.LastVerified; lv != nil && !trustedVerified[setKey{d.Instance, d.Database, lv.Sequence}] {
			for _, pl := range h.files {
				if pl.Kind == FaultPlantForged && pl.Seq == lv.Sequence && strings.EqualFold(pl.Target.Database, d.Database) {
					add(13, fmt.Sprintf("forged|%s|%s|%d", d.Instance, d.Database, lv.Sequence),
						"status counts %s/%s seq %d as its last verified set, which only the forged manifest %s calls verified", d.Instance, d.Database, lv.Sequence, pl.Name)
				}
			}
		}
		for _, u := range d.Unauthenticated {
			for _, pl := range h.files {
				if pl.Kind == FaultPlantForged && pl.Seq == u.Sequence && slices.Contains(u.Servers, HostileServer) {
					c.reportedPlant(pl.Name)
				}
			}
		}
	}
	// A forged or broken manifest the status read and did not report.
	present := map[string]bool{}
	if entries, err := os.ReadDir(c.f.ShareDir(HostileServer)); err == nil {
		for _, e := range entries {
			present[e.Name()] = true
		}
	}
	for _, pl := range h.files {
		if (pl.Kind == FaultPlantForged || pl.Kind == FaultPlantHuge) && present[pl.Name] && !h.reported[pl.Name] && len(rep.Incomplete()) == 0 {
			add(13, "unreported|"+pl.Name, "the planted %s on %s (%s, run %d) is in no status report (not unauthenticated, not broken)", pl.Name, HostileServer, pl.What, pl.Run)
		}
	}
	return notes
}

// reportedIn notes the planted files a worker log line names.
func (c *Checker) reportedIn(line []byte) {
	for _, pl := range c.hostile.files {
		if bytes.Contains(line, []byte(pl.Name)) {
			c.reportedPlant(pl.Name)
		}
	}
}

func (c *Checker) reportedPlant(name string) {
	if c.hostile.reported == nil {
		c.hostile.reported = map[string]bool{}
	}
	c.hostile.reported[name] = true
}

// fileContains reports whether the file at path holds marker.
func fileContains(path string, marker []byte) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	carry := 0
	for {
		n, err := f.Read(buf[carry:])
		if bytes.Contains(buf[:carry+n], marker) {
			return true, nil
		}
		if err == io.EOF {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		// Keep the tail a marker may straddle.
		k := min(len(marker)-1, carry+n)
		copy(buf, buf[carry+n-k:carry+n])
		carry = k
	}
}

// poisoned notes (I13) a database whose cycles failed the same way
// StuckAfter times in a row since a file was planted for it and while it
// lies on the share, when the estate could read its sets: a planted file
// is reported, not a reason never to verify again.
func (c *Checker) poisoned(t Target, from, run int, class string, add addFunc) {
	var names []string
	for _, pl := range c.hostile.files {
		if pl.Target == t && pl.Run <= from {
			if _, err := os.Lstat(filepath.Join(c.f.ShareDir(HostileServer), pl.Name)); err == nil {
				names = append(names, pl.Name)
			}
		}
	}
	if len(names) == 0 {
		return
	}
	sort.Strings(names)
	add(13, fmt.Sprintf("poisoned|%s|%d", t, from), "the cycles of %s failed the same way (%s) in runs %d..%d while planted files lie on %s: %s",
		t, class, from, run, HostileServer, strings.Join(names, ", "))
}

// I14: no worker process ends on its own (crash, panic, exit): only the
// harness kills workers.
func (c *Checker) checkI14(add addFunc) {
	for _, w := range c.f.workers {
		if why := w.Crashed(); why != "" {
			add(14, "exit|"+w.Identity, "worker %s ended without being killed: %s (log %s)", w.Identity, why, filepath.Base(w.LogFile))
		}
	}
}

// panicLine reports whether a worker log line is a Go runtime's crash.
func panicLine(line []byte) bool {
	return bytes.HasPrefix(line, []byte("panic: ")) || bytes.HasPrefix(line, []byte("fatal error: "))
}

// I15: every set is written by its database's one cycle: the run a trusted
// manifest names ran under the database's own workflow id
// (workflows.CycleWorkflowID of the instance and the database, or of the
// databases: entry the set was made with), whatever name a start typed (a
// case variant, a leading or trailing blank).
func (c *Checker) checkI15(files []manifestFile, add addFunc) {
	for _, mf := range files {
		m := mf.M
		if m.WorkflowID == "" {
			continue
		}
		ok := strings.EqualFold(m.WorkflowID, workflows.CycleWorkflowID(mf.ID.Instance, mf.ID.Database)) ||
			m.Entry != "" && strings.EqualFold(m.WorkflowID, workflows.CycleWorkflowID(mf.ID.Instance, m.Entry))
		if !ok {
			add(15, fmt.Sprintf("%v|%s", mf.ID, m.WorkflowID), "%s (manifest %s/%s) was written by workflow %q, not by its database's cycle %q",
				mf.ID, mf.Server, mf.File, m.WorkflowID, workflows.CycleWorkflowID(mf.ID.Instance, mf.ID.Database))
		}
	}
}

// startRanAs checks (I15) how a Web UI start that typed the name with a
// blank ended: it launched the database's cycle, was skipped for it, or
// was refused with InvalidConfig; never did it run a cycle under its own
// id. res is its result, errType its error type ("" when it returned one).
func (c *Checker) startRanAs(p Plan, ref wfRef, res *workflows.CycleResult, errType string, faulted bool) {
	if p.Blank == "" || ref.ID == CanonicalID(p.Target) {
		return
	}
	typed := blanked(spell(p.Target.Database, p.Estate.Spell), p.Blank)
	c.later = append(c.later, func(add addFunc) {
		switch {
		case res != nil && res.Skipped == "" && res.RunBy == "":
			add(15, "ranas|"+ref.ID, "the Web UI start %s of %q ran the cycle itself (verified seq %d) instead of under %s", ref.ID, typed, res.Sequence, CanonicalID(p.Target))
		case res != nil && res.RunBy != "" && !strings.EqualFold(res.RunBy, CanonicalID(p.Target)):
			add(15, "ranby|"+ref.ID, "the Web UI start %s of %q ran the cycle as %s, not as %s", ref.ID, typed, res.RunBy, CanonicalID(p.Target))
		case res == nil && !faulted && errType != "" && errType != activities.ErrInvalidConfig:
			add(15, "refused|"+ref.ID, "the Web UI start %s of %q was refused with %s, not InvalidConfig nor launched as %s", ref.ID, typed, errType, CanonicalID(p.Target))
		}
	})
}
