package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/backupcycle/backupcycle/internal/tsql"
)

// Encryption is `encryption:`: every backup of the database (full,
// differential, log) taken WITH ENCRYPTION (ALGORITHM = ..., SERVER
// CERTIFICATE = ... | SERVER ASYMMETRIC KEY = ...), SQL Server 2014 and
// later, Standard or Enterprise: "SQL Server Express and SQL Server Web
// don't support encryption during backup" ("Backup encryption",
// https://learn.microsoft.com/sql/relational-databases/backup-restore/backup-encryption).
// A database inherits it from defaults: as a whole; encryption: {} turns
// it off for one database.
type Encryption struct {
	// Algorithm is AES_128, AES_192, AES_256 or TRIPLE_DES_3KEY.
	Algorithm string `yaml:"algorithm"`
	// ServerCertificate names a certificate in master of the source;
	// ServerAsymmetricKey an asymmetric key there (one of the two).
	ServerCertificate   string `yaml:"server_certificate"`
	ServerAsymmetricKey string `yaml:"server_asymmetric_key"`
	// PrivateKeyBackedUp acknowledges that the certificate's private key is
	// kept outside the source although SQL Server never exported it
	// (pvt_key_last_backup_date NULL: the certificate was created from
	// files, CREATE CERTIFICATE ... FROM FILE, which it does not count as
	// a backup); without it preflight refuses such a certificate.
	PrivateKeyBackedUp bool `yaml:"private_key_backed_up"`
}

// inheritWhole: a database's encryption: replaces the defaults' whole.
func (Encryption) inheritWhole() {}

// Enabled reports whether the backups are encrypted.
func (e Encryption) Enabled() bool {
	return e.Algorithm != "" || e.ServerCertificate != "" || e.ServerAsymmetricKey != ""
}

// Backup is the BACKUP statement's ENCRYPTION option; nil when off.
func (e Encryption) Backup() *tsql.BackupEncryption {
	if !e.Enabled() {
		return nil
	}
	return &tsql.BackupEncryption{Algorithm: e.Algorithm, ServerCertificate: e.ServerCertificate, ServerAsymmetricKey: e.ServerAsymmetricKey}
}

// checkEncryptions checks the encryption: of defaults and of every
// database that sets its own.
func (d *decoder) checkEncryptions(c *Config) {
	d.checkEncryption(&c.Defaults.Encryption, "defaults", "defaults")
	for i := range c.Databases {
		path := fmt.Sprintf("databases[%d]", i)
		if d.given(join(path, "encryption")) {
			d.checkEncryption(&c.Databases[i].Encryption, path, labelled(path, c.Databases[i].Name))
		} else {
			c.Databases[i].Encryption = c.Defaults.Encryption // as checked and normalised
		}
	}
}

// checkEncryption checks one encryption: and normalises its algorithm to
// the upper case BACKUP writes.
func (d *decoder) checkEncryption(e *Encryption, path, owner string) {
	if !e.Enabled() {
		return
	}
	at := func(k string) (int, string) { return d.line(join(path, k)), join(path, k) }
	e.Algorithm = strings.ToUpper(strings.TrimSpace(e.Algorithm))
	switch {
	case e.Algorithm == "":
		l, kp := at("encryption.algorithm")
		d.errf(l, kp, "%s: encryption.algorithm is missing: use AES_256 (or AES_128, AES_192)", owner)
	case !slices.Contains(tsql.BackupAlgorithms, e.Algorithm):
		l, kp := at("encryption.algorithm")
		d.errf(l, kp, "%s: encryption.algorithm %q is not one SQL Server knows: use AES_128, AES_192, AES_256 or TRIPLE_DES_3KEY", owner, e.Algorithm)
	case e.Algorithm == tsql.TripleDES3Key:
		// "Beginning with SQL Server 2016 (13.x), all algorithms other
		// than AES_128, AES_192, and AES_256 are deprecated" (CREATE
		// SYMMETRIC KEY (Transact-SQL)); BACKUP still accepts it.
		l, kp := at("encryption.algorithm")
		d.warnf(l, kp, "%s: encryption.algorithm TRIPLE_DES_3KEY is deprecated by Microsoft and weaker than AES: use AES_256 for new backups", owner)
	}
	switch {
	case e.ServerCertificate == "" && e.ServerAsymmetricKey == "":
		l, kp := at("encryption")
		d.errf(l, kp, "%s: encryption: name the encryptor: server_certificate: NAME (a certificate in master of the source instance) "+
			"or server_asymmetric_key: NAME (an asymmetric key of an EKM provider there)", owner)
	case e.ServerCertificate != "" && e.ServerAsymmetricKey != "":
		l, kp := at("encryption.server_asymmetric_key")
		d.errf(l, kp, "%s: encryption: server_certificate and server_asymmetric_key are both set: BACKUP takes one encryptor; keep one", owner)
	}
	for _, k := range []string{"server_certificate", "server_asymmetric_key"} {
		name := e.ServerCertificate
		if k == "server_asymmetric_key" {
			name = e.ServerAsymmetricKey
		}
		if name == "" {
			continue
		}
		l, kp := at("encryption." + k)
		if err := tsql.CheckIdent(name); err != nil {
			d.errf(l, kp, "%s: encryption.%s: %v", owner, k, err)
		} else if strings.HasPrefix(name, "##") || strings.HasSuffix(name, "##") {
			// Names in ## are SQL Server's own certificates, which encrypt
			// no backup ("Backup encryption", certificates eligible).
			d.errf(l, kp, "%s: encryption.%s %q is a built-in certificate of SQL Server: create your own with CREATE CERTIFICATE in master", owner, k, name)
		}
	}
	if e.PrivateKeyBackedUp && e.ServerCertificate == "" {
		l, kp := at("encryption.private_key_backed_up")
		d.errf(l, kp, "%s: encryption.private_key_backed_up is about a server_certificate's private key; an asymmetric key stays in its EKM provider: remove it", owner)
	}
}
