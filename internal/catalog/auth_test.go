package catalog

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func testKeys(t *testing.T, ids ...string) *Keys {
	t.Helper()
	var keys []Key
	for _, id := range ids {
		keys = append(keys, Key{ID: id, Secret: []byte("secret of key " + id + ", long enough for HMAC")})
	}
	k, err := NewKeys(keys...)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// verifiedSample is sample advanced to verified.
func verifiedSample(t *testing.T, db string, seq int64, at time.Time) *Manifest {
	t.Helper()
	m := sample(db, seq)
	m.Header.BackupFinish = at
	for _, s := range []State{StateCopied, StateRestored, StateChecked, StateVerified} {
		if err := m.Advance(s, at); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// A signed manifest is version 6 and verifies under its key; changed by a
// byte, signed with another key, or without a signature, it does not.
func TestSignedManifestVerifies(t *testing.T) {
	keys := testKeys(t, "2026-01")
	data, err := EncodeSigned(sample("Sales", 7), keys)
	if err != nil {
		t.Fatal(err)
	}
	m, err := DecodeWith(data, keys)
	if err != nil || m.Auth != AuthSigned || !m.Trusted() || m.SchemaVersion != SignedSchemaVersion || m.Signature.KeyID != "2026-01" {
		t.Fatalf("signed manifest: %+v, %v; want version %d, signed by 2026-01, trusted", m, err, SignedSchemaVersion)
	}
	// Re-encoded as it was read, it is byte for byte what was signed.
	again, err := EncodeSigned(m, keys)
	if err != nil || !bytes.Equal(again, data) {
		t.Errorf("re-signing the same manifest changed it:\n%s\n%s", data, again)
	}
	for name, tc := range map[string]struct {
		data []byte
		keys *Keys
		want Auth
	}{
		"one byte changed": {bytes.Replace(data, []byte(`"primary_server": "BAK01"`), []byte(`"primary_server": "BAK02"`), 1), keys, AuthInvalid},
		"another key":      {data, testKeys(t, "other"), AuthInvalid},
		"same id, other secret": {data, func() *Keys {
			k, _ := NewKeys(Key{ID: "2026-01", Secret: bytes.Repeat([]byte("x"), MinKeyBytes)})
			return k
		}(), AuthInvalid},
		"no signature": {mustEncode(t, sample("Sales", 7)), keys, AuthUnsigned},
		"no keys":      {data, nil, AuthOff},
	} {
		m, err := DecodeWith(tc.data, tc.keys)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if m.Auth != tc.want || m.Trusted() != (tc.want == AuthOff) {
			t.Errorf("%s: auth %q trusted %v, want %q", name, m.Auth, m.Trusted(), tc.want)
		}
	}
	// Encode without keys drops the signature: it would not cover the change.
	m.PrimaryServer = "BAK02"
	plain, err := Encode(m)
	if err != nil || bytes.Contains(plain, []byte("signature")) || bytes.Contains(plain, []byte(`"schema_version": 5`)) {
		t.Errorf("unsigned encoding of a changed manifest:\n%s", plain)
	}
}

// After a key is replaced (the new one first, the old one kept after it),
// what the old key signed still verifies; saved again, a manifest is
// signed with the new key.
func TestOldKeyStillVerifiesAfterRotation(t *testing.T) {
	ctx := context.Background()
	d := &dirFS{dir: t.TempDir()}
	old := testKeys(t, "2025-06")
	if err := Save(ctx, d, old, sample("Sales", 7)); err != nil {
		t.Fatal(err)
	}
	rotated := testKeys(t, "2026-01", "2025-06")
	m, err := Load(ctx, d, rotated, Of("sql01", "Sales"), 7)
	if err != nil || m.Auth != AuthSigned || m.Signature.KeyID != "2025-06" {
		t.Fatalf("after rotation: %+v, %v; want signed by 2025-06", m, err)
	}
	if err := Save(ctx, d, rotated, m); err != nil {
		t.Fatal(err)
	}
	m, err = Load(ctx, d, rotated, Of("sql01", "Sales"), 7)
	if err != nil || m.Auth != AuthSigned || m.Signature.KeyID != "2026-01" {
		t.Fatalf("saved again: %+v, %v; want signed by 2026-01", m, err)
	}
	// Once the old key is dropped, what only it signed no longer verifies.
	if err := Save(ctx, d, old, sample("Sales", 8)); err != nil {
		t.Fatal(err)
	}
	if m, err := Load(ctx, d, testKeys(t, "2026-01"), Of("sql01", "Sales"), 8); err != nil || m.Auth != AuthInvalid || m.Trusted() {
		t.Errorf("signed by a key no longer configured: %+v, %v; want invalid, untrusted", m, err)
	}
}

// A manifest written before manifests were signed (by the build before,
// schema version 4) still loads, listed and shown as unsigned: readable,
// not trusted once a key is configured, trusted as before without one.
func TestManifestWrittenBeforeSigningIsReadableAndUnauthenticated(t *testing.T) {
	ctx := context.Background()
	data, err := os.ReadFile(filepath.Join("testdata", "manifest-v4.json"))
	if err != nil {
		t.Fatal(err)
	}
	d := &dirFS{dir: t.TempDir()}
	if err := os.WriteFile(filepath.Join(d.dir, "sql01@Sales~8de4e0ea_00000041.manifest.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	keys := testKeys(t, "2026-01")
	l, err := List(ctx, d, keys, &DB{Instance: "sql01", Database: "Sales"})
	if err != nil || len(l.Broken) != 0 || len(l.Manifests) != 1 {
		t.Fatalf("listing: %+v, %v; want the old manifest listed, not broken", l, err)
	}
	m := l.Manifests[0]
	if m.SchemaVersion != 4 || !m.Verified() || m.Auth != AuthUnsigned || m.Trusted() {
		t.Errorf("old manifest: version %d state %s auth %q trusted %v; want version 4, verified, unsigned, untrusted",
			m.SchemaVersion, m.State, m.Auth, m.Trusted())
	}
	if _, err := NewestVerified(Of("sql01", "Sales"), l.Manifests); err == nil {
		t.Errorf("NewestVerified counts an unauthenticated manifest")
	}
	l, err = List(ctx, d, nil, &DB{Instance: "sql01", Database: "Sales"})
	if err != nil || len(l.Manifests) != 1 || l.Manifests[0].Auth != AuthOff || !l.Manifests[0].Trusted() {
		t.Fatalf("without keys: %+v, %v; want it trusted as before", l, err)
	}
	if nv, err := NewestVerified(Of("sql01", "Sales"), l.Manifests); err != nil || nv.Sequence != 41 {
		t.Errorf("without keys: NewestVerified %v, %v; want set 41", nv, err)
	}
}

// The rotation follows the newest trusted set: a planted newer set on the
// other server does not move it.
func TestLastServerIgnoresUntrusted(t *testing.T) {
	real := sample("Sales", 5)
	real.Auth = AuthSigned
	forged := sample("Sales", 9)
	forged.PrimaryServer, forged.CreatedAt = "BAK02", t0.Add(time.Hour)
	forged.Header.BackupFinish = t0.Add(time.Hour)
	for _, a := range []Auth{AuthUnsigned, AuthInvalid} {
		forged.Auth = a
		if got := LastServer(Of("sql01", "Sales"), []*Manifest{real, forged}); got != "BAK01" {
			t.Errorf("with a newer %s set on BAK02: LastServer %q, want BAK01", a, got)
		}
	}
}

// Retention never acts on an untrusted manifest's claims: a planted newer
// "verified" set does not make the real newest verified set superseded, a
// planted "failed" or stale manifest deletes nothing, and a real verified
// set keeps its protection. An untrusted set numbered below the newest
// KeepVerified trusted verified sets goes as superseded.
func TestRetentionTrustsOnlyAuthenticatedManifests(t *testing.T) {
	now := t0.Add(30 * 24 * time.Hour)
	r := Retention{KeepVerified: 1, DeleteFailedAfter: time.Hour, DeleteAbandonedAfter: 24 * time.Hour}
	set := func(seq int64, at time.Time, auth Auth, state State) *Manifest {
		m := verifiedSample(t, "Sales", seq, at)
		if state == StateFailed {
			m = sample("Sales", seq)
			if err := m.Fail(StepCheckDB, EvidenceCheckDBFailed, "forged", at); err != nil {
				t.Fatal(err)
			}
		} else if state != StateVerified {
			m = sample("Sales", seq)
		}
		m.CreatedAt, m.UpdatedAt = at, at
		m.Auth = auth
		return m
	}
	day := func(n int) time.Time { return t0.Add(time.Duration(n) * 24 * time.Hour) }
	on := func(server string, ms ...*Manifest) []ServerManifest {
		var out []ServerManifest
		for _, m := range ms {
			out = append(out, ServerManifest{Server: server, Manifest: m})
		}
		return out
	}
	legacy := set(2, day(2), AuthUnsigned, StateVerified)     // written before keys: below the kept set
	older := set(4, day(4), AuthSigned, StateVerified)        // superseded by 6
	newest := set(6, day(6), AuthSigned, StateVerified)       // the real newest verified set
	forgedNew := set(9, day(29), AuthUnsigned, StateVerified) // planted: "verified", fresher than 6
	forgedBad := set(6, day(6), AuthInvalid, StateFailed)     // set 6's manifest replaced on BAK02: "failed"
	forgedOld := set(8, day(8), AuthInvalid, StateWritten)    // stale "written" set, long abandoned
	forgedLow := set(5, day(28), AuthUnsigned, StateVerified) // planted below 6 on BAK02, where 6 is not trusted
	ms := append(on("BAK01", legacy, older, newest, forgedNew, forgedOld), on("BAK02", forgedBad, forgedLow)...)
	dels, err := Decide(r, ms, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Reason{}
	for _, d := range dels {
		got[d.Server+"/"+strings.TrimPrefix(d.Files[len(d.Files)-1], "sql01@Sales~8de4e0ea_0000000")] = d.Reason
	}
	want := map[string]Reason{"BAK01/2.manifest.json": ReasonSuperseded, "BAK01/4.manifest.json": ReasonSuperseded}
	if len(got) != len(want) {
		t.Errorf("deleted %v, want %v", got, want)
	}
	for k, reason := range want {
		if got[k] != reason {
			t.Errorf("deleted %v, want %s for %s", got, reason, k)
		}
	}
}
