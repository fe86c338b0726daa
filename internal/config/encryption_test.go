package config

import (
	"strings"
	"testing"
)

// encryption: inherits from defaults: as a whole (a database naming an
// asymmetric key does not also inherit the defaults' certificate), and
// encryption: {} turns it off for one database.
func TestEncryptionInheritsAsAWhole(t *testing.T) {
	c, err := Parse([]byte(base), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Databases[0].Encryption.Enabled() {
		t.Fatalf("encrypted without encryption: %+v", c.Databases[0].Encryption)
	}
	def := "defaults:\n  encryption: {algorithm: aes_256, server_certificate: BackupCert}\n"
	c, err = Parse([]byte(def+base), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if e := c.Databases[0].Encryption; !e.Enabled() || e.Algorithm != "AES_256" || e.ServerCertificate != "BackupCert" {
		t.Fatalf("inherited: %+v", e)
	}
	c, err = Parse([]byte(def+base+"    encryption: {algorithm: AES_128, server_asymmetric_key: EKMKey}\n"), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if e := c.Databases[0].Encryption; e.ServerCertificate != "" || e.ServerAsymmetricKey != "EKMKey" || e.Algorithm != "AES_128" {
		t.Fatalf("own encryptor mixed with the defaults': %+v", e)
	}
	c, err = Parse([]byte(def+base+"    encryption: {}\n"), "config.yaml")
	if err != nil || c.Databases[0].Encryption.Enabled() {
		t.Fatalf("encryption: {} for one database: %v, %+v", err, c.Databases)
	}
	if len(c.Warnings) != 0 {
		t.Errorf("warnings: %v", c.Warnings)
	}
}

func TestEncryptionRefused(t *testing.T) {
	for _, tc := range []struct{ yaml, msg string }{
		{base + "    encryption: {algorithm: AES_512, server_certificate: C}\n", "config.yaml:28: databases[0] (Sales): encryption.algorithm \"AES_512\" is not one SQL Server knows: use AES_128, AES_192, AES_256 or TRIPLE_DES_3KEY"},
		{base + "    encryption: {server_certificate: C}\n", "encryption.algorithm is missing"},
		{base + "    encryption: {algorithm: AES_256}\n", "encryption: name the encryptor"},
		{base + "    encryption: {algorithm: AES_256, server_certificate: C, server_asymmetric_key: K}\n", "encryption: server_certificate and server_asymmetric_key are both set"},
		{"defaults:\n  encryption: {algorithm: AES_256}\n" + base, "defaults: encryption: name the encryptor"},
		{base + "    encryption: {algorithm: AES_256, server_certificate: '##MS_Cert##'}\n", "built-in certificate"},
		{base + "    encryption: {algorithm: AES_256, server_asymmetric_key: K, private_key_backed_up: true}\n", "private_key_backed_up"},
	} {
		_, err := Parse([]byte(tc.yaml), "config.yaml")
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("want an error containing %q, got %v", tc.msg, err)
		}
	}
}

// TRIPLE_DES_3KEY loads, with a warning.
func TestEncryptionTripleDESWarned(t *testing.T) {
	c, err := Parse([]byte(base+"    encryption: {algorithm: triple_des_3key, server_certificate: C}\n"), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0].Msg, "TRIPLE_DES_3KEY") || !strings.Contains(c.Warnings[0].Msg, "AES_256") {
		t.Fatalf("warnings: %v", c.Warnings)
	}
}
