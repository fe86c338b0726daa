package mssql

import (
	"context"
	"encoding/hex"
	"strings"
	"time"

	"github.com/backupcycle/backupcycle/internal/tsql"
)

// What decides whether a verification instance can read a source's
// backups: the builds of both, and the certificate of a TDE database.

// ThumbprintText prints a varbinary thumbprint as SQL Server does: 0x and
// upper-case hex digits ("" for none).
func ThumbprintText(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return "0x" + strings.ToUpper(hex.EncodeToString(b))
}

// ProductVersion reads the instance's build (tsql.ProductVersion), e.g.
// "16.0.4135.4".
func (db *DB) ProductVersion(ctx context.Context) (string, error) {
	var v string
	err := db.scan(ctx, "read SERVERPROPERTY('ProductVersion')", tsql.ProductVersion, nil, func(r row) { v = r.str("product_version") })
	return v, err
}

// ServerCertificate is a certificate of master.
type ServerCertificate struct {
	Name       string
	Thumbprint string // ThumbprintText
	// PrivateKeyBackup is when its private key was last exported (BACKUP
	// CERTIFICATE ... WITH PRIVATE KEY); zero when never.
	PrivateKeyBackup time.Time
	// Expiry is expiry_date (UTC): BACKUP WITH ENCRYPTION refuses the
	// certificate from then on (3096), RESTORE still reads with it.
	Expiry time.Time
}

// Certificates is what a login sees of master's certificates.
type Certificates struct {
	List []ServerCertificate
	// All: the login sees every certificate (VIEW ANY DEFINITION); else a
	// certificate missing from List may still be there.
	All bool
}

// Find returns the certificate of a thumbprint (ThumbprintText), or nil.
func (c Certificates) Find(thumbprint string) *ServerCertificate {
	return findBy(c.List, func(x *ServerCertificate) string { return x.Thumbprint }, thumbprint)
}

// FindName returns the certificate of a name (as master compares names:
// without regard to case), or nil.
func (c Certificates) FindName(name string) *ServerCertificate {
	return findBy(c.List, func(x *ServerCertificate) string { return x.Name }, name)
}

// findBy returns the element of list whose key equals want without regard
// to case (names and thumbprints alike), or nil; want "" finds none.
func findBy[T any](list []T, key func(*T) string, want string) *T {
	for i := range list {
		if want != "" && strings.EqualFold(key(&list[i]), want) {
			return &list[i]
		}
	}
	return nil
}

// ServerCertificates reads master's certificates and whether the login
// sees them all (tsql.ServerCertificates, tsql.CertificatesVisible).
func (db *DB) ServerCertificates(ctx context.Context) (Certificates, error) {
	var c Certificates
	err := db.scan(ctx, "read master.sys.certificates", tsql.ServerCertificates, nil, func(r row) {
		c.List = append(c.List, ServerCertificate{Name: r.str("name"), Thumbprint: thumbprint(r, "thumbprint"),
			PrivateKeyBackup: r.time("pvt_key_last_backup_date"), Expiry: r.time("expiry_date")})
	})
	if err != nil {
		return c, err
	}
	err = db.scan(ctx, "check VIEW ANY DEFINITION", tsql.CertificatesVisible, nil, func(r row) { c.All = r.int("all_visible") == 1 })
	return c, err
}

// Encryption is whether a database is encrypted by TDE, and by which
// certificate.
type Encryption struct {
	Encrypted bool // sys.databases.is_encrypted
	// Thumbprint is the certificate protecting its encryption key
	// (ThumbprintText); "" when not encrypted or not read (KeyErr).
	Thumbprint string
	// KeyErr says why the thumbprint was not read: the login may not read
	// sys.dm_database_encryption_keys.
	KeyErr error
}

// DatabaseEncryption reads whether database is encrypted and, if so, the
// thumbprint of its certificate (tsql.DatabaseEncrypted, tsql.EncryptionKey).
// A login that may not read the encryption keys gets the flag and KeyErr.
func (db *DB) DatabaseEncryption(ctx context.Context, database string) (Encryption, error) {
	var e Encryption
	q, args, err := tsql.DatabaseEncrypted(database)
	if err != nil {
		return e, err
	}
	if err := db.scan(ctx, "read sys.databases.is_encrypted", q, args, func(r row) { e.Encrypted = r.bool("is_encrypted") }); err != nil {
		return e, err
	}
	if !e.Encrypted {
		return e, nil
	}
	q, args, err = tsql.EncryptionKey(database)
	if err != nil {
		return e, err
	}
	e.KeyErr = db.scan(ctx, "read sys.dm_database_encryption_keys", q, args, func(r row) { e.Thumbprint = thumbprint(r, "encryptor_thumbprint") })
	return e, nil
}
