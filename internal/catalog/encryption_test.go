package catalog

import (
	"bytes"
	"strings"
	"testing"
)

var testEncryption = &BackupEncryption{Algorithm: "AES_256", Thumbprint: "0x" + strings.Repeat("AB", 20), EncryptorType: "CERTIFICATE"}

// A manifest of an encrypted set records algorithm and thumbprint as
// version 9; one of a set that is not encrypted is written as before.
func TestManifestRecordsBackupEncryption(t *testing.T) {
	plain, err := Encode(sample("Sales", 7))
	if err != nil {
		t.Fatal(err)
	}
	m := sample("Sales", 7)
	m.Header.Encryption = testEncryption
	data, err := Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if back.SchemaVersion != 9 || *back.Header.Encryption != *testEncryption {
		t.Fatalf("version %d, encryption %+v", back.SchemaVersion, back.Header.Encryption)
	}
	if p, _ := Decode(plain); p.SchemaVersion >= 9 || bytes.Contains(plain, []byte("encryption")) {
		t.Fatalf("a set that is not encrypted written as version %d", p.SchemaVersion)
	}
	for _, bad := range []BackupEncryption{{Algorithm: "AES_512", Thumbprint: testEncryption.Thumbprint, EncryptorType: "CERTIFICATE"},
		{Algorithm: "AES_256", Thumbprint: "ab", EncryptorType: "CERTIFICATE"}, {Algorithm: "AES_256", Thumbprint: testEncryption.Thumbprint}} {
		m.Header.Encryption = &bad
		if _, err := Encode(m); err == nil {
			t.Errorf("%+v: encoded", bad)
		}
	}
	// Version 8 cannot hold it.
	if _, err := Decode(bytes.Replace(data, []byte(`"schema_version": 9`), []byte(`"schema_version": 8`), 1)); err == nil {
		t.Error("a version 8 manifest with header.encryption decoded")
	}
}

// A chain record with an encrypted log backup or a log's own build is
// version 2, one without either stays version 1 (which the builds before
// read); both decode.
func TestChainRecordRecordsLogEncryption(t *testing.T) {
	r := sampleChain(t, 3, 1)
	if data, err := EncodeChain(r, nil); err != nil || !bytes.Contains(data, []byte(`"schema_version": 2`)) {
		t.Fatalf("a record with the logs' builds is not version 2 (%v)", err)
	}
	for i := range r.Logs {
		r.Logs[i].SoftwareVersion = ""
	}
	v1, err := EncodeChain(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(v1, []byte(`"schema_version": 1`)) {
		t.Fatalf("a record without encryption is not version 1:\n%s", v1[:80])
	}
	r.Logs[1].Encryption = testEncryption
	v2, err := EncodeChain(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeChain(v2, nil)
	if err != nil || back.SchemaVersion != 2 || back.Logs[1].Encryption == nil || *back.Logs[1].Encryption != *testEncryption {
		t.Fatalf("version 2 record: %v, %+v", err, back)
	}
	if _, err := DecodeChain(bytes.Replace(v2, []byte(`"schema_version": 2`), []byte(`"schema_version": 1`), 1), nil); err == nil {
		t.Error("a version 1 record with an encrypted log decoded")
	}
}
