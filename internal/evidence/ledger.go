package evidence

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// Root is the directory of every ledger on a backup server.
const Root = "evidence"

// recordSuffix ends every record file name.
const recordSuffix = ".json"

// Dir is the directory of the ledger of (instance, db) on a backup server:
// evidence/<inst>@<db>, named as the database's files are (tsql.NamesOf),
// so that two databases never share one on a case-insensitive share.
func Dir(instance, db string) string { return Root + "/" + tsql.NamesOf(instance, db).Owner() }

// ImmutableDir is where the copy of server's ledger of (instance, db)
// lives on an object store: evidence/<server>/<inst>@<db>.
func ImmutableDir(server, instance, db string) string {
	return Root + "/" + server + "/" + tsql.NamesOf(instance, db).Owner()
}

// ImmutableFileName is the name of record seq of server's ledger of
// (instance, db) on an object store.
func ImmutableFileName(server, instance, db string, seq int64) string {
	return fileIn(ImmutableDir(server, instance, db), seq)
}

// FileName is the name of record seq of (instance, db): its number only,
// so that two writers appending at once contend for one name and the
// storage's create-exclusive lets exactly one of them have it; the chain
// never forks.
func FileName(instance, db string, seq int64) string { return fileIn(Dir(instance, db), seq) }

func fileIn(dir string, seq int64) string { return fmt.Sprintf("%s/%010d%s", dir, seq, recordSuffix) }

// Entry is a record file of a ledger as listed.
type Entry struct {
	Seq     int64
	Name    string
	Size    int64
	ModTime time.Time
}

// List lists the record files of (instance, db) on st, by number. Files
// under the directory that are not named as records are left out.
func List(ctx context.Context, st storage.Storage, instance, db string) ([]Entry, error) {
	return ListDir(ctx, st, Dir(instance, db))
}

// ListDir lists the record files of the ledger in dir (Dir, ImmutableDir)
// on st, by number.
func ListDir(ctx context.Context, st storage.Storage, dir string) ([]Entry, error) {
	dir += "/"
	files, err := st.List(ctx, dir, recordSuffix)
	if err != nil {
		return nil, fmt.Errorf("list the evidence ledger %s on %s: %w", dir, st.Location(), err)
	}
	var out []Entry
	for _, f := range files {
		base := strings.TrimSuffix(strings.TrimPrefix(f.Name, dir), recordSuffix)
		if len(base) != 10 || strings.Contains(base, "/") {
			continue
		}
		seq, err := strconv.ParseInt(base, 10, 64)
		if err != nil || seq < 1 {
			continue
		}
		out = append(out, Entry{Seq: seq, Name: f.Name, Size: f.Size, ModTime: f.ModTime})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out, nil
}

// TornAfter is how old an empty record file (a writer that died between
// creating it and writing it) must be before the next writer takes its
// number: a younger one is a write in progress.
const TornAfter = 5 * time.Minute

// ErrBusy is returned by Append when another writer holds the next
// record's number longer than Append waits.
var ErrBusy = errors.New("another writer is appending to the evidence ledger")

// Appender appends records, signed with Key.
type Appender struct {
	Key *PrivateKey
	// Now is the clock (time.Now when nil); Wait how long to wait for a
	// concurrent writer's record (5s when 0).
	Now  func() time.Time
	Wait time.Duration
}

// Append writes r as the next record of its database's ledger on st: it
// sets r's Seq, Prev, Schema and At and returns the stored record's hash.
// Two writers of one ledger never fork it: each record's name is its
// number, created exclusively, and a writer that loses a number reads the
// new head and takes the next.
func (a Appender) Append(ctx context.Context, st storage.Storage, r *Record) (string, error) {
	now, wait := a.Now, a.Wait
	if now == nil {
		now = time.Now
	}
	if wait <= 0 {
		wait = 5 * time.Second
	}
	deadline := time.Now().Add(wait)
	r.Schema = schemaOf(r)
	r.At = now().UTC()
	for {
		head, prev, err := a.head(ctx, st, r.Instance, r.Database, now())
		switch {
		case errors.Is(err, ErrBusy) && time.Now().Before(deadline):
			if err := sleep(ctx, 100*time.Millisecond); err != nil {
				return "", err
			}
			continue
		case err != nil:
			return "", err
		}
		r.Seq, r.Prev = head+1, prev
		data, err := Encode(r, a.Key)
		if err != nil {
			return "", err
		}
		name := FileName(r.Instance, r.Database, r.Seq)
		err = writeNew(ctx, st, name, data)
		if errors.Is(err, storage.ErrExists) && time.Now().Before(deadline) {
			continue // another writer took the number: append after its record
		}
		if err != nil {
			return "", fmt.Errorf("write evidence record %s on %s: %w", name, st.Location(), err)
		}
		sum := sha256.Sum256(data)
		return hex.EncodeToString(sum[:]), nil
	}
}

// head returns the newest record's number and hash (0, "" for an empty
// ledger). An empty newest file younger than TornAfter is ErrBusy; an
// older one is removed and its number taken.
func (a Appender) head(ctx context.Context, st storage.Storage, instance, db string, now time.Time) (int64, string, error) {
	for {
		entries, err := List(ctx, st, instance, db)
		if err != nil || len(entries) == 0 {
			return 0, "", err
		}
		last := entries[len(entries)-1]
		if last.Size == 0 {
			if now.Sub(last.ModTime) < TornAfter {
				return 0, "", fmt.Errorf("%w: record %s is being written", ErrBusy, last.Name)
			}
			if err := st.Remove(ctx, last.Name); err != nil && !errors.Is(err, storage.ErrNotFound) {
				return 0, "", fmt.Errorf("remove the empty evidence record %s a writer left: %w", last.Name, err)
			}
			continue
		}
		data, err := storage.ReadFile(ctx, st, last.Name)
		if err != nil {
			return 0, "", fmt.Errorf("read evidence record %s on %s: %w", last.Name, st.Location(), err)
		}
		sum := sha256.Sum256(data)
		return last.Seq, hex.EncodeToString(sum[:]), nil
	}
}

// writeNew creates name (ErrExists when taken) and writes data to it whole.
func writeNew(ctx context.Context, st storage.Storage, name string, data []byte) (err error) {
	w, err := st.Create(ctx, name)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			// Ours, and never a complete record: the next writer takes its number.
			_ = st.Remove(context.WithoutCancel(ctx), name)
		}
	}()
	if _, err = w.WriteAt(data, 0); err == nil {
		if err = w.Sync(); errors.Is(err, storage.ErrUnsupported) {
			err = nil
		}
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	return err
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// recentChecked is how many of the newest records AppendOnce reads for the
// proof it is about to record.
const recentChecked = 16

// AppendOnce is Append, unless one of the newest records of the ledger
// already records the same proof (a retried activity whose first attempt
// wrote it): then r becomes that record, its hash is returned, and nothing
// is written.
func (a Appender) AppendOnce(ctx context.Context, st storage.Storage, r *Record) (string, error) {
	entries, err := List(ctx, st, r.Instance, r.Database)
	if err != nil {
		return "", err
	}
	want := proofKey(r)
	for i := len(entries) - 1; i >= 0 && i >= len(entries)-recentChecked; i-- {
		data, err := storage.ReadFile(ctx, st, entries[i].Name)
		if err != nil {
			return "", fmt.Errorf("read evidence record %s on %s: %w", entries[i].Name, st.Location(), err)
		}
		// The signature is not judged here: Verify does that.
		d, err := Decode(data, nil)
		if err == nil && d.Record.Kind == r.Kind && d.Record.Server == r.Server && proofKey(&d.Record) == want {
			*r = d.Record
			return d.Hash, nil
		}
	}
	return a.Append(ctx, st, r)
}
