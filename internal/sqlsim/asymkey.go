package sqlsim

import (
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/backupcycle/backupcycle/internal/sqlsim/tds"
)

// Asymmetric keys of master, the other encryptor BACKUP ... WITH
// ENCRYPTION takes (SERVER ASYMMETRIC KEY = name). SQL Server accepts only
// keys of an Extensible Key Management provider for it: "If you're using
// asymmetric key to encrypt the backup data, only asymmetric keys residing
// in the EKM provider are supported" ("Backup encryption", Limitations,
// https://learn.microsoft.com/en-us/sql/relational-databases/backup-restore/backup-encryption).
// Such a key never leaves its provider: another instance reaches the same
// key by registering the provider and opening it (CREATE ASYMMETRIC KEY
// ... FROM PROVIDER ... WITH PROVIDER_KEY_NAME = ..., CREATION_DISPOSITION
// = OPEN_EXISTING, CREATE ASYMMETRIC KEY (Transact-SQL)), which
// OpenAsymmetricKey stands for.

// AsymmetricKey is an asymmetric key of master (master.sys.asymmetric_keys).
type AsymmetricKey struct {
	Name string
	// Provider is the EKM provider (CREATE CRYPTOGRAPHIC PROVIDER) that
	// holds the key, ProviderKeyName its name there; Provider "" is a key
	// SQL Server holds itself, encrypted by the database master key.
	Provider, ProviderKeyName string
	Thumbprint                []byte // SHA-1, 20 bytes
	// PrivateKey is the key pair's secret, which stays in the provider:
	// OpenAsymmetricKey of the same key on another instance carries it.
	PrivateKey []byte
}

// ThumbprintText is the thumbprint as SQL Server prints a varbinary.
func (k AsymmetricKey) ThumbprintText() string { return thumbprintText(k.Thumbprint) }

// asymmetricKey is an asymmetric key of the instance's catalog.
type asymmetricKey struct {
	ID              int    `json:"id"`
	Name            string `json:"name"`
	Provider        string `json:"provider,omitempty"`
	ProviderKeyName string `json:"provider_key_name,omitempty"`
	Thumbprint      string `json:"thumbprint"` // hex
	Key             string `json:"key"`        // hex
}

// sealKey is the secret that seals the key of a backup set encrypted by
// the asymmetric key (keyWrap).
func (k *asymmetricKey) sealKey() []byte {
	b, _ := hex.DecodeString(k.Key)
	sum := sha256.Sum256(append([]byte("sqlsim asymmetric key\x00"), b...))
	return sum[:]
}

// asymKeyLocked finds an asymmetric key by name (case-insensitive) or, with
// name "", by thumbprint (hex); in.mu must be held.
func (in *Instance) asymKeyLocked(name, thumbprint string) *asymmetricKey {
	for _, k := range in.cat.AsymmetricKeys {
		if name != "" && strings.EqualFold(k.Name, name) || name == "" && strings.EqualFold(k.Thumbprint, thumbprint) {
			return k
		}
	}
	return nil
}

// CreateAsymmetricKey is CREATE ASYMMETRIC KEY name FROM PROVIDER provider
// WITH PROVIDER_KEY_NAME = providerKey, CREATION_DISPOSITION = CREATE_NEW
// in master: a new key pair in the provider. provider "" is CREATE
// ASYMMETRIC KEY name WITH ALGORITHM = RSA_2048, a key SQL Server holds
// itself.
func (in *Instance) CreateAsymmetricKey(name, provider, providerKey string) (AsymmetricKey, error) {
	seed := make([]byte, 32)
	rand.Read(seed)
	sum := sha1.Sum(seed)
	k := AsymmetricKey{Name: name, Provider: provider, ProviderKeyName: providerKey, Thumbprint: sum[:], PrivateKey: seed}
	return k, in.OpenAsymmetricKey(k)
}

// OpenAsymmetricKey installs k in master as CREATE ASYMMETRIC KEY ... FROM
// PROVIDER ... WITH CREATION_DISPOSITION = OPEN_EXISTING does for a key
// already in the provider: the same key (thumbprint) on this instance,
// which then reads the backups it encrypted.
func (in *Instance) OpenAsymmetricKey(k AsymmetricKey) error {
	if k.Name == "" || len(k.Thumbprint) != sha1.Size {
		return fmt.Errorf("sqlsim: OpenAsymmetricKey: a key needs a name and a 20-byte thumbprint")
	}
	tp := hex.EncodeToString(k.Thumbprint)
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.asymKeyLocked(k.Name, "") != nil || in.asymKeyLocked("", tp) != nil {
		return fmt.Errorf("sqlsim: error 15232: an asymmetric key with name '%s' already exists or this asymmetric key already has been added to the database", k.Name)
	}
	id := nextSecurableID(in.cat.AsymmetricKeys, func(x *asymmetricKey) int { return x.ID })
	in.cat.AsymmetricKeys = append(in.cat.AsymmetricKeys, &asymmetricKey{ID: id, Name: k.Name, Provider: k.Provider,
		ProviderKeyName: k.ProviderKeyName, Thumbprint: tp, Key: hex.EncodeToString(k.PrivateKey)})
	return in.saveCatalog()
}

// DropAsymmetricKey is DROP ASYMMETRIC KEY name in master.
func (in *Instance) DropAsymmetricKey(name string) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if removeNamed(&in.cat.AsymmetricKeys, func(k *asymmetricKey) string { return k.Name }, name) {
		return in.saveCatalog()
	}
	return fmt.Errorf("sqlsim: error 15151: cannot drop the asymmetric key '%s', because it does not exist or you do not have permission", name)
}

// asymmetricKeysView is [db].sys.asymmetric_keys: master's asymmetric keys,
// to a login that sees them (as certificates, seesCertificates)
// (https://learn.microsoft.com/en-us/sql/relational-databases/system-catalog-views/sys-asymmetric-keys-transact-sql).
// provider_type is "CRYPTOGRAPHIC PROVIDER" for an EKM key and NULL for
// another, cryptographic_provider_guid likewise; pvt_key_encryption_type of
// an EKM key is CP (ENCRYPTED_BY_CRYPTOGRAPHIC_PROVIDER in the engine's
// value names), of another MK (encrypted by the master key).
func (x *execCtx) asymmetricKeysView(d *database, qual string) *relation {
	rel := &relation{cols: []relCol{col(qual, "name", tds.TypeNVarChar, 128), col(qual, "principal_id", tds.TypeInt, 0),
		col(qual, "asymmetric_key_id", tds.TypeInt, 0), col(qual, "pvt_key_encryption_type", tds.TypeChar, 2),
		col(qual, "pvt_key_encryption_type_desc", tds.TypeNVarChar, 60), col(qual, "thumbprint", tds.TypeVarBinary, 32),
		col(qual, "algorithm", tds.TypeChar, 2), col(qual, "algorithm_desc", tds.TypeNVarChar, 60), col(qual, "key_length", tds.TypeInt, 0),
		col(qual, "provider_type", tds.TypeNVarChar, 120), col(qual, "cryptographic_provider_guid", tds.TypeUniqueIdentifier, 0)}}
	if !strings.EqualFold(d.Name, "master") || !x.in.seesCertificates(x.sessionLogin()) {
		return rel
	}
	x.in.mu.Lock()
	defer x.in.mu.Unlock()
	for _, k := range x.in.cat.AsymmetricKeys {
		tp, _ := hex.DecodeString(k.Thumbprint)
		enc, encDesc := "MK", "ENCRYPTED_BY_MASTER_KEY"
		var provType, provGUID any
		if k.Provider != "" {
			enc, encDesc, provType = "CP", "ENCRYPTED_BY_CRYPTOGRAPHIC_PROVIDER", "CRYPTOGRAPHIC PROVIDER"
			sum := sha1.Sum([]byte("sqlsim cryptographic provider " + strings.ToLower(k.Provider)))
			var g [16]byte
			copy(g[:], sum[:])
			provGUID = g
		}
		rel.rows = append(rel.rows, []any{k.Name, int64(1), int64(k.ID), enc, encDesc, tp, "3R", "RSA_2048", int64(2048), provType, provGUID})
	}
	return rel
}

// errNoAsymmetricKey is 33111 for a set encrypted by an asymmetric key this
// instance does not hold: "Msg 33111, Level 16, State 4 ... Cannot find
// server asymmetric key with thumbprint '0x2C5677D76F76D77F80'." ("Error
// 33111 when restoring backups from older versions of SQL Server Connector
// for Microsoft Azure Key Vault", KB4470999; the message is 33111's
// "Cannot find server %S_MSG with thumbprint '%.*ls'.").
func errNoAsymmetricKey(thumbprint string) *tds.Error {
	b, _ := hex.DecodeString(thumbprint)
	e := sqlErr(33111, 16, "Cannot find server asymmetric key with thumbprint '%s'.", thumbprintText(b))
	e.State = 4
	return e
}

// asymEncryptor is BACKUP's SERVER ASYMMETRIC KEY: its thumbprint and the
// secret that seals the set's key. A key not of an EKM provider is refused
// as not emulated: SQL Server's error for it is not documented.
func (x *execCtx) asymEncryptor(e *encryptionSpec) (thumbprint string, seal []byte, err *tds.Error) {
	x.in.mu.Lock()
	k := x.in.asymKeyLocked(e.encryptor, "")
	if k != nil {
		thumbprint, seal = k.Thumbprint, k.sealKey()
	}
	x.in.mu.Unlock()
	switch {
	case k == nil:
		return "", nil, errNoEncryptor(e)
	case k.Provider == "":
		return "", nil, errNotSupported("BACKUP WITH ENCRYPTION by asymmetric key '" + e.encryptor +
			"', which is not of an EKM provider (only asymmetric keys residing in the EKM provider are supported)")
	}
	return thumbprint, seal, nil
}

// asymDecryptor is the secret that unseals a set encrypted by the
// asymmetric key of thumbprint, or 33111.
func (in *Instance) asymDecryptor(thumbprint string) ([]byte, *tds.Error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if k := in.asymKeyLocked("", thumbprint); k != nil {
		return k.sealKey(), nil
	}
	return nil, errNoAsymmetricKey(thumbprint)
}
