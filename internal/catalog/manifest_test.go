package catalog

import (
	"bytes"
	"errors"
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
	for _, field := range []string{`"schema_version": 2`, `"naming": "case-safe"`, `"database": "Sales]; DROP DATABASE x--"`, `"sequence": 42`, `"state": "copied"`,
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
		{"newer schema", strings.Replace(string(good), `"schema_version": 2`, `"schema_version": 3`, 1), "schema_version 3 is not supported"},
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
