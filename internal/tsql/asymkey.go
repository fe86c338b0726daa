package tsql

import "fmt"

// Asymmetric keys of master, the other encryptor of BACKUP ... WITH
// ENCRYPTION. SQL Server takes only keys of an Extensible Key Management
// provider for it: "If you're using asymmetric key to encrypt the backup
// data, only asymmetric keys residing in the EKM provider are supported"
// ("Backup encryption", Limitations,
// https://learn.microsoft.com/sql/relational-databases/backup-restore/backup-encryption).

// ServerAsymmetricKeys is the query for master's asymmetric keys: name
// sysname, thumbprint varbinary(32) ("SHA-1 hash of the key"),
// provider_type nvarchar ("CRYPTOGRAPHIC PROVIDER" for an Extensible Key
// Management key, NULL for another;
// https://learn.microsoft.com/sql/relational-databases/system-catalog-views/sys-asymmetric-keys-transact-sql).
// Visibility is that of certificates: CertificatesVisible tells whether
// the login sees them all.
const ServerAsymmetricKeys = "SELECT name, thumbprint, provider_type FROM master.sys.asymmetric_keys"

// ProviderTypeEKM is sys.asymmetric_keys.provider_type of a key of an EKM
// provider.
const ProviderTypeEKM = "CRYPTOGRAPHIC PROVIDER"

// OpenProviderKey builds the statement that makes an EKM provider's key an
// asymmetric key of master, as an instance that restores the backups it
// encrypted needs (CREATE ASYMMETRIC KEY ... FROM PROVIDER ... WITH
// PROVIDER_KEY_NAME = ..., CREATION_DISPOSITION = OPEN_EXISTING,
// https://learn.microsoft.com/sql/t-sql/statements/create-asymmetric-key-transact-sql).
// The provider and the key's name in it are placeholders the operator
// replaces: SQL Server's catalog does not show the latter.
func OpenProviderKey(name string) (string, error) {
	q, err := QuoteIdent(name)
	if err != nil {
		return "", fmt.Errorf("asymmetric key: %w", err)
	}
	return "USE [master]; CREATE ASYMMETRIC KEY " + q + " FROM PROVIDER [<provider>] WITH PROVIDER_KEY_NAME = N'<key name in the provider>', " +
		"CREATION_DISPOSITION = OPEN_EXISTING;", nil
}
