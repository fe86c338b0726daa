package mssql

import (
	"context"

	"github.com/backupcycle/backupcycle/internal/tsql"
)

// AsymmetricKey is an asymmetric key of master, the other encryptor of a
// backup.
type AsymmetricKey struct {
	Name       string
	Thumbprint string // ThumbprintText
	// EKM: the key lives in an Extensible Key Management provider
	// (provider_type CRYPTOGRAPHIC PROVIDER), the only asymmetric keys
	// BACKUP ... WITH ENCRYPTION takes.
	EKM bool
}

// AsymmetricKeys is what a login sees of master's asymmetric keys.
type AsymmetricKeys struct {
	List []AsymmetricKey
	// All: the login sees every key (VIEW ANY DEFINITION).
	All bool
}

// Find returns the key of a thumbprint (ThumbprintText), or nil.
func (k AsymmetricKeys) Find(thumbprint string) *AsymmetricKey {
	return findBy(k.List, func(x *AsymmetricKey) string { return x.Thumbprint }, thumbprint)
}

// FindName returns the key of a name (without regard to case), or nil.
func (k AsymmetricKeys) FindName(name string) *AsymmetricKey {
	return findBy(k.List, func(x *AsymmetricKey) string { return x.Name }, name)
}

// ServerAsymmetricKeys reads master's asymmetric keys and whether the login
// sees them all (tsql.ServerAsymmetricKeys, tsql.CertificatesVisible).
func (db *DB) ServerAsymmetricKeys(ctx context.Context) (AsymmetricKeys, error) {
	var k AsymmetricKeys
	err := db.scan(ctx, "read master.sys.asymmetric_keys", tsql.ServerAsymmetricKeys, nil, func(r row) {
		k.List = append(k.List, AsymmetricKey{Name: r.str("name"), Thumbprint: thumbprint(r, "thumbprint"),
			EKM: r.str("provider_type") == tsql.ProviderTypeEKM})
	})
	if err != nil {
		return k, err
	}
	err = db.scan(ctx, "check VIEW ANY DEFINITION", tsql.CertificatesVisible, nil, func(r row) { k.All = r.int("all_visible") == 1 })
	return k, err
}
