package tsql

import (
	"fmt"
)

// Versions and transparent data encryption: what decides whether the
// verification instance can read a source's backups.

// ProductVersionColumn is the select-list item of an instance's build,
// product_version nvarchar ("16.0.4135.4": major.minor.build.revision,
// SERVERPROPERTY('ProductVersion'),
// https://learn.microsoft.com/sql/t-sql/functions/serverproperty-transact-sql).
const ProductVersionColumn = "CAST(SERVERPROPERTY(N'ProductVersion') AS nvarchar(128)) AS product_version"

// ProductVersion is the query for the build alone: one row, product_version.
const ProductVersion = "SELECT " + ProductVersionColumn

// DatabaseEncrypted returns the query for whether db is encrypted by TDE:
// one row (is_encrypted bit, sys.databases: "Indicates whether the database
// is encrypted"), none when db is not there. Every login may read its row
// of sys.databases (VIEW ANY DATABASE is granted to public).
func DatabaseEncrypted(db string) (string, []any, error) {
	if err := CheckIdent(db); err != nil {
		return "", nil, fmt.Errorf("encryption lookup: %w", err)
	}
	return "SELECT is_encrypted FROM sys.databases WHERE name = @p1", []any{db}, nil
}

// EncryptionKey returns the query for the certificate protecting db's
// database encryption key: one row (encryptor_thumbprint varbinary(20),
// encryptor_type nvarchar: CERTIFICATE or ASYMMETRIC KEY) when db has one.
// sys.dm_database_encryption_keys needs VIEW SERVER STATE, on SQL Server
// 2022 VIEW SERVER SECURITY STATE (implied by VIEW SERVER STATE); without
// it SQL Server answers 300 and 297
// (https://learn.microsoft.com/sql/relational-databases/system-dynamic-management-views/sys-dm-database-encryption-keys-transact-sql).
func EncryptionKey(db string) (string, []any, error) {
	if err := CheckIdent(db); err != nil {
		return "", nil, fmt.Errorf("encryption key lookup: %w", err)
	}
	return "SELECT encryptor_thumbprint, encryptor_type FROM sys.dm_database_encryption_keys WHERE database_id = DB_ID(@p1)",
		[]any{db}, nil
}

// ServerCertificates is the query for master's certificates: name sysname,
// thumbprint varbinary(32), pvt_key_last_backup_date datetime ("The date and
// time the certificate's private key was last exported", NULL when never),
// expiry_date datetime (in UTC: "EXPIRY_DATE is in UTC time", CREATE
// CERTIFICATE (Transact-SQL);
// https://learn.microsoft.com/sql/relational-databases/system-catalog-views/sys-certificates-transact-sql).
// A login sees only the certificates it owns or holds a permission on
// ("Metadata Visibility Configuration"): CertificatesVisible tells whether
// it sees them all.
const ServerCertificates = "SELECT name, thumbprint, pvt_key_last_backup_date, expiry_date FROM master.sys.certificates"

// CertificatesVisible is the query for whether the login sees every
// certificate: one row, all_visible int (1 with VIEW ANY DEFINITION, which
// CONTROL SERVER and sysadmin imply).
const CertificatesVisible = "SELECT HAS_PERMS_BY_NAME(NULL, NULL, N'" + PermViewAnyDefinition + "') AS all_visible"

// CertificateFiles are the file names the fix of a missing TDE certificate
// suggests: the certificate and its private key, as BACKUP CERTIFICATE
// writes them.
func CertificateFiles(name string) (cert, key string) { return name + ".cer", name + ".pvk" }

// BackupCertificate builds the statement that exports a certificate of
// master with its private key, for another instance to import
// (https://learn.microsoft.com/sql/t-sql/statements/backup-certificate-transact-sql).
// password is a placeholder the operator replaces; files are relative to
// the instance's default backup directory.
func BackupCertificate(name, password string) (string, error) {
	return certificateStatement("BACKUP CERTIFICATE %s TO FILE = %s WITH PRIVATE KEY (FILE = %s, ENCRYPTION BY PASSWORD = %s);",
		name, password)
}

// CreateCertificateFromFile builds the statement that imports a certificate
// and its private key into master, where RESTORE finds it ("Move a TDE
// Protected Database to Another SQL Server"; master needs a database master
// key first: CREATE MASTER KEY ENCRYPTION BY PASSWORD = ...).
func CreateCertificateFromFile(name, password string) (string, error) {
	return certificateStatement("CREATE CERTIFICATE %s FROM FILE = %s WITH PRIVATE KEY (FILE = %s, DECRYPTION BY PASSWORD = %s);",
		name, password)
}

// certificateStatement fills format with the quoted certificate name, its
// two files (CertificateFiles) and the password, in master.
func certificateStatement(format, name, password string) (string, error) {
	q, err := QuoteIdent(name)
	if err != nil {
		return "", fmt.Errorf("certificate: %w", err)
	}
	cert, key := CertificateFiles(name)
	return "USE [master]; " + fmt.Sprintf(format, q, QuoteString(cert), QuoteString(key), QuoteString(password)), nil
}
