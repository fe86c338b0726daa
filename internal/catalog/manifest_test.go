package catalog

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/tsql"
)

var t0 = time.Date(2026, 11, 29, 1, 0, 0, 0, time.UTC)

func sample(db string, seq int64) *Manifest {
	m := New("sql01", db, seq, t0)
	m.PrimaryServer = "BAK01"
	m.Servers = []string{"BAK01"}
	m.Options = Options{Compression: true, Checksum: true, BufferCount: 256, MaxTransferSize: 4 << 20, BlockSize: 65536, Stripes: 2}
	for i := 1; i <= 2; i++ {
		m.Stripes = append(m.Stripes, Stripe{Name: tsql.StripeFileName("sql01", db, seq, i, 2), Size: int64(1000 * i)})
	}
	m.Header = &Header{
		BackupSetGUID: "9c1e4c0a-8f0e-4f6e-9d7c-1b2a3c4d5e6f", FirstLSN: "37000000012800037", LastLSN: "37000000014400001",
		BackupStart: t0.Add(-time.Minute), BackupFinish: t0, BackupSize: 1 << 30, CompressedBackupSize: 3000,
	}
	m.WorkflowID, m.RunID = "backup-"+db, "run-1"
	return m
}

func TestStateMachine(t *testing.T) {
	m := sample("Sales", 7)
	steps := []State{StateCopied, StateRestored, StateChecked, StateVerified}
	for i, s := range steps {
		if err := m.Advance(s, t0.Add(time.Duration(i+1)*time.Minute)); err != nil {
			t.Fatalf("Advance(%s): %v", s, err)
		}
	}
	if !m.Verified() || len(m.History) != 5 || !m.UpdatedAt.Equal(t0.Add(4*time.Minute)) {
		t.Errorf("after the chain: state %s, %d transitions, updated %s", m.State, len(m.History), m.UpdatedAt)
	}
	// Repeating the current state is a no-op (a retried activity).
	if err := m.Advance(StateVerified, t0.Add(time.Hour)); err != nil || len(m.History) != 5 {
		t.Errorf("re-advancing to verified: %v, %d transitions", err, len(m.History))
	}
	if err := m.Fail(StepSanity, EvidenceSanityFailed, "late", t0); !errors.Is(err, ErrIllegalTransition) {
		t.Errorf("failing a verified set: %v", err)
	}

	illegal := []struct {
		from, to State
	}{
		{StateWritten, StateRestored}, // skips copied
		{StateWritten, StateVerified},
		{StateCopied, StateWritten}, // backwards
		{StateChecked, StateCopied},
		{StateVerified, StateWritten},
		{StateFailed, StateCopied}, // failed is terminal
		{StateWritten, "bogus"},
		{StateWritten, StateFailed}, // only through Fail
	}
	for _, tt := range illegal {
		m := sample("Sales", 1)
		m.State = tt.from
		if err := m.Advance(tt.to, t0); !errors.Is(err, ErrIllegalTransition) {
			t.Errorf("%s -> %s: got %v, want ErrIllegalTransition", tt.from, tt.to, err)
		}
		if m.State != tt.from {
			t.Errorf("%s -> %s: state changed to %s despite the error", tt.from, tt.to, m.State)
		}
	}

	m = sample("Sales", 8)
	if err := m.Advance(StateCopied, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := m.Fail(StepRestore, EvidenceCorruptBackup, "CorruptBackup: checksum mismatch on stripe 2", t0.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if m.State != StateFailed || m.Failure.Step != StepRestore || !strings.Contains(m.Failure.Reason, "stripe 2") {
		t.Errorf("failed manifest: %+v %+v", m.State, m.Failure)
	}
	// The first failure is kept.
	if err := m.Fail(StepCheckDB, EvidenceCheckDBFailed, "other", t0.Add(3*time.Minute)); err != nil || m.Failure.Step != StepRestore {
		t.Errorf("second Fail: %v, failure %+v", err, m.Failure)
	}
	for _, bad := range []struct {
		step     Step
		evidence Evidence
		reason   string
	}{{"nap", EvidenceCorruptBackup, "x"}, {StepBackup, EvidenceBackupIncomplete, ""},
		// An outage is no evidence about a set: nothing is marked.
		{StepRestore, "", "verification instance unreachable"}, {StepCopy, "SQLHostUnreachable", "x"}} {
		m := sample("d", 1)
		if err := m.Fail(bad.step, bad.evidence, bad.reason, t0); err == nil || m.State == StateFailed {
			t.Errorf("Fail(%q, %q, %q) accepted: state %s", bad.step, bad.evidence, bad.reason, m.State)
		}
	}
	// Cancel is terminal and keeps a verified or failed set as it is.
	m = sample("Sales", 9)
	if err := m.Cancel(StepCopy, "cancelled from the Web UI", t0); err != nil || m.State != StateCancelled || m.Cancelled == nil {
		t.Errorf("Cancel: %v, state %s", err, m.State)
	}
	if err := m.Advance(StateCopied, t0); !errors.Is(err, ErrIllegalTransition) {
		t.Errorf("advancing a cancelled set: %v", err)
	}
	if err := m.Fail(StepCopy, EvidenceHashMismatch, "x", t0); !errors.Is(err, ErrIllegalTransition) {
		t.Errorf("failing a cancelled set: %v", err)
	}
	if _, err := Decode(mustEncode(t, m)); err != nil {
		t.Errorf("a cancelled manifest does not round-trip: %v", err)
	}
}

func mustEncode(t *testing.T, m *Manifest) []byte {
	t.Helper()
	b, err := Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestTimings(t *testing.T) {
	m := sample("Sales", 1)
	if err := m.SetTiming(StepBackup, t0, t0.Add(90*time.Second)); err != nil {
		t.Fatal(err)
	}
	if got := m.Timings[StepBackup].DurationSeconds; got != 90 {
		t.Errorf("duration %v, want 90", got)
	}
	// A repeated restore replaces the earlier record.
	_ = m.SetTiming(StepRestore, t0, t0.Add(time.Minute))
	_ = m.SetTiming(StepRestore, t0.Add(2*time.Minute), t0.Add(5*time.Minute))
	if got := m.Timings[StepRestore].DurationSeconds; got != 180 {
		t.Errorf("restore duration %v, want 180", got)
	}
	if err := m.SetTiming(StepCopy, t0, t0.Add(-time.Second)); err == nil {
		t.Error("end before start accepted")
	}
	if err := m.SetTiming("lunch", t0, t0); err == nil {
		t.Error("unknown step accepted")
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	m := sample("Sales]; DROP DATABASE x--", 42)
	m.Stripes[0].SHA256 = strings.Repeat("ab", 32)
	_ = m.SetTiming(StepBackup, t0, t0.Add(time.Minute))
	_ = m.Advance(StateCopied, t0.Add(2*time.Minute))
	data, err := Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{`"schema_version": 3`, `"naming": "case-safe"`, `"database": "Sales]; DROP DATABASE x--"`, `"sequence": 42`, `"state": "copied"`,
		`"backup_set_guid"`, `"first_lsn": "37000000012800037"`, `"maxtransfersize": 4194304`, `"duration_seconds": 60`, `"workflow_id"`} {
		if !bytes.Contains(data, []byte(field)) {
			t.Errorf("encoded manifest lacks %s:\n%s", field, data)
		}
	}
	got, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := Encode(got)
	if !bytes.Equal(data, again) {
		t.Errorf("round trip changed the manifest:\n%s\n---\n%s", data, again)
	}
	if got.FileName() != "sql01@Sales]; DROP DATABASE x--~dbe24601_00000042.manifest.json" {
		t.Errorf("FileName = %q", got.FileName())
	}
}

func TestDecodeStrict(t *testing.T) {
	good, err := Encode(sample("Sales", 3))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, data, msg string
	}{
		{"unknown field", strings.Replace(string(good), `"sequence": 3,`, `"sequence": 3, "sequnce": 4,`, 1), "unknown field"},
		{"trailing data", string(good) + `{}`, "after the JSON object"},
		{"newer schema", strings.Replace(string(good), `"schema_version": 3`, `"schema_version": 10`, 1), "schema_version 10 is not supported"},
		{"unknown naming", strings.Replace(string(good), `"naming": "case-safe"`, `"naming": "upper"`, 1), `naming "upper" is unknown`},
		{"unknown state", strings.Replace(string(good), `"state": "written"`, `"state": "done"`, 1), `state "done" is unknown`},
		{"stripe of another set", strings.Replace(string(good), "Sales~8de4e0ea_00000003_2of2.bak", "Sales~8de4e0ea_00000004_2of2.bak", 1), "want \"sql01@Sales~8de4e0ea_00000003_2of2.bak\""},
		{"legacy names in a current manifest", strings.Replace(string(good), "Sales~8de4e0ea_00000003_2of2.bak", "Sales_00000003_2of2.bak", 1), "want \"sql01@Sales~8de4e0ea_00000003_2of2.bak\""},
		{"current names in a legacy manifest", strings.Replace(string(good), `"naming": "case-safe",`, ``, 1), "want \"sql01@Sales_00000003_1of2.bak\""},
		{"entry in a legacy manifest", strings.Replace(strings.Replace(strings.ReplaceAll(string(good), "Sales~8de4e0ea_", "Sales_"), `"naming": "case-safe",`, ``, 1), `"database": "Sales",`, `"database": "Sales", "entry": "sales",`, 1), "entry is recorded only with case-safe names"},
		{"bad LSN", strings.Replace(string(good), `"first_lsn": "37000000012800037"`, `"first_lsn": "0x25"`, 1), "not a numeric(25,0) LSN"},
		{"failed without failure", strings.Replace(string(good), `"state": "written"`, `"state": "failed"`, 1), "without a failure record"},
		{"bad sha256", strings.Replace(string(good), `"size": 1000`, `"size": 1000, "sha256": "XYZ"`, 1), "64 lower-case hex"},
		{"not JSON", "manifest", "decode manifest"},
		{"truncated", string(good[:len(good)/2]), "decode manifest"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode([]byte(tt.data))
			if err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("got %v, want mention of %q", err, tt.msg)
			}
		})
	}
}

func TestAddServer(t *testing.T) {
	m := sample("Sales", 1)
	m.AddServer("BAK02")
	m.AddServer("BAK01")
	m.AddServer("BAK02")
	if strings.Join(m.Servers, ",") != "BAK01,BAK02" {
		t.Errorf("servers %v, want BAK01,BAK02", m.Servers)
	}
}

// A manifest as builds before schema version 3 wrote it (testdata: a
// source one hour east of UTC, its HEADERONLY dates stored as they came,
// without the offset) still loads, and is taken when it always was: its
// finish read as UTC. Sets written that way keep their order among
// themselves, so the upgrade makes none of them deletable.
func TestManifestWithoutOffsetLoadsAndOrdersAsBefore(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "manifest-v2.json"))
	if err != nil {
		t.Fatal(err)
	}
	m7, err := Decode(data)
	if err != nil {
		t.Fatalf("a version 2 manifest does not load: %v", err)
	}
	if want := time.Date(2026, 11, 29, 2, 0, 0, 0, time.UTC); !m7.TakenAt().Equal(want) {
		t.Errorf("TakenAt = %v, want the recorded finish as UTC, %v", m7.TakenAt(), want)
	}
	// Set 8 of the same kind, its finish an hour earlier on that clock,
	// verified later (the clock went back between them).
	m8, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	m8.Sequence = 8
	for i := range m8.Stripes {
		m8.Stripes[i].Name = m8.StripeFileName(i+1, len(m8.Stripes))
	}
	m8.Header.BackupFinish = m8.Header.BackupFinish.Add(-time.Hour)
	m8.Header.BackupSetGUID = "1c1e4c0a-8f0e-4f6e-9d7c-1b2a3c4d5e6f"
	for i := range m8.History {
		m8.History[i].At = m8.History[i].At.Add(90 * time.Minute)
	}
	if !m7.Newer(m8) || m8.Newer(m7) {
		t.Errorf("set 7 (finish %v) and set 8 (finish %v): want 7 newer, by the recorded finish, as before", m7.TakenAt(), m8.TakenAt())
	}
	if nv, err := NewestVerified(Of("sql01", "Sales"), []*Manifest{m8, m7}); err != nil || nv.Sequence != 7 {
		t.Errorf("NewestVerified = %v, %v; want set 7 as before", nv, err)
	}
	// Written again (a later state change), it still reads as version 2.
	again := mustEncode(t, m7)
	if !bytes.Contains(again, []byte(`"schema_version": 2,`)) {
		t.Errorf("re-encoded without new facts, the manifest is no longer version 2:\n%s", again)
	}
	if _, err := Decode(again); err != nil {
		t.Errorf("re-encoded manifest does not load: %v", err)
	}
}

// HEADERONLY's dates are the source's wall clock; with its offset from UTC
// recorded, TakenAt is the instant. A source moved from UTC+2 to UTC-5
// between two sets: the later set shows an earlier wall clock and is the
// newer all the same.
func TestTakenAtIsTheInstant(t *testing.T) {
	wall := func(s string) time.Time {
		w, err := time.Parse(time.DateTime, s)
		if err != nil {
			t.Fatal(err)
		}
		return w // labelled UTC, as the driver decodes a datetime
	}
	east := sample("Sales", 7)
	east.Header.BackupStart, east.Header.BackupFinish = wall("2026-11-29 02:59:00"), wall("2026-11-29 03:00:00")
	east.Header.SetUTCOffset(120)
	west := sample("Sales", 8)
	west.Header.BackupStart, west.Header.BackupFinish = wall("2026-11-28 20:59:00"), wall("2026-11-28 21:00:00")
	west.Header.SetUTCOffset(-300)
	if want := time.Date(2026, 11, 29, 1, 0, 0, 0, time.UTC); !east.TakenAt().Equal(want) || !east.TakenAtKnown() {
		t.Errorf("east TakenAt = %v (known %v), want %v", east.TakenAt(), east.TakenAtKnown(), want)
	}
	if want := time.Date(2026, 11, 29, 2, 0, 0, 0, time.UTC); !west.TakenAt().Equal(want) {
		t.Errorf("west TakenAt = %v, want %v", west.TakenAt(), want)
	}
	if !west.Newer(east) || east.Newer(west) {
		t.Errorf("set 8 (taken %v) is not newer than set 7 (taken %v)", west.TakenAt(), east.TakenAt())
	}
	if nv, err := NewestVerified(Of("sql01", "Sales"), []*Manifest{verifiedNow(t, west), verifiedNow(t, east)}); err != nil || nv.Sequence != 8 {
		t.Errorf("NewestVerified = %v, %v; want set 8", nv, err)
	}
	if got := LastServer(Of("sql01", "Sales"), []*Manifest{withPrimary(west, "BAK02"), withPrimary(east, "BAK01")}); got != "BAK02" {
		t.Errorf("LastServer = %q, want BAK02 (set 8's)", got)
	}

	data := mustEncode(t, west)
	for _, field := range []string{`"schema_version": 3`, `"utc_offset_minutes": -300`, `"backup_finish": "2026-11-28T21:00:00Z"`,
		`"backup_finish_utc": "2026-11-29T02:00:00Z"`, `"backup_start_utc": "2026-11-29T01:59:00Z"`} {
		if !bytes.Contains(data, []byte(field)) {
			t.Errorf("encoded manifest lacks %s:\n%s", field, data)
		}
	}
	got, err := Decode(data)
	if err != nil || !got.TakenAt().Equal(west.TakenAt()) {
		t.Fatalf("round trip: %v, taken %v", err, got.TakenAt())
	}
	for _, tt := range []struct{ name, from, to, msg string }{
		{"instant off its wall clock", `"backup_finish_utc": "2026-11-29T02:00:00Z"`, `"backup_finish_utc": "2026-11-29T03:00:00Z"`,
			"is not header.backup_finish"},
		{"no such zone", `"utc_offset_minutes": -300`, `"utc_offset_minutes": -900`, "beyond any time zone"},
		{"instant without offset", `"utc_offset_minutes": -300,`, ``, "without header.utc_offset_minutes"},
		{"version 2 with offsets", `"schema_version": 3`, `"schema_version": 2`, "utc_offset_minutes (version 3 does)"},
	} {
		if _, err := Decode([]byte(strings.Replace(string(data), tt.from, tt.to, 1))); err == nil || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("%s: %v, want mention of %q", tt.name, err, tt.msg)
		}
	}

	// The verification server's restore_date, likewise.
	p := Proof{VerifyInstance: "verify01", VerifyDatabase: "Sales_verify", RestoreHistoryID: 1, BackupSetGUID: "g",
		RestoredAt: wall("2026-11-29 04:00:00"), CheckedAt: t0}
	p.SetUTCOffset(60)
	if want := time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC); !p.RestoredAtUTC.Equal(want) {
		t.Errorf("RestoredAtUTC = %v, want %v", p.RestoredAtUTC, want)
	}
}

func verifiedNow(t *testing.T, m *Manifest) *Manifest {
	t.Helper()
	c := *m
	c.History = append([]Transition(nil), m.History...)
	for _, s := range []State{StateCopied, StateRestored, StateChecked, StateVerified} {
		if err := c.Advance(s, t0); err != nil {
			t.Fatal(err)
		}
	}
	return &c
}

func withPrimary(m *Manifest, server string) *Manifest {
	c := *m
	c.PrimaryServer = server
	return &c
}

// A manifest holding a fact only version 3 has — an offset from UTC, or the
// writer's build, compression algorithm or TDE thumbprint — is written as
// version 3: builds reading only version 2 refuse unknown fields and must
// not take it for one of theirs. Without them it stays version 2.
func TestVersion3FactsAreWrittenAsVersion3(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "manifest-v2.json"))
	if err != nil {
		t.Fatal(err)
	}
	for name, set := range map[string]func(h *Header){
		"none":                  func(*Header) {},
		"software_version":      func(h *Header) { h.SoftwareVersion = "16.0.4135" },
		"compression_algorithm": func(h *Header) { h.CompressionAlgorithm = "MS_XPRESS" },
		"tde_thumbprint":        func(h *Header) { h.TDEThumbprint = "0x0102" },
		"utc_offset_minutes":    func(h *Header) { h.SetUTCOffset(120) },
	} {
		m, err := Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		set(m.Header)
		out, err := Encode(m)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		back, err := Decode(out)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if want := map[bool]int{true: 2, false: 3}[name == "none"]; back.SchemaVersion != want {
			t.Errorf("%s: written as version %d, want %d", name, back.SchemaVersion, want)
		}
	}
}

// A manifest with a sanity proof is schema version 4, the oldest that
// holds it: builds that read only version 3 list it as unreadable instead
// of misreading it; one without stays as it was.
func TestSanityProofIsVersion4(t *testing.T) {
	m := sample("Sales", 9)
	plain := mustEncode(t, m)
	if !bytes.Contains(plain, []byte(`"schema_version": 3,`)) || bytes.Contains(plain, []byte("sanity_proof")) {
		t.Errorf("a manifest without a sanity proof:\n%s", plain)
	}
	m.SanityProof = &SanityProof{VerifyInstance: "verify01", VerifyDatabase: "Sales_verify", RestoreHistoryID: 4,
		BackupSetGUID: "5d1f0c2e-aaaa-4bbb-8ccc-0123456789ab", Checks: []string{"orders-present"}, RanAs: "backupcycle_sanity",
		CheckedAt: t0, Passed: true}
	data := mustEncode(t, m)
	for _, field := range []string{`"schema_version": 4`, `"sanity_proof": {`, `"checks": [`, `"ran_as": "backupcycle_sanity"`, `"passed": true`} {
		if !bytes.Contains(data, []byte(field)) {
			t.Errorf("encoded manifest lacks %s:\n%s", field, data)
		}
	}
	got, err := Decode(data)
	if err != nil || got.SanityProof == nil || got.SanityProof.RestoreHistoryID != 4 || !got.SanityProof.Passed {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	if _, err := Decode(bytes.Replace(data, []byte(`"schema_version": 4`), []byte(`"schema_version": 3`), 1)); err == nil ||
		!strings.Contains(err.Error(), "cannot hold sanity_proof") {
		t.Errorf("version 3 with a sanity proof: %v", err)
	}
}

// A confirmed restore's CHECKDB baseline is a version 5 fact: builds that
// read only version 4 list the manifest as unreadable instead of dropping
// the baseline; a baseline without a confirmed restore is refused.
func TestCheckDBBaselineIsVersion5(t *testing.T) {
	m := sample("Sales", 9)
	m.VerifyCopy = &VerifyCopy{VerifyInstance: "verify01", VerifyDatabase: "Sales_verify", BackupSetGUID: "5d1f0c2e-aaaa-4bbb-8ccc-0123456789ab",
		SentAt: t0, RestoreHistoryID: 4, DatabaseID: 7, ConfirmedAt: t0.Add(time.Hour),
		CheckDBBaseline: &CheckDBBaseline{LastGood: t0.Add(-time.Hour), At: t0.Add(time.Hour)}}
	data := mustEncode(t, m)
	for _, field := range []string{`"schema_version": 5`, `"checkdb_baseline": {`, `"last_good": `} {
		if !bytes.Contains(data, []byte(field)) {
			t.Errorf("encoded manifest lacks %s:\n%s", field, data)
		}
	}
	got, err := Decode(data)
	if err != nil || got.VerifyCopy.CheckDBBaseline == nil || !got.VerifyCopy.CheckDBBaseline.At.Equal(t0.Add(time.Hour)) {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	if _, err := Decode(bytes.Replace(data, []byte(`"schema_version": 5`), []byte(`"schema_version": 4`), 1)); err == nil ||
		!strings.Contains(err.Error(), "cannot hold verify_copy.checkdb_baseline") {
		t.Errorf("version 4 with a baseline: %v", err)
	}
	m.VerifyCopy.RestoreHistoryID, m.VerifyCopy.DatabaseID, m.VerifyCopy.ConfirmedAt = 0, 0, time.Time{}
	if _, err := Encode(m); err == nil || !strings.Contains(err.Error(), "checkdb_baseline") {
		t.Errorf("a baseline without a confirmed restore: %v", err)
	}
}

// TestVerifyCopyIsAVersion3Fact: a manifest recording the verification copy
// is written as version 3 (a build reading only version 2 refuses unknown
// fields), reads back as written, and is refused when incomplete.
func TestVerifyCopyIsAVersion3Fact(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "manifest-v2.json"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	v := &VerifyCopy{VerifyInstance: "verify01", VerifyDatabase: "Sales_verify", BackupSetGUID: m.Header.BackupSetGUID, SentAt: t0,
		InstanceTime: t0.Add(time.Hour), Replaces: &DatabaseRef{ID: 7, Created: t0.Add(-24 * time.Hour)}, OtherDatabaseIDs: []int64{1, 2, 3, 4, 5}}
	m.VerifyCopy = v
	out, err := Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Decode(out)
	if err != nil {
		t.Fatal(err)
	}
	if back.SchemaVersion != 3 || back.VerifyCopy == nil || !back.VerifyCopy.On("verify01", "Sales_verify") || back.VerifyCopy.Confirmed() ||
		back.VerifyCopy.Replaces.ID != 7 || len(back.VerifyCopy.OtherDatabaseIDs) != 5 || !back.VerifyCopy.InstanceTime.Equal(v.InstanceTime) {
		t.Fatalf("read back as version %d: %+v", back.SchemaVersion, back.VerifyCopy)
	}
	if m.VerifyCopy.On("verify01", "sales_verify") || m.VerifyCopy.On("verify02", "Sales_verify") {
		t.Error("On matches another copy")
	}
	v.RestoreHistoryID = 12 // without the database id and confirmed_at
	if _, err := Encode(m); err == nil || !strings.Contains(err.Error(), "recorded together") {
		t.Errorf("half a confirmation: %v", err)
	}
	v.DatabaseID, v.ConfirmedAt = 9, t0.Add(2*time.Hour)
	if _, err := Encode(m); err != nil || !v.Confirmed() {
		t.Errorf("confirmed copy: %v", err)
	}
	// The confirmation keeps the copy's create_date, read back as
	// written; without the database id it is refused.
	v.DatabaseCreated = t0.Add(90 * time.Minute)
	if out, err = Encode(m); err != nil {
		t.Fatal(err)
	}
	if back, err = Decode(out); err != nil || !back.VerifyCopy.DatabaseCreated.Equal(v.DatabaseCreated) {
		t.Errorf("confirmed copy with its create_date read back: %+v %v", back.VerifyCopy, err)
	}
	v.RestoreHistoryID, v.DatabaseID, v.ConfirmedAt = 0, 0, time.Time{}
	if _, err := Encode(m); err == nil || !strings.Contains(err.Error(), "recorded together") {
		t.Errorf("a create_date without the confirmation: %v", err)
	}
	v.RestoreHistoryID, v.DatabaseID, v.ConfirmedAt = 12, 9, t0.Add(2*time.Hour)
	// The instance 13 hours ahead of UTC: the instant is its wall clock
	// minus that, read back as written; an instant without its offset, or
	// one that does not follow from it, is refused.
	v.SetUTCOffset(13 * 60)
	if out, err = Encode(m); err != nil {
		t.Fatal(err)
	}
	if back, err = Decode(out); err != nil || *back.VerifyCopy.UTCOffsetMinutes != 780 ||
		!back.VerifyCopy.InstanceTimeUTC.Equal(t0.Add(time.Hour-13*time.Hour)) {
		t.Errorf("copy with its offset read back: %+v %v", back.VerifyCopy, err)
	}
	v.InstanceTimeUTC = v.InstanceTime
	if _, err := Encode(m); err == nil || !strings.Contains(err.Error(), "verify_copy.instance_time_utc") {
		t.Errorf("an instant that is not the wall clock minus the offset: %v", err)
	}
	v.UTCOffsetMinutes = nil
	if _, err := Encode(m); err == nil {
		t.Error("an instant without its offset was written")
	}
	v.InstanceTimeUTC = time.Time{}
	// msdb's newest restore-history row then reads back as written (0:
	// msdb had none); a negative id, or one without the instance time it
	// was read with, is refused.
	for _, n := range []int64{0, 41} {
		v.NewestRestoreBefore = &n
		if out, err = Encode(m); err != nil {
			t.Fatal(err)
		}
		if back, err = Decode(out); err != nil || back.VerifyCopy.NewestRestoreBefore == nil || *back.VerifyCopy.NewestRestoreBefore != n {
			t.Errorf("copy with msdb's newest restore %d read back: %+v %v", n, back.VerifyCopy, err)
		}
	}
	bad := int64(-1)
	v.NewestRestoreBefore = &bad
	if _, err := Encode(m); err == nil || !strings.Contains(err.Error(), "newest_restore_before") {
		t.Errorf("a negative restore_history_id: %v", err)
	}
	n, at := int64(41), v.InstanceTime
	v.NewestRestoreBefore, v.InstanceTime = &n, time.Time{}
	if _, err := Encode(m); err == nil || !strings.Contains(err.Error(), "newest_restore_before") {
		t.Errorf("msdb's newest restore without the instance time: %v", err)
	}
	v.NewestRestoreBefore, v.InstanceTime = nil, at
	v.SentAt = time.Time{}
	if _, err := Encode(m); err == nil {
		t.Error("a copy without sent_at was written")
	}
}

// A manifest that names no run (empty workflow or run id: planted by
// anyone who can write the share) is owned by no run, not by every one.
func TestOwnedByNeedsARun(t *testing.T) {
	m := sample("Sales", 7)
	if !m.OwnedBy("backup-Sales", "run-1") || m.OwnedBy("backup-Sales", "run-2") {
		t.Errorf("OwnedBy of the run that claimed the set, and of another run: want true, false")
	}
	for _, ids := range [][2]string{{"", ""}, {"backup-Sales", ""}, {"", "run-1"}} {
		m.WorkflowID, m.RunID = ids[0], ids[1]
		for _, run := range [][2]string{{"backup-Sales", "run-1"}, ids} {
			if m.OwnedBy(run[0], run[1]) {
				t.Errorf("a manifest of workflow %q run %q is owned by workflow %q run %q, want by no run", ids[0], ids[1], run[0], run[1])
			}
		}
	}
}

// A verified set's immutable copy is recorded under version 7, signed or
// not, and read back as written; an older version cannot hold it, nor can
// a set that is not verified.
func TestImmutableCopyRecord(t *testing.T) {
	m := New("sql01", "Sales", 3, time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC))
	m.Stripes = []Stripe{{Name: m.StripeFileName(1, 1), Size: 10, SHA256: strings.Repeat("a", 64)}}
	m.Servers = []string{"bak01", "bak02"}
	for _, s := range []State{StateCopied, StateRestored, StateChecked, StateVerified} {
		if err := m.Advance(s, m.UpdatedAt.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	plain, err := Encode(m)
	if err != nil || !strings.Contains(string(plain), `"schema_version": 3`) {
		t.Fatalf("without an immutable copy: %v, %s", err, plain[:40])
	}
	m.Immutable = &ImmutableCopy{Server: "vault01", Location: "s3://s3.example.net/worm/bc", State: ImmutableCopied, At: m.UpdatedAt,
		Mode: "COMPLIANCE", RetainUntil: m.UpdatedAt.Add(72 * time.Hour),
		Objects: []ImmutableObject{{Name: m.Stripes[0].Name, VersionID: "v1", SHA256: m.Stripes[0].SHA256, Size: 10}},
		Probe:   &ImmutableProbe{At: m.UpdatedAt, Immutable: true, Summary: "immutable"}}
	keys, err := NewKeys(Key{ID: "k1", Secret: []byte(strings.Repeat("s", 40))})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []*Keys{nil, keys} {
		b, err := EncodeSigned(m, k)
		if err != nil || !strings.Contains(string(b), `"schema_version": 7`) {
			t.Fatalf("with an immutable copy (keys %v): %v", k != nil, err)
		}
		got, err := DecodeWith(b, k)
		if err != nil || got.Immutable == nil || got.Immutable.Objects[0].VersionID != "v1" || !got.Immutable.RetainUntil.Equal(m.Immutable.RetainUntil) {
			t.Fatalf("decoded: %+v, %v", got, err)
		}
	}
	old := strings.Replace(string(mustEncode(t, m)), `"schema_version": 7`, `"schema_version": 6`, 1)
	if _, err := Decode([]byte(old)); err == nil || !strings.Contains(err.Error(), "cannot hold immutable") {
		t.Errorf("version 6 with an immutable copy: %v", err)
	}
	m.State = StateCopied
	if _, err := Encode(m); err == nil || !strings.Contains(err.Error(), "only verified sets") {
		t.Errorf("an unverified set with an immutable copy: %v", err)
	}
}

// A differential set's manifest records its base under version 8 and reads
// back as written; an older version cannot hold it, nor can a base that is
// not an earlier set; a full's manifest is written as before.
func TestDifferentialRecord(t *testing.T) {
	m := sample("Sales", 9)
	full, err := Encode(m)
	if err != nil || strings.Contains(string(full), `"differential"`) || strings.Contains(string(full), `"schema_version": 8`) {
		t.Fatalf("a full's manifest: %v, %s", err, full)
	}
	m.Differential = &DiffBase{Sequence: 7, BackupSetGUID: "9c1e4c0a-8f0e-4f6e-9d7c-1b2a3c4d5e6f", LSN: "37000000012800038"}
	b := mustEncode(t, m)
	if !strings.Contains(string(b), `"schema_version": 8`) {
		t.Fatalf("a differential's manifest is not version 8: %s", b[:60])
	}
	got, err := Decode(b)
	if err != nil || !got.IsDifferential() || *got.Differential != *m.Differential {
		t.Fatalf("decoded: %+v, %v", got.Differential, err)
	}
	old := strings.Replace(string(b), `"schema_version": 8`, `"schema_version": 7`, 1)
	if _, err := Decode([]byte(old)); err == nil || !strings.Contains(err.Error(), "cannot hold differential") {
		t.Errorf("version 7 with a differential: %v", err)
	}
	for name, d := range map[string]DiffBase{
		"later base":  {Sequence: 9, BackupSetGUID: "x", LSN: "1"},
		"no GUID":     {Sequence: 7, LSN: "1"},
		"hex LSN":     {Sequence: 7, BackupSetGUID: "x", LSN: "0x25"},
		"no sequence": {BackupSetGUID: "x", LSN: "1"},
	} {
		m.Differential = &d
		if _, err := Encode(m); err == nil || !strings.Contains(err.Error(), "differential needs") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
