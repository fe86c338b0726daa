package catalog

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// FileInfo describes one file of a backup directory.
type FileInfo struct {
	Name    string // base name, no directory
	Size    int64
	ModTime time.Time
}

// FS is the file access the catalog needs in one backup directory (a local
// directory or an SMB share path). internal/storage adapts its backends to
// it; the catalog does not import storage.
//
// Contract: names are base names inside the directory. Create creates or
// truncates. Rename must atomically replace newName if it exists (os.Rename
// semantics; on SMB a rename with ReplaceIfExists). ReadFile of a missing file
// returns an error wrapping io/fs.ErrNotExist; it reads small files only
// (storage.MaxSmallFile). List returns the plain files of the directory (no
// subdirectories) whose names start with prefix and end with suffix: only
// those are read from the server (storage.Storage.List).
type FS interface {
	ReadFile(ctx context.Context, name string) ([]byte, error)
	Create(ctx context.Context, name string) (io.WriteCloser, error)
	Rename(ctx context.Context, oldName, newName string) error
	Remove(ctx context.Context, name string) error
	List(ctx context.Context, prefix, suffix string) ([]FileInfo, error)
}

// tempMarker is in every temporary name, so listings can skip (and
// retention can clean up) the leftovers of a crashed write.
const tempMarker = ".tmp-"

// IsTempName reports whether name is a temporary file of WriteFileAtomic.
func IsTempName(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name, tempMarker)
}

// WriteFileAtomic writes data under name so that readers see either the old
// content or the new one, never a torn file: it writes ".<name>.tmp-<random>",
// syncs it if the writer supports Sync, closes it, then renames it over name.
// On any error the temporary file is removed (best effort) and name is
// untouched.
func WriteFileAtomic(ctx context.Context, fsys FS, name string, data []byte) (err error) {
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return fmt.Errorf("write %s: temporary name: %w", name, err)
	}
	tmp := "." + name + tempMarker + hex.EncodeToString(rnd[:])
	w, err := fsys.Create(ctx, tmp)
	if err != nil {
		return fmt.Errorf("write %s: create %s: %w", name, tmp, err)
	}
	defer func() {
		if err != nil {
			// The temporary file is not trusted by anyone; its removal may fail
			// when the share is gone, and retention removes it later.
			_ = fsys.Remove(context.WithoutCancel(ctx), tmp)
		}
	}()
	if _, err = w.Write(data); err != nil {
		w.Close()
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if s, ok := w.(interface{ Sync() error }); ok {
		if err = s.Sync(); err != nil {
			w.Close()
			return fmt.Errorf("write %s: sync: %w", tmp, err)
		}
	}
	if err = w.Close(); err != nil {
		return fmt.Errorf("write %s: close: %w", tmp, err)
	}
	if err = fsys.Rename(ctx, tmp, name); err != nil {
		return fmt.Errorf("write %s: rename %s: %w", name, tmp, err)
	}
	return nil
}

// Save encodes m, signed with keys (unsigned with nil keys), and writes it
// atomically as m.FileName().
func Save(ctx context.Context, fsys FS, keys *Keys, m *Manifest) error {
	data, err := EncodeSigned(m, keys)
	if err != nil {
		return err
	}
	return WriteFileAtomic(ctx, fsys, m.FileName(), data)
}

// DB is the sets of one database: of Instance (its configuration name),
// recorded under Database (the name as sys.databases spells it), and
// written under either naming (tsql.AllNamesOf). Also are other spellings
// under which sets of this database were written before started names were
// resolved against sys.databases: its databases: entry's, when that
// differs only in case on a case-insensitive instance. A set recorded under
// one of them counts only when it was written before case-safe names
// (Manifest.Naming ""). Instances are other instance keys its sets were
// written under: for a database of an availability group (Instance is the
// group's name), its replicas and aliases, whose sets from before the
// group was configured count as the database's.
type DB struct {
	Instance, Database string
	Also               []string
	Instances          []string
}

// Of is DB{Instance: instance, Database: db}.
func Of(instance, db string) DB { return DB{Instance: instance, Database: db} }

// instances are Instance, then Instances.
func (d DB) instances() []string { return append([]string{d.Instance}, d.Instances...) }

// Names are every naming the database's files may have, current first.
func (d DB) Names() []tsql.SetNames {
	var out []tsql.SetNames
	add := func(n tsql.SetNames) {
		if !slices.ContainsFunc(out, func(o tsql.SetNames) bool { return o.Owner() == n.Owner() }) {
			out = append(out, n)
		}
	}
	for _, inst := range d.instances() {
		for _, n := range tsql.AllNamesOf(inst, d.Database) {
			add(n)
		}
		for _, a := range d.Also {
			if a != d.Database {
				add(tsql.LegacyNamesOf(inst, a))
			}
		}
	}
	return out
}

// Owns reports whether m is a set of the database: recorded under its name
// (or, seen from a configuration without the server, under its databases:
// entry's, Manifest.Entry), or a set written before case-safe names under
// one of Also; by Instance or one of Instances.
func (d DB) Owns(m *Manifest) bool {
	if !slices.Contains(d.instances(), m.SourceInstance) {
		return false
	}
	return m.Database == d.Database || m.Entry != "" && m.Entry == d.Database ||
		m.Naming == "" && slices.Contains(d.Also, m.Database)
}

// OwnsName reports whether a parsed file name is of one of the database's
// namings.
func (d DB) OwnsName(p tsql.ParsedName) bool {
	for _, n := range d.Names() {
		if p.Owner() == n.Owner() {
			return true
		}
	}
	return false
}

// String is instance/database, for messages.
func (d DB) String() string { return d.Instance + "/" + d.Database }

// Load reads and strictly decodes the manifest of set seq of the database,
// under whichever of its namings it was written (the current one first),
// checking that the file really describes that set, and authenticates it
// with keys (Manifest.Auth). When no naming has the file, the error wraps
// the current name's not-exist error.
func Load(ctx context.Context, fsys FS, keys *Keys, d DB, seq int64) (*Manifest, error) {
	var first error
	for _, n := range d.Names() {
		name := n.Manifest(seq)
		data, err := fsys.ReadFile(ctx, name)
		if err != nil {
			if first == nil {
				first = fmt.Errorf("read manifest %s: %w", name, err)
			}
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, storage.ErrNotFound) {
				continue
			}
			return nil, fmt.Errorf("read manifest %s: %w", name, err)
		}
		m, err := DecodeWith(data, keys)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if !d.Owns(m) || m.Sequence != seq || m.FileName() != name {
			return nil, fmt.Errorf("manifest %s describes set %d of %s/%s, not set %d of %s", name, m.Sequence, m.SourceInstance, m.Database, seq, d)
		}
		return m, nil
	}
	return nil, first
}

// Listing is what one backup directory holds.
type Listing struct {
	Files []FileInfo // every file, as listed
	// Manifests are the manifests that decoded, per (instance, database)
	// newest first (TakenAt), each authenticated (Manifest.Auth): an
	// untrusted one is listed, for the caller to report, never to trust.
	Manifests []*Manifest
	// Broken maps a manifest file name to why it could not be read. Its set is
	// neither trusted nor deleted (retention leaves it to a human).
	Broken map[string]error
}

// List reads the manifests of database d (not nil) in the directory, under
// every naming of its sets, authenticated with keys; Files are every file of
// its sets (stripes, manifests, partial copies). Only the names of its sets
// are listed, however many other files the directory holds.
func List(ctx context.Context, fsys FS, keys *Keys, d *DB) (Listing, error) {
	var prefixes []string
	for _, n := range d.Names() {
		prefixes = append(prefixes, n.DBPrefix())
	}
	return list(ctx, fsys, keys, prefixes, "", d.OwnsName, d.Owns)
}

// ListInstances reads the manifests of every database of the given
// instance keys (configuration names of SQL instances and availability
// groups, and the groups' former keys), under either naming. Manifests of
// other instances are not even listed: a configuration reports on its own
// sets only, whatever else the directory holds. Files are the manifests.
// Manifests are authenticated with keys.
func ListInstances(ctx context.Context, fsys FS, keys *Keys, instances []string) (Listing, error) {
	var prefixes []string
	for _, inst := range instances {
		prefixes = append(prefixes, tsql.InstancePart(inst)+"@", tsql.LegacyInstancePart(inst)+"@")
	}
	return list(ctx, fsys, keys, prefixes, manifestSuffix, func(tsql.ParsedName) bool { return true },
		func(m *Manifest) bool { return slices.Contains(instances, m.SourceInstance) })
}

// manifestSuffix ends every manifest name (tsql.SetNames.Manifest).
const manifestSuffix = ".manifest.json"

// list lists the files under each prefix (once each) and reads the
// manifests whose names ownsName accepts, keeping those owns accepts.
func list(ctx context.Context, fsys FS, keys *Keys, prefixes []string, suffix string, ownsName func(tsql.ParsedName) bool,
	owns func(*Manifest) bool) (Listing, error) {
	l := Listing{Broken: map[string]error{}}
	listed, seen := map[string]bool{}, map[string]bool{}
	for _, prefix := range prefixes {
		if listed[prefix] {
			continue
		}
		listed[prefix] = true
		files, err := fsys.List(ctx, prefix, suffix)
		if err != nil {
			return Listing{}, fmt.Errorf("list backup directory: %w", err)
		}
		for _, f := range files {
			if !seen[f.Name] { // a prefix may start another (sql01@Sales_ and sql01@Sales_2024_)
				seen[f.Name] = true
				l.Files = append(l.Files, f)
			}
		}
	}
	sort.Slice(l.Files, func(i, j int) bool { return l.Files[i].Name < l.Files[j].Name })
	for _, f := range l.Files {
		p, ok := tsql.ParseManifestFileName(f.Name)
		if !ok || !ownsName(p) {
			continue
		}
		data, err := fsys.ReadFile(ctx, f.Name)
		if err != nil {
			if ctx.Err() != nil {
				return Listing{}, ctx.Err()
			}
			l.Broken[f.Name] = err
			continue
		}
		m, err := DecodeWith(data, keys)
		if err == nil && m.FileName() != f.Name {
			err = fmt.Errorf("manifest file %s describes set %d of %s/%s (%s)", f.Name, m.Sequence, m.SourceInstance, m.Database, m.FileName())
		}
		if err != nil {
			l.Broken[f.Name] = err
			continue
		}
		if owns(m) {
			l.Manifests = append(l.Manifests, m)
		}
	}
	sort.Slice(l.Manifests, func(i, j int) bool {
		a, b := l.Manifests[i], l.Manifests[j]
		if a.SourceInstance != b.SourceInstance || a.Database != b.Database {
			return a.SourceInstance+"\x00"+a.Database < b.SourceInstance+"\x00"+b.Database
		}
		return a.Newer(b)
	})
	return l, nil
}

// LastServer returns the primary server of the newest full set (by when it
// was taken) of the database among the given manifests (from every server
// of the rotation), for plan.NextServer; "" when there is none. Failed sets
// count: a cycle that failed on BAK01 still moves the rotation on to BAK02.
// Untrusted manifests do not, nor do differentials: they are written to the
// servers of their base and leave the round robin of the full backups
// alone.
func LastServer(d DB, manifests []*Manifest) string {
	var best *Manifest
	for _, m := range manifests {
		if !d.Owns(m) || m.PrimaryServer == "" || !m.Trusted() || m.IsDifferential() {
			continue
		}
		if best == nil || m.Newer(best) {
			best = m
		}
	}
	if best == nil {
		return ""
	}
	return best.PrimaryServer
}

// ErrNotFound is returned by NewestVerified when no verified set exists.
var ErrNotFound = errors.New("no verified backup set")

// NewestVerified returns the verified full set of the database taken
// last, of the trusted manifests: the one a restore starts from (a
// differential restores only on top of its base).
func NewestVerified(d DB, manifests []*Manifest) (*Manifest, error) {
	var best *Manifest
	for _, m := range manifests {
		if d.Owns(m) && m.Verified() && m.Trusted() && !m.IsDifferential() && (best == nil || m.Newer(best)) {
			best = m
		}
	}
	if best == nil {
		return nil, fmt.Errorf("%w of database %s", ErrNotFound, d)
	}
	return best, nil
}

// ListStorage lists the files directly in st's directory (not those in
// subdirectories) whose names start with prefix and end with suffix: the
// List of an FS over a backup server.
func ListStorage(ctx context.Context, st storage.Storage, prefix, suffix string) ([]FileInfo, error) {
	if strings.Contains(prefix, "/") {
		return nil, fmt.Errorf("list %q: %w", prefix, storage.ErrInvalidName)
	}
	files, err := st.List(ctx, prefix, suffix)
	if err != nil {
		return nil, err
	}
	out := make([]FileInfo, 0, len(files))
	for _, fi := range files {
		if strings.Contains(fi.Name, "/") {
			continue
		}
		out = append(out, FileInfo{Name: fi.Name, Size: fi.Size, ModTime: fi.ModTime})
	}
	return out, nil
}

// StorageFS adapts a storage.Storage (a backup server's directory) to the
// catalog's file access: manifests are written whole on Close and replace
// their old version atomically.
type StorageFS struct{ Storage storage.Storage }

func (f StorageFS) ReadFile(ctx context.Context, name string) ([]byte, error) {
	return storage.ReadFile(ctx, f.Storage, name)
}

func (f StorageFS) Create(ctx context.Context, name string) (io.WriteCloser, error) {
	w, err := f.Storage.Create(ctx, name)
	if err != nil {
		return nil, err
	}
	return &bufWriter{w: w}, nil
}

// Rename is the catalog's atomic replace of a manifest by its new version.
func (f StorageFS) Rename(ctx context.Context, oldName, newName string) error {
	return f.Storage.Replace(ctx, oldName, newName)
}

func (f StorageFS) Remove(ctx context.Context, name string) error { return f.Storage.Remove(ctx, name) }

func (f StorageFS) List(ctx context.Context, prefix, suffix string) ([]FileInfo, error) {
	return ListStorage(ctx, f.Storage, prefix, suffix)
}

// bufWriter collects a small file (a manifest) and writes it on Close.
type bufWriter struct {
	w   storage.Writer
	buf bytes.Buffer
}

func (b *bufWriter) Write(p []byte) (int, error) { return b.buf.Write(p) }

func (b *bufWriter) Sync() error {
	if _, err := b.w.WriteAt(b.buf.Bytes(), 0); err != nil {
		return err
	}
	return b.w.Sync()
}

func (b *bufWriter) Close() error {
	if _, err := b.w.WriteAt(b.buf.Bytes(), 0); err != nil {
		b.w.Close()
		return err
	}
	return b.w.Close()
}
