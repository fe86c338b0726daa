package evidence

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/storage/local"
)

var t0 = time.Date(2026, 11, 29, 2, 0, 0, 0, time.UTC)

const (
	inst   = "sql01"
	dbName = "Sales"
	server = "bak01"
)

// site is one backup server's directory (the local backend) with verified
// sets on it and their ledger.
type site struct {
	t    *testing.T
	dir  string
	st   storage.Storage
	key  *PrivateKey
	keys PublicKeys
}

func newSite(t *testing.T) *site {
	t.Helper()
	dir := t.TempDir()
	st, err := local.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	key, _, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return &site{t: t, dir: dir, st: st, key: key, keys: NewPublicKeys(key.Public())}
}

// verifiedSet writes set seq of two random stripes and its verified
// manifest, as a cycle leaves them, and appends its record.
func (s *site) verifiedSet(seq int64) *catalog.Manifest {
	t := s.t
	t.Helper()
	ctx := context.Background()
	m := catalog.New(inst, dbName, seq, t0.Add(time.Duration(seq)*time.Hour))
	for i := 1; i <= 2; i++ {
		data := make([]byte, 4096+int(seq))
		_, _ = rand.Read(data)
		name := m.StripeFileName(i, 2)
		if err := os.WriteFile(filepath.Join(s.dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		m.Stripes = append(m.Stripes, catalog.Stripe{Name: name, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])})
	}
	m.Options.Stripes = 2
	at := m.CreatedAt
	m.Header = &catalog.Header{BackupSetGUID: "6f9619ff-8b86-d011-b42d-00c04fc964f" + string(rune('0'+seq%10)), FirstLSN: "100", LastLSN: "200",
		BackupStart: at.Add(-time.Minute), BackupFinish: at}
	m.Header.SetUTCOffset(0)
	m.Servers = []string{server}
	m.PrimaryServer = server
	m.WorkflowID, m.RunID = "backup/sql01/Sales", "run-1"
	for _, st := range []catalog.State{catalog.StateCopied, catalog.StateRestored} {
		if err := m.Advance(st, at.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	m.VerifyDB = "Sales_verify"
	m.Proof = &catalog.Proof{VerifyInstance: "verify01", VerifyDatabase: "Sales_verify", RestoreHistoryID: seq,
		BackupSetGUID: m.Header.BackupSetGUID, RestoredAt: at.Add(2 * time.Minute), CheckedAt: at.Add(3 * time.Minute)}
	for _, st := range []catalog.State{catalog.StateChecked, catalog.StateVerified} {
		if err := m.Advance(st, at.Add(4*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.SetTiming(catalog.StepCheckDB, at.Add(2*time.Minute), at.Add(3*time.Minute)); err != nil {
		t.Fatal(err)
	}
	fsys := catalog.StorageFS{Storage: s.st}
	if err := catalog.Save(ctx, fsys, nil, m); err != nil {
		t.Fatal(err)
	}
	s.appendSet(m)
	return m
}

// appendSet appends the record of verified set m, its manifest as stored.
func (s *site) appendSet(m *catalog.Manifest) {
	s.t.Helper()
	ctx := context.Background()
	data, err := storage.ReadFile(ctx, s.st, m.FileName())
	if err != nil {
		s.t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	r, err := SetRecord(server, m, File{Name: m.FileName(), Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}, "test-build")
	if err != nil {
		s.t.Fatal(err)
	}
	if _, err := (Appender{Key: s.key}).Append(ctx, s.st, r); err != nil {
		s.t.Fatal(err)
	}
}

func (s *site) verify(quick bool) Result {
	s.t.Helper()
	res, err := Verify(context.Background(), s.st, inst, dbName, Options{Keys: s.keys, Server: server, Quick: quick})
	if err != nil {
		s.t.Fatal(err)
	}
	return res
}

// edit changes one byte-string in a file by hand, keeping the rest.
func (s *site) edit(name, from, to string) {
	s.t.Helper()
	p := filepath.Join(s.dir, filepath.FromSlash(name))
	b, err := os.ReadFile(p)
	if err != nil {
		s.t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(from)) {
		s.t.Fatalf("%s holds no %q", name, from)
	}
	if err := os.WriteFile(p, bytes.Replace(b, []byte(from), []byte(to), 1), 0o644); err != nil {
		s.t.Fatal(err)
	}
}

// onlyProblem checks that res names exactly record seq, with why.
func onlyProblem(t *testing.T, res Result, seq int64, why string) {
	t.Helper()
	if len(res.Problems) != 1 || res.Problems[0].Seq != seq || !strings.Contains(res.Problems[0].Why, why) {
		t.Fatalf("problems %v, want record %d only, mentioning %q", res.Problems, seq, why)
	}
}

func TestVerifyPassesUntouchedLedger(t *testing.T) {
	s := newSite(t)
	for seq := int64(1); seq <= 3; seq++ {
		s.verifiedSet(seq)
	}
	res := s.verify(false)
	if !res.OK() || res.Records != 3 || res.Head != 3 || len(res.Verified) != 3 || len(res.Removed) != 0 {
		t.Fatalf("untouched ledger: %+v", res)
	}
	r := res.Verified[1]
	if r.Kind != KindSet || r.Set.Sequence != 2 || len(r.Files) != 3 || r.Restore.RestoreHistoryID != 2 ||
		!strings.HasPrefix(r.CheckDB.Command, "DBCC CHECKDB([Sales_verify])") || r.Worker != "test-build" || r.Prev == "" {
		t.Errorf("record 2 = %+v", r)
	}
}

func TestVerifyNamesChangedLedgerRecord(t *testing.T) {
	s := newSite(t)
	for seq := int64(1); seq <= 3; seq++ {
		s.verifiedSet(seq)
	}
	// Still a canonical, well-formed record: only the signature tells.
	s.edit(FileName(inst, dbName, 2), `"restore_history_id":2`, `"restore_history_id":7`)
	onlyProblem(t, s.verify(false), 2, "signature does not verify")
}

func TestVerifyNamesChangedManifest(t *testing.T) {
	s := newSite(t)
	var sets []*catalog.Manifest
	for seq := int64(1); seq <= 3; seq++ {
		sets = append(sets, s.verifiedSet(seq))
	}
	s.edit(sets[1].FileName(), `"verify_database": "Sales_verify"`, `"verify_database": "Sales_verifx"`)
	onlyProblem(t, s.verify(true), 2, sets[1].FileName()+" hashes to")
}

func TestVerifyNamesChangedStripe(t *testing.T) {
	s := newSite(t)
	var last *catalog.Manifest
	for seq := int64(1); seq <= 3; seq++ {
		last = s.verifiedSet(seq)
	}
	p := filepath.Join(s.dir, last.Stripes[1].Name)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[100] ^= 0xff // same size: only the hash tells
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	onlyProblem(t, s.verify(false), 3, last.Stripes[1].Name+" hashes to")
	if res := s.verify(true); !res.OK() {
		t.Errorf("--quick hashes no stripe, yet: %v", res.Problems)
	}
}

func TestVerifyNamesRemovedAndForeignRecords(t *testing.T) {
	s := newSite(t)
	for seq := int64(1); seq <= 3; seq++ {
		s.verifiedSet(seq)
	}
	// A record signed by a key nobody configured.
	other := newSite(t)
	s.keys = NewPublicKeys(other.key.Public())
	res := s.verify(true)
	if len(res.Problems) != 3 || !strings.Contains(res.Problems[0].Why, "not among the configured public keys") {
		t.Fatalf("foreign key: %v", res.Problems)
	}
	s.keys = NewPublicKeys(s.key.Public())

	if err := s.st.Remove(context.Background(), FileName(inst, dbName, 2)); err != nil {
		t.Fatal(err)
	}
	onlyProblem(t, s.verify(true), 2, "missing: the ledger goes from record 1 to 3")
}

func TestVerifyCountsSetsRetentionRemoved(t *testing.T) {
	s := newSite(t)
	first := s.verifiedSet(1)
	s.verifiedSet(2)
	ctx := context.Background()
	// Retention removes the manifest first; a deletion cut short leaves
	// stripes behind.
	for _, name := range []string{first.FileName(), first.Stripes[0].Name} {
		if err := s.st.Remove(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	res := s.verify(false)
	if !res.OK() || len(res.Removed) != 1 || res.Removed[0] != 1 || len(res.Verified) != 2 {
		t.Fatalf("after retention: %+v", res)
	}
	// A stripe gone while its manifest stays is not retention's doing.
	s.verifiedSet(3)
	if err := s.st.Remove(ctx, catalog.New(inst, dbName, 3, t0).StripeFileName(2, 2)); err != nil {
		t.Fatal(err)
	}
	onlyProblem(t, s.verify(true), 3, "is missing while")
}

func TestAppendNeverForks(t *testing.T) {
	s := newSite(t)
	m := s.verifiedSet(1)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.appendSet(m)
		}()
	}
	wg.Wait()
	res := s.verify(true)
	if !res.OK() || res.Records != 9 || res.Head != 9 {
		t.Fatalf("8 writers at once: %+v", res)
	}
}

func TestAppendTakesTornRecordsNumber(t *testing.T) {
	s := newSite(t)
	m := s.verifiedSet(1)
	torn := FileName(inst, dbName, 2)
	w, err := s.st.Create(context.Background(), torn)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if res := s.verify(true); !res.OK() || !res.Pending {
		t.Fatalf("newest record being written: %+v", res)
	}
	// A young empty record is a write in progress: waited for, not taken.
	a := Appender{Key: s.key, Wait: 300 * time.Millisecond}
	r, err := SetRecord(server, m, File{Name: "x", SHA256: strings.Repeat("0", 64)}, "b")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Append(context.Background(), s.st, r); err == nil || !strings.Contains(err.Error(), "being written") {
		t.Fatalf("append over a young empty record: %v", err)
	}
	old := time.Now().Add(-2 * TornAfter)
	if err := os.Chtimes(filepath.Join(s.dir, filepath.FromSlash(torn)), old, old); err != nil {
		t.Fatal(err)
	}
	if res := s.verify(true); len(res.Problems) != 1 || res.Problems[0].Seq != 2 || !strings.Contains(res.Problems[0].Why, "empty: a write cut short") {
		t.Fatalf("newest record cut short: %v", res.Problems)
	}
	s.appendSet(m)
	if res := s.verify(true); !res.OK() || res.Head != 2 {
		t.Fatalf("after taking the torn record's number: %+v", res)
	}
}

func TestKeysRoundTrip(t *testing.T) {
	key, enc, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParsePrivateKey(enc)
	if err != nil || back.ID() != key.ID() {
		t.Fatalf("private key round trip: %v, id %s want %s", err, back.ID(), key.ID())
	}
	pub, err := ParsePublicKey(key.Public().String())
	if err != nil || pub.ID() != key.ID() {
		t.Fatalf("public key round trip: %v", err)
	}
	if strings.Contains(key.String(), enc) || strings.Contains(err2str(ParsePrivateKey("@@"+enc)), enc) {
		t.Error("a key's value shows in its String or an error")
	}
}

func err2str(_ *PrivateKey, err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Records removed from the end of a ledger leave a shorter chain that
// verifies; its copy on an object store tells.
func TestCompareWithCopyNamesRecordsRemovedFromTheEnd(t *testing.T) {
	s := newSite(t)
	for seq := int64(1); seq <= 3; seq++ {
		s.verifiedSet(seq)
	}
	ctx := context.Background()
	vault := newSite(t) // another directory standing for the object store
	entries, err := List(ctx, s.st, inst, dbName)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := storage.ReadFile(ctx, s.st, e.Name)
		if err != nil {
			t.Fatal(err)
		}
		if err := writeNew(ctx, vault.st, fileIn(ImmutableDir(server, inst, dbName), e.Seq), data); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.st.Remove(ctx, FileName(inst, dbName, 3)); err != nil {
		t.Fatal(err)
	}
	here := s.verify(true)
	if !here.OK() || here.Head != 2 {
		t.Fatalf("the shortened ledger: %+v", here)
	}
	cp, err := Verify(ctx, vault.st, inst, dbName, Options{Keys: s.keys, Server: server, Dir: ImmutableDir(server, inst, dbName), Copy: true})
	if err != nil || !cp.OK() || cp.Head != 3 {
		t.Fatalf("the copy: %+v, %v", cp, err)
	}
	cp.Copy = "vault01"
	here.Compare(cp)
	onlyProblem(t, here, 3, "missing here, but the copy on vault01 holds it")
}

// A proof recorded again (a retried activity) is not appended twice: the
// record found is given back, with its number.
func TestAppendOnceFindsTheProofRecorded(t *testing.T) {
	s := newSite(t)
	m := s.verifiedSet(1)
	s.verifiedSet(2)
	data, err := storage.ReadFile(context.Background(), s.st, m.FileName())
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	r, err := SetRecord(server, m, File{Name: m.FileName(), Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}, "test-build")
	if err != nil {
		t.Fatal(err)
	}
	h, err := (Appender{Key: s.key}).AppendOnce(context.Background(), s.st, r)
	if res := s.verify(true); err != nil || r.Seq != 1 || res.Records != 2 || h != res.Hashes[1] {
		t.Fatalf("AppendOnce of set 1 again: record %d, %v; ledger %+v", r.Seq, err, res)
	}
}
