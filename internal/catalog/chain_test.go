package catalog

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/tsql"
)

var chainT0 = time.Date(2025, 3, 1, 1, 0, 0, 0, time.UTC)

// chainLSN is a 23-digit LSN.
func chainLSN(n int) string { return fmt.Sprintf("171266580%014d", n) }

// sampleChain is part 1 of chain 3 of Sales@sql01: a full and n logs
// written and copied, the source at UTC+1.
func sampleChain(t *testing.T, n, files int) *ChainRecord {
	t.Helper()
	r := NewChainRecord("sql01", "Sales", 3, 1, chainT0)
	r.Fulls = []ChainFull{{Sequence: 42, BackupSetGUID: "8a7c2f0e-0000-4000-8000-000000000042", FirstLSN: chainLSN(100), LastLSN: chainLSN(105),
		CheckpointLSN: chainLSN(101), FinishUTC: chainT0}}
	for i := 1; i <= n; i++ {
		l, err := r.Claim(r.NextNumber(), "log-sql01-Sales", "run-1", chainT0)
		if err != nil {
			t.Fatal(err)
		}
		l.State = LogCopied
		l.BackupSetGUID = fmt.Sprintf("9b8c2f0e-0000-4000-8000-%012d", i)
		l.FirstLSN, l.LastLSN, l.DatabaseBackupLSN = chainLSN(100+10*(i-1)), chainLSN(100+10*i), chainLSN(101)
		l.BackupStart = chainT0.Add(time.Duration(i)*time.Minute + time.Hour)
		l.BackupFinish = l.BackupStart.Add(3 * time.Second)
		l.SetUTCOffset(60)
		l.SoftwareVersion = "16.0.4135"
		for j := 1; j <= files; j++ {
			l.Files = append(l.Files, Stripe{Name: r.LogFileName(l.Number, j, files), Size: 1 << 20, SHA256: strings.Repeat("ab", 32)})
		}
		l.Servers = []string{"bak01", "bak02"}
		if i%2 == 1 {
			l.Proven = &LogProof{At: l.BackupFinishUTC.Add(time.Minute), Mode: "standby", Instance: "sqlverify", Database: "Sales_standby"}
		}
	}
	return r
}

func TestChainRecordRoundTripSigned(t *testing.T) {
	keys := testKeys(t, "k1", "k0")
	r := sampleChain(t, 5, 2)
	data, err := EncodeChain(r, keys)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeChain(data, keys)
	if err != nil {
		t.Fatal(err)
	}
	if got.Auth != AuthSigned || !got.Trusted() {
		t.Fatalf("auth %s", got.Auth)
	}
	again, err := EncodeChain(got, keys)
	if err != nil || !bytes.Equal(again, data) {
		t.Fatalf("re-encoding differs (%v)", err)
	}
	// Changed after it was signed: not trusted.
	tampered := bytes.Replace(data, []byte(`"size": 1048576`), []byte(`"size": 1048577`), 1)
	if r, err := DecodeChain(tampered, keys); err != nil || r.Auth != AuthInvalid {
		t.Fatalf("a changed record: %v %v", r, err)
	}
	// A manifest's signature never verifies a chain record.
	if keys.Verify(purposeManifest, data, got.Signature) == AuthSigned {
		t.Fatal("a chain record's signature verifies as a manifest's")
	}
	unsigned, _ := EncodeChain(r, nil)
	if r, err := DecodeChain(unsigned, keys); err != nil || r.Auth != AuthUnsigned || r.Trusted() {
		t.Fatalf("unsigned record under keys: %v %v", r.Auth, err)
	}
	if r, err := DecodeChain(unsigned, nil); err != nil || !r.Trusted() {
		t.Fatalf("unsigned record without keys: %v", err)
	}
}

func TestChainRecordStrictDecode(t *testing.T) {
	data, err := EncodeChain(sampleChain(t, 2, 1), nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string][]byte{
		"unknown field":  bytes.Replace(data, []byte(`"chain": 3,`), []byte(`"chain": 3, "extra": 1,`), 1),
		"trailing data":  append(bytes.Clone(data), []byte("{}")...),
		"newer schema":   bytes.Replace(data, []byte(`"schema_version": 2`), []byte(`"schema_version": 3`), 1),
		"bad LSN":        bytes.Replace(data, []byte(chainLSN(110)), []byte("12x"), 1),
		"renamed file":   bytes.Replace(data, []byte("_1of1.trn"), []byte("_1of1.bak"), 1),
		"over the cap":   append(bytes.Clone(data), bytes.Repeat([]byte(" "), MaxChainRecordBytes)...),
		"unknown proof":  bytes.Replace(data, []byte(`"mode": "standby"`), []byte(`"mode": "hope"`), 1),
		"numbers reused": bytes.Replace(data, []byte(`"number": 2`), []byte(`"number": 1`), 1),
		"not a build":    bytes.Replace(data, []byte(`"software_version": "16.0.4135"`), []byte(`"software_version": "2022 CU16"`), 1),
	} {
		if _, err := DecodeChain(bad, nil); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// A part at its limits (every log with MaxLogFiles files, the longest
// names) stays within MaxChainRecordBytes.
// A record written before log backups kept their build decodes as it
// did: no build for its logs (the recover then checks the full's, and the
// source's for a RESTORE the target refuses).
func TestChainRecordWithoutLogVersions(t *testing.T) {
	r := sampleChain(t, 2, 1)
	for i := range r.Logs {
		r.Logs[i].SoftwareVersion = ""
	}
	data, err := EncodeChain(r, nil)
	if err != nil || bytes.Contains(data, []byte("software_version")) {
		t.Fatalf("a record without builds: %v\n%s", err, data)
	}
	got, err := DecodeChain(data, nil)
	if err != nil || len(LogVersions([]*ChainRecord{got})) != 0 {
		t.Fatalf("decoded %v, builds %v", err, LogVersions([]*ChainRecord{got}))
	}
	if v := LogVersions([]*ChainRecord{sampleChain(t, 2, 1)}); v[1] != "16.0.4135" || v[2] != "16.0.4135" {
		t.Fatalf("builds of a record that keeps them: %v", v)
	}
}

func TestChainRecordFullPartFits(t *testing.T) {
	long := strings.Repeat("ü", 80) // 160 bytes: the widest database part
	r := sampleChain(t, 0, 0)
	r.SourceInstance, r.Database = strings.Repeat("i", 64), long
	for i := 1; i <= MaxLogsPerPart; i++ {
		l, err := r.Claim(r.NextNumber(), strings.Repeat("w", 200), strings.Repeat("r", 36), chainT0)
		if err != nil {
			t.Fatal(err)
		}
		l.State = LogCopied
		l.FirstLSN, l.LastLSN, l.DatabaseBackupLSN = strings.Repeat("9", 25), strings.Repeat("9", 25), strings.Repeat("9", 25)
		l.BackupSetGUID = "9b8c2f0e-0000-4000-8000-000000000000"
		l.BackupStart, l.BackupFinish = chainT0, chainT0
		l.SetUTCOffset(-570)
		l.SoftwareVersion = "999.999.999999.999999"
		for j := 1; j <= MaxLogFiles; j++ {
			l.Files = append(l.Files, Stripe{Name: r.LogFileName(l.Number, j, MaxLogFiles), Size: 1 << 40, SHA256: strings.Repeat("ab", 32)})
		}
		l.Servers = []string{strings.Repeat("s", 63), strings.Repeat("t", 63)}
		l.Proven = &LogProof{At: chainT0, Mode: "nightly", Instance: strings.Repeat("v", 63), Database: strings.Repeat("d", 128)}
	}
	data, err := EncodeChain(r, testKeys(t, "k1"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("a full part: %d bytes of %d", len(data), MaxChainRecordBytes)
	if _, err := r.Claim(r.NextNumber(), "w", "r", chainT0); err == nil {
		t.Fatal("a part takes more than MaxLogsPerPart logs")
	}
	if PartOf(int64(MaxLogsPerPart)) != 1 || PartOf(int64(MaxLogsPerPart)+1) != 2 {
		t.Fatal("PartOf")
	}
}

func TestChainRecordClaims(t *testing.T) {
	r := sampleChain(t, 2, 1)
	if _, err := r.Claim(2, "w", "r", chainT0); err == nil {
		t.Fatal("a number already held is claimed again")
	}
	if _, err := r.Claim(5, "w", "r", chainT0); err == nil {
		t.Fatal("a number out of order is claimed")
	}
	l, err := r.Claim(3, "w2", "r2", chainT0)
	if err != nil || !l.OwnedBy("w2", "r2") || l.OwnedBy("log-sql01-Sales", "run-1") {
		t.Fatalf("%+v %v", l, err)
	}
	l.State, l.Failure = LogFailed, "BACKUP LOG failed: 3201"
	if n := r.NextNumber(); n != 4 {
		t.Fatalf("after a failed log the next number is %d, want 4 (never reused)", n)
	}
	if _, err := EncodeChain(r, nil); err != nil {
		t.Fatal(err)
	}
}

func TestChainRecordsListedAndAssembled(t *testing.T) {
	ctx := context.Background()
	d := &dirFS{dir: t.TempDir()}
	keys := testKeys(t, "k1")
	r := sampleChain(t, 4, 1)
	// A foreign log backup between ours, not adopted.
	r.Logs[2].Foreign, r.Logs[2].Files, r.Logs[2].WorkflowID, r.Logs[2].RunID, r.Logs[2].Proven = &ForeignLog{Tool: "Ola", Path: `\\nas\x.trn`}, nil, "", "", nil
	if err := SaveChain(ctx, d, keys, r); err != nil {
		t.Fatal(err)
	}
	other := sampleChain(t, 1, 1)
	other.Database = "Sales_2024"
	other.Logs[0].Files[0].Name = other.LogFileName(1, 1, 1)
	if err := SaveChain(ctx, d, keys, other); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{r.LogFileName(1, 1, 1), other.LogFileName(1, 1, 1), tsql.StripeFileName("sql01", "Sales", 42, 1, 1)} {
		if err := WriteFileAtomic(ctx, d, name, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	l, err := ListChains(ctx, d, keys, Of("sql01", "Sales"))
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Records) != 1 || len(l.Broken) != 0 || len(l.LogFiles) != 1 || l.LogFiles[0].Name != r.LogFileName(1, 1, 1) {
		t.Fatalf("records %d broken %v log files %v", len(l.Records), l.Broken, l.LogFiles)
	}
	// The sets' listing may meet a chain's files (the legacy prefix
	// sql01@Sales_ starts Sales_2024's names, as it starts its stripes'),
	// but never takes one for a set's.
	sets, err := List(ctx, d, keys, &DB{Instance: "sql01", Database: "Sales"})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range sets.Files {
		_, stripe := tsql.ParseStripeFileName(f.Name)
		_, manifest := tsql.ParseManifestFileName(f.Name)
		if strings.Contains(f.Name, "~log") && (stripe || manifest) {
			t.Fatalf("%s parses as a set's file", f.Name)
		}
	}
	c, err := AssembleChain(l.Records, map[string]bool{r.Fulls[0].BackupSetGUID: true})
	if err != nil {
		t.Fatal(err)
	}
	gaps := c.Gaps()
	if len(gaps) != 1 || gaps[0].Before != 3 || gaps[0].Foreign == nil {
		t.Fatalf("gaps %v", gaps)
	}
	to, ok := c.ProvenTo()
	if !ok || !to.Equal(r.Logs[0].BackupStartUTC) {
		t.Fatalf("proven to %s %v, want log 1's start %s (log 2 is not applied)", to, ok, r.Logs[0].BackupStartUTC)
	}
	// An untrusted part is refused.
	l.Records[0].Auth = AuthUnsigned
	if _, err := AssembleChain(l.Records, nil); err == nil {
		t.Fatal("an unsigned record is assembled under keys")
	}
	loaded, err := LoadChain(ctx, d, keys, "sql01", "Sales", 3, 1)
	if err != nil || loaded.Auth != AuthSigned {
		t.Fatalf("load: %v", err)
	}
	if _, err := LoadChain(ctx, d, keys, "sql01", "Sales", 3, 2); !IsNotExist(err) {
		t.Fatalf("a missing part: %v", err)
	}
}
