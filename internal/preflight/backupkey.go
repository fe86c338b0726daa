package preflight

import (
	"fmt"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/plan"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// Backup encryption by an asymmetric key (encryption:
// server_asymmetric_key). SQL Server encrypts backups only with keys of an
// Extensible Key Management provider: "If you're using asymmetric key to
// encrypt the backup data, only asymmetric keys residing in the EKM
// provider are supported" ("Backup encryption", Limitations,
// https://learn.microsoft.com/sql/relational-databases/backup-restore/backup-encryption).
// The key must be in master of the source and visible to the login (else
// 15151), and every instance that restores the sets must hold the same
// thumbprint, which it gets by opening the same provider key (else 33111,
// "Cannot find server asymmetric key with thumbprint"). Its private key
// stays in the provider: there is no export to check, and no expiry.

// keysSeen is master's asymmetric keys as one instance shows them.
type keysSeen struct {
	k   mssql.AsymmetricKeys
	err error
}

// ekmOnly is what SQL Server's documentation says of the keys BACKUP
// takes, quoted in the findings.
const ekmOnly = `"only asymmetric keys residing in the EKM provider are supported" ("Backup encryption", Limitations)`

// keyChecks are the checks of db encrypted by an asymmetric key: on the
// source, and on each instance that restores its sets.
func keyChecks(cfg *config.Config, base Check, db *config.Database, e *estate) []Check {
	seen, ok := e.keyEncryptors[db]
	if !ok {
		return nil // the database could not be asked; its other rows say why
	}
	name := db.Encryption.ServerAsymmetricKey
	c := base
	c.Name, c.For = "backup encryption key", "encryption: server_asymmetric_key "+name
	key := seen.k.FindName(name)
	open, _ := tsql.OpenProviderKey(name)
	switch {
	case seen.err != nil:
		c.Status, c.Detail = Warn, "could not read the asymmetric keys of "+db.Instance+": "+seen.err.Error()
		return []Check{c}
	case key == nil:
		c.Status = Missing
		c.Detail = fmt.Sprintf("asymmetric key %s is not in master of %s, or %s may not see it: BACKUP WITH ENCRYPTION fails with error 15151",
			name, db.Instance, e.logins[db.Instance])
		c.Fix = fmt.Sprintf("%s (the key of your EKM provider, registered with CREATE CRYPTOGRAPHIC PROVIDER), or GRANT VIEW DEFINITION ON "+
			"ASYMMETRIC KEY::[%s] TO [%s]; or fix encryption.server_asymmetric_key", open, name, e.logins[db.Instance])
		return []Check{c}
	case !key.EKM:
		c.Status = Missing
		c.Detail = fmt.Sprintf("asymmetric key %s (%s) of %s is not of an EKM provider: SQL Server encrypts backups with none other, %s",
			key.Name, key.Thumbprint, db.Instance, ekmOnly)
		c.Fix = "create the key in an EKM provider (" + open + " with CREATION_DISPOSITION = CREATE_NEW) and name it in " +
			"encryption.server_asymmetric_key, or use encryption.server_certificate"
		return []Check{c}
	}
	c.Status, c.Detail = OK, fmt.Sprintf("asymmetric key %s (%s) of an EKM provider on %s; its private key stays in the provider",
		key.Name, key.Thumbprint, db.Instance)
	cs := []Check{c}
	for _, in := range restorersOf(cfg, db) {
		if keys, ok := e.keys[in]; ok {
			cs = append(cs, keyOnCheck(base, db, in, key, keys, e))
		}
	}
	return cs
}

// keyOnCheck: instance in holds the asymmetric key of the same thumbprint
// in master.
func keyOnCheck(base Check, db *config.Database, in string, key *mssql.AsymmetricKey, seen keysSeen, e *estate) Check {
	h := holder{kind: "asymmetric key", name: key.Name, thumbprint: key.Thumbprint, err: seen.err, held: seen.k.Find(key.Thumbprint) != nil,
		all: seen.k.All, fix: plan.ProviderKeyFix(in, key.Name)}
	return h.check(base, db, in, e)
}
