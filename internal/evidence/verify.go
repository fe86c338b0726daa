package evidence

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/storage/copier"
)

// Problem is a record that does not match: its number, its file and why.
type Problem struct {
	Seq  int64  `json:"seq"`
	File string `json:"file"`
	Why  string `json:"why"`
}

func (p Problem) String() string { return fmt.Sprintf("record %d (%s): %s", p.Seq, p.File, p.Why) }

// Result is what Verify found in one ledger.
type Result struct {
	Server   string `json:"server"`
	Instance string `json:"instance"`
	Database string `json:"database"`
	// Records is how many record files there are; Head and HeadHash the
	// newest (an auditor who notes them can tell later whether records
	// were removed from the end).
	Records  int    `json:"records"`
	Head     int64  `json:"head"`
	HeadHash string `json:"head_sha256,omitempty"`
	// Pending is set when the newest record is being written (empty,
	// younger than TornAfter): not judged.
	Pending bool `json:"pending,omitempty"`
	// Removed are records whose files the product has removed since
	// (retention deletes a set's manifest first): nothing left to check.
	Removed []int64 `json:"removed,omitempty"`
	// Problems are the records that do not match, in ledger order: the
	// first is the first record that does not match.
	Problems []Problem `json:"problems,omitempty"`
	// Verified are the records whose link and signature hold, in order.
	Verified []Record `json:"-"`
	// Copy names the object store when this is the copy of Server's
	// ledger there (ImmutableDir).
	Copy string `json:"copy_on,omitempty"`
	// Hashes are the SHA-256 of every record file read, by number.
	Hashes map[int64]string `json:"-"`
}

// Compare holds the ledger of a backup server to its copy on an object
// store: every record of the copy must be on the server, with the same
// hash; the first that is not (records removed from the end of the
// server's ledger, which leaves a chain that still verifies, or one put
// back otherwise) is a Problem of the server's ledger.
func (r *Result) Compare(copy Result) {
	seqs := make([]int64, 0, len(copy.Hashes))
	for seq := range copy.Hashes {
		seqs = append(seqs, seq)
	}
	slices.Sort(seqs)
	for _, seq := range seqs {
		want := copy.Hashes[seq]
		got, here := r.Hashes[seq]
		if slices.ContainsFunc(r.Problems, func(p Problem) bool { return p.Seq == seq }) {
			continue // named already
		}
		switch {
		case !here:
			r.Problems = append(r.Problems, Problem{Seq: seq, File: fileIn(Dir(r.Instance, r.Database), seq),
				Why: fmt.Sprintf("missing here, but the copy on %s holds it (SHA-256 %s): it was removed", copy.Copy, want)})
			return
		case got != want:
			r.Problems = append(r.Problems, Problem{Seq: seq, File: fileIn(Dir(r.Instance, r.Database), seq),
				Why: fmt.Sprintf("hashes to %s, its copy on %s to %s: it was changed", got, copy.Copy, want)})
			return
		}
	}
}

// OK reports whether every record matched.
func (r Result) OK() bool { return len(r.Problems) == 0 }

// Options are Verify's.
type Options struct {
	Keys PublicKeys
	// Server is the backup server's name, which every record must carry.
	Server string
	// Quick checks the size of every file but hashes only the first (a
	// set's manifest), not the stripes.
	Quick bool
	// Dir is the ledger's directory on st; "" is Dir(instance, db).
	Dir string
	// Copy says st is an object store holding the copy of the ledger
	// (Dir: ImmutableDir) and of the sets: the files are checked there, but
	// for the first (the manifest, held there as it was verified, before
	// the servers recorded its copy) and those it does not hold (a set not
	// copied there).
	Copy bool
}

// Verify walks the ledger of (instance, db) on st: the records numbered
// from 1 without a gap, each naming its predecessor's hash, signed under
// one of the keys, about this server and database; and the files each
// vouches for, still of the size and SHA-256 recorded. Every record that
// does not match is a Problem; the chain is walked to its end, and a link
// is judged only after a record that matched, so that one change shows as
// the one record changed, not as everything after it. An error is
// returned only when st could not be read.
func Verify(ctx context.Context, st storage.Storage, instance, db string, o Options) (Result, error) {
	res := Result{Server: o.Server, Instance: instance, Database: db, Hashes: map[int64]string{}}
	dir := o.Dir
	if dir == "" {
		dir = Dir(instance, db)
	}
	entries, err := ListDir(ctx, st, dir)
	if err != nil {
		return res, err
	}
	res.Records = len(entries)
	prevHash, want := "", int64(1)
	for i, e := range entries {
		bad := func(format string, args ...any) {
			res.Problems = append(res.Problems, Problem{Seq: e.Seq, File: e.Name, Why: fmt.Sprintf(format, args...)})
		}
		if e.Seq != want {
			res.Problems = append(res.Problems, Problem{Seq: want, File: fileIn(dir, want),
				Why: fmt.Sprintf("missing: the ledger goes from record %d to %d", want-1, e.Seq)})
			prevHash = "" // unknown: the next link is not judged
		}
		want = e.Seq + 1
		data, err := storage.ReadFile(ctx, st, e.Name)
		if err != nil {
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			bad("unreadable: %v", err)
			prevHash = ""
			continue
		}
		sum := sha256.Sum256(data)
		res.Hashes[e.Seq] = hex.EncodeToString(sum[:])
		if len(data) == 0 && i == len(entries)-1 {
			// A writer between creating the file and writing it, or one
			// that died there: the next append takes its number.
			if time.Since(e.ModTime) < TornAfter {
				res.Pending = true
			} else {
				bad("empty: a write cut short (the next append takes its number)")
			}
			continue
		}
		d, err := Decode(data, o.Keys)
		if err != nil {
			bad("not a record: %v", err)
			prevHash = ""
			continue
		}
		res.Head, res.HeadHash = e.Seq, d.Hash
		r := d.Record
		ok := true
		switch {
		case r.Seq != e.Seq:
			bad("says it is record %d", r.Seq)
			ok = false
		case (e.Seq == 1 || prevHash != "") && r.Prev != prevHash:
			bad("names %s as the previous record's SHA-256, but record %d hashes to %s: one of them was changed, or records were removed",
				orNone(r.Prev), e.Seq-1, orNone(prevHash))
			ok = false
		}
		if d.SignatureErr != nil {
			bad("%v", d.SignatureErr)
			ok = false
		}
		if r.Server != o.Server || r.Instance != instance || r.Database != db {
			bad("is about %s/%s on %s, not %s/%s on %s", r.Instance, r.Database, r.Server, instance, db, o.Server)
			ok = false
		}
		// A link is judged only after a record that matched: the record
		// after a changed one names the original's hash, and the change is
		// the changed record's, already named.
		prevHash = ""
		if !ok {
			continue
		}
		prevHash = d.Hash
		files := r.Files
		if o.Copy && len(files) > 0 {
			files = files[1:]
		}
		why, removed, err := checkFiles(ctx, st, files, o.Quick, o.Copy)
		if err != nil {
			return res, err
		}
		switch {
		case removed:
			res.Removed = append(res.Removed, r.Seq)
		case why != "":
			bad("%s", why)
			continue
		}
		res.Verified = append(res.Verified, r)
	}
	return res, nil
}

// checkFiles checks files on st against their record: removed when the
// first is gone (the product removes it first), else why one differs. On
// a copy (an object store) a file missing is one not copied there.
func checkFiles(ctx context.Context, st storage.Storage, files []File, quick, copy bool) (why string, removed bool, err error) {
	for i, f := range files {
		var fi storage.FileInfo
		var sum []byte
		fi, err = st.Stat(ctx, f.Name)
		size := fi.Size
		if err == nil && size == f.Size && (!quick || i == 0 && !copy) {
			// As a copy reads it: several chunks in flight.
			sum, err = copier.Hash(ctx, st, f.Name, size, nil)
		}
		switch {
		case errors.Is(err, storage.ErrNotFound) && copy:
			continue
		case errors.Is(err, storage.ErrNotFound):
			if i == 0 {
				return "", true, nil
			}
			return fmt.Sprintf("file %s is missing while %s is still there", f.Name, files[0].Name), false, nil
		case err != nil && ctx.Err() != nil:
			return "", false, ctx.Err()
		case err != nil:
			return fmt.Sprintf("file %s cannot be read: %v", f.Name, err), false, nil
		case size != f.Size:
			return fmt.Sprintf("file %s has %d bytes, the record says %d: it was changed", f.Name, size, f.Size), false, nil
		case sum != nil && hex.EncodeToString(sum) != f.SHA256:
			return fmt.Sprintf("file %s hashes to SHA-256 %x, the record says %s: it was changed", f.Name, sum, f.SHA256), false, nil
		}
	}
	return "", false, nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
