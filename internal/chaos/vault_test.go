package chaos

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/backupcycle/backupcycle/internal/catalog"
)

// vaultFleet is testFleet with vault01 running (a real versitygw) and the
// checker's view of the product set up for I16.
func vaultFleet(t *testing.T) (*Fleet, *Checker) {
	t.Helper()
	f := testFleet(t)
	v, err := startVault(context.Background(), filepath.Join(f.Root, Vault01), "root-"+newHex(8), "worker-"+newHex(8))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Close)
	f.vault = v
	c := NewChecker(f)
	on := true
	c.vault.enforced, c.vault.within = &on, time.Minute
	c.vault.lockOf = func(Target) time.Duration { return time.Hour }
	c.vault.immRed = func(context.Context, Target, int64) string { return "" }
	return f, c
}

// copySet writes a verified set of sql01/sales on bak01, verified ago,
// and uploads it to vault01 as CopyImmutable does (stripes, then the
// manifest, each locked in compliance mode until lock after now); body
// replaces a stripe's bytes on the store. record: the manifest records the
// copy.
func copySet(t *testing.T, f *Fleet, seq int64, ago, lock time.Duration, record bool, body func(name string, data []byte) []byte) {
	t.Helper()
	ctx := context.Background()
	cl := f.vault.adminClient()
	at := time.Now().Add(-ago).UTC()
	m := catalog.New(Sql01, SalesDB, seq, at)
	m.Header = &catalog.Header{BackupSetGUID: setGUID(seq), FirstLSN: "1", LastLSN: "2", BackupFinish: at}
	until := time.Now().Add(lock).UTC().Truncate(time.Second)
	rec := &catalog.ImmutableCopy{Server: Vault01, State: catalog.ImmutableCopied, At: time.Now().UTC(), Mode: "COMPLIANCE", RetainUntil: until}
	put := func(name string, data []byte) string {
		out, err := cl.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String(vaultBucket), Key: aws.String(vaultPrefix + name),
			Body: bytes.NewReader(data), ObjectLockMode: types.ObjectLockModeCompliance, ObjectLockRetainUntilDate: &until})
		if err != nil {
			t.Fatalf("put %s: %v", name, err)
		}
		return aws.ToString(out.VersionId)
	}
	for i := 1; i <= 2; i++ {
		name := m.StripeFileName(i, 2)
		data := []byte("stripe of set " + name)
		if err := os.WriteFile(filepath.Join(f.ShareDir(Bak01), name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		m.Stripes = append(m.Stripes, catalog.Stripe{Name: name, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])})
		stored := data
		if body != nil {
			stored = body(name, data)
		}
		ssum := sha256.Sum256(stored)
		rec.Objects = append(rec.Objects, catalog.ImmutableObject{Name: name, VersionID: put(name, stored), SHA256: hex.EncodeToString(ssum[:]), Size: int64(len(stored))})
	}
	m.State = catalog.StateVerified
	m.History = append(m.History, catalog.Transition{State: catalog.StateVerified, At: at})
	raw, err := catalog.Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	msum := sha256.Sum256(raw)
	rec.Objects = append(rec.Objects, catalog.ImmutableObject{Name: m.FileName(), VersionID: put(m.FileName(), raw), SHA256: hex.EncodeToString(msum[:])})
	if record {
		m.Immutable = rec
	}
	if raw, err = catalog.Encode(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.ShareDir(Bak01), m.FileName()), raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

// checkI16 runs I16 alone and returns its violations.
func checkI16(t *testing.T, c *Checker) ([]Violation, Notes) {
	t.Helper()
	var vs []Violation
	add := func(inv int, key, format string, args ...any) {
		key = "I16|" + key
		if c.reported[key] {
			return
		}
		c.reported[key] = true
		vs = append(vs, Violation{Invariant: inv, Detail: strings.TrimSpace(fmt.Sprintf(format, args...)), key: key})
	}
	files, _ := c.scan()
	notes := c.checkI16(context.Background(), files, add)
	for _, v := range vs {
		t.Logf("I%d: %s", v.Invariant, v.Detail)
	}
	return vs, notes
}

// TestCheckerImmutable: I16 finds nothing while every copied set is on the
// store, locked long enough, with the manifest's bytes; it reports a
// stripe stored with other bytes, a recorded version gone, a lock shorter
// than the database's, and a set past immutable_within with no copy and
// no status saying so (a note only while the product has no
// immutable_within; nothing when status names the set).
func TestCheckerImmutable(t *testing.T) {
	f, c := vaultFleet(t)
	ctx := context.Background()

	copySet(t, f, 1, 2*time.Minute, 2*time.Hour, true, nil)
	copySet(t, f, 2, 10*time.Second, 2*time.Hour, false, nil) // young: not yet due
	if vs, notes := checkI16(t, c); len(vs) != 0 || len(notes) != 0 {
		t.Fatalf("consistent copies: %+v %v, want nothing", vs, notes)
	}

	// A copy whose stripe holds other bytes than the manifest says.
	copySet(t, f, 3, 2*time.Minute, 2*time.Hour, true, func(name string, data []byte) []byte {
		if name == catalog.New(Sql01, SalesDB, 3, time.Now()).StripeFileName(1, 2) {
			return append([]byte("X"), data[1:]...)
		}
		return data
	})
	// A lock shorter than the database's immutable lock (an hour from
	// its verification).
	copySet(t, f, 4, 2*time.Minute, 30*time.Minute, true, nil)
	vs, _ := checkI16(t, c)
	got := bySet(t, vs, 4)
	if !got["I16 seq 3"] || !got["I16 seq 4"] || len(got) != 2 || len(vs) != 4 {
		t.Errorf("altered stripe (seq 3) and short lock (seq 4): got %v in %d violations, want one for seq 3's stripe and one for each of seq 4's 3 objects", got, len(vs))
	}
	for _, v := range vs {
		if strings.Contains(v.Detail, "seq 3 ") && !strings.Contains(v.Detail, "SHA-256") {
			t.Errorf("seq 3: %s, want the SHA-256 mismatch", v.Detail)
		}
		if strings.Contains(v.Detail, "seq 4 ") && !strings.Contains(v.Detail, "locked until") {
			t.Errorf("seq 4: %s, want the short lock", v.Detail)
		}
	}

	// A recorded version gone (the root user may delete it in this test
	// only because its lock is over: a compliance lock of one second).
	copySet(t, f, 5, 2*time.Minute, time.Second, true, nil)
	var m5 *catalog.Manifest
	files, _ := c.scan()
	for _, mf := range files {
		if mf.M.Sequence == 5 {
			m5 = mf.M
		}
	}
	time.Sleep(2 * time.Second)
	o := m5.Immutable.Objects[1]
	if _, err := f.vault.adminClient().DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String(vaultBucket), Key: aws.String(vaultPrefix + o.Name),
		VersionId: aws.String(o.VersionID)}); err != nil {
		t.Fatalf("delete an unlocked version: %v", err)
	}
	vs, _ = checkI16(t, c)
	found := false
	for _, v := range vs {
		found = found || strings.Contains(v.Detail, "seq 5 object "+o.Name) && strings.Contains(v.Detail, "is gone")
	}
	if !found {
		t.Errorf("version %s of seq 5 deleted: %+v, want it reported gone", o.VersionID, vs)
	}

	// A set past immutable_within without a copy: a violation, unless
	// status names the immutable copy and the set; a note while the
	// product does not know immutable_within.
	copySet(t, f, 6, 2*time.Minute, 2*time.Hour, false, nil)
	if _, err := f.vault.adminClient().DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String(vaultBucket),
		Key: aws.String(vaultPrefix + catalog.New(Sql01, SalesDB, 6, time.Now()).FileName())}); err != nil {
		t.Fatal(err)
	}
	c.vault.immRed = func(_ context.Context, _ Target, seq int64) string {
		if seq == 6 {
			return immutableReason([]string{"no verified set within rpo", "set 6 has no immutable copy on vault01 after 1m0s"}, seq)
		}
		return ""
	}
	if vs, _ := checkI16(t, c); len(vs) != 0 {
		t.Errorf("status names set 6's immutable copy: %+v, want no violation", vs)
	}
	c.vault.immRed = func(_ context.Context, _ Target, seq int64) string {
		return immutableReason([]string{"the immutable copy was never proven restorable: no drill from it passed"}, seq)
	}
	off := false
	c.vault.enforced = &off
	vs, notes := checkI16(t, c)
	if len(vs) != 0 || len(notes) != 1 || !strings.Contains(notes[0], "seq 6 ") {
		t.Errorf("without immutable_within: %+v %v, want one note for seq 6", vs, notes)
	}
	on := true
	c.vault.enforced = &on
	vs, _ = checkI16(t, c)
	if got := bySet(t, vs, 6); len(vs) != 1 || !got["I16 seq 6"] || !strings.Contains(vs[0].Detail, "manifest missing") {
		t.Errorf("set 6 not copied and status silent on it: %+v, want one I16", vs)
	}
}

// TestCheckerVaultAttack: the worker's credentials are refused every
// request that would delete or unlock a locked version, and what S3 lets
// them do (a new version, a delete marker) leaves that version as it was.
func TestCheckerVaultAttack(t *testing.T) {
	f, c := vaultFleet(t)
	ctx := context.Background()
	copySet(t, f, 1, 2*time.Minute, 2*time.Hour, true, nil)
	files, _ := c.scan()
	o := files[0].M.Immutable.Objects[0]
	tries, notes, err := f.vault.attack(ctx, vaultPrefix+o.Name, o.VersionID)
	if err != nil {
		t.Fatalf("cleanup: %v", err)
	}
	t.Logf("%v", notes)
	if len(tries) != 4 {
		t.Fatalf("attempts: %+v", tries)
	}
	for _, a := range tries {
		if !a.Refused {
			t.Errorf("the worker's credentials could %s", a.What)
		}
	}
	if vs, _ := checkI16(t, c); len(vs) != 0 {
		t.Errorf("after the attack: %+v, want the copy intact", vs)
	}
}

// TestCheckerImmutableReason: a status reason counts for the set it names
// and the immutable copy, not for another set or another reason.
func TestCheckerImmutableReason(t *testing.T) {
	rs := []string{"the immutable copy was never proven restorable: no drill from it passed",
		"immutable copy of set 12 (verified 2m0s ago, immutable_within 45s) on vault01: copy failed"}
	if immutableReason(rs, 12) != rs[1] {
		t.Errorf("set 12: %q, want %q", immutableReason(rs, 12), rs[1])
	}
	for _, seq := range []int64{1, 2, 120} {
		if r := immutableReason(rs, seq); r != "" {
			t.Errorf("set %d: %q counted", seq, r)
		}
	}
}
