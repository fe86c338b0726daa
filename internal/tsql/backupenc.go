package tsql

import (
	"fmt"
	"slices"
	"strings"
)

// Backup encryption algorithms, BACKUP (Transact-SQL) ENCRYPTION: "ALGORITHM
// = { AES_128 | AES_192 | AES_256 | TRIPLE_DES_3KEY }", SQL Server 2014 and
// later ("Backup encryption",
// https://learn.microsoft.com/sql/relational-databases/backup-restore/backup-encryption).
const (
	AES128        = "AES_128"
	AES192        = "AES_192"
	AES256        = "AES_256"
	TripleDES3Key = "TRIPLE_DES_3KEY"
)

// BackupAlgorithms are the algorithms BACKUP ... WITH ENCRYPTION accepts.
var BackupAlgorithms = []string{AES128, AES192, AES256, TripleDES3Key}

// Encryptor types, as msdb.dbo.backupset.encryptor_type and RESTORE
// HEADERONLY EncryptorType name them ("backupset (Transact-SQL)").
const (
	EncryptorCertificate   = "CERTIFICATE"
	EncryptorAsymmetricKey = "ASYMMETRIC KEY"
)

// BackupEncryption is BACKUP's ENCRYPTION option: an algorithm and one
// encryptor, a server certificate or a server asymmetric key of master
// ("ENCRYPTION (ALGORITHM = ..., SERVER CERTIFICATE = Encryptor_Name |
// SERVER ASYMMETRIC KEY = Encryptor_Name)", BACKUP (Transact-SQL)).
type BackupEncryption struct {
	Algorithm           string // one of BackupAlgorithms (any case)
	ServerCertificate   string // the certificate's name in master
	ServerAsymmetricKey string // or the asymmetric key's
}

// Encryptor returns the encryptor's type (EncryptorCertificate or
// EncryptorAsymmetricKey) and name.
func (e BackupEncryption) Encryptor() (typ, name string) {
	if e.ServerAsymmetricKey != "" {
		return EncryptorAsymmetricKey, e.ServerAsymmetricKey
	}
	return EncryptorCertificate, e.ServerCertificate
}

// clause renders ENCRYPTION (ALGORITHM = a, SERVER CERTIFICATE = [n]); the
// algorithm is a keyword, so only a known one is written.
func (e *BackupEncryption) clause() (string, error) {
	alg := strings.ToUpper(e.Algorithm)
	if !slices.Contains(BackupAlgorithms, alg) {
		return "", fmt.Errorf("%w: ENCRYPTION ALGORITHM %q: use one of %s", ErrInvalidOption, e.Algorithm, strings.Join(BackupAlgorithms, ", "))
	}
	if (e.ServerCertificate == "") == (e.ServerAsymmetricKey == "") {
		return "", fmt.Errorf("%w: ENCRYPTION needs exactly one encryptor, a SERVER CERTIFICATE or a SERVER ASYMMETRIC KEY", ErrInvalidOption)
	}
	typ, name := e.Encryptor()
	q, err := QuoteIdent(name)
	if err != nil {
		return "", fmt.Errorf("ENCRYPTION %s: %w", typ, err)
	}
	return fmt.Sprintf("ENCRYPTION (ALGORITHM = %s, SERVER %s = %s)", alg, typ, q), nil
}
