package activities

import (
	"context"
	"fmt"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/plan"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// Backups encrypted by an asymmetric key (encryption:
// server_asymmetric_key): SQL Server takes only a key of an EKM provider
// ("only asymmetric keys residing in the EKM provider are supported",
// "Backup encryption", Limitations), in master of the source and visible
// to the login (else 15151); every instance that restores the sets needs
// the same thumbprint (else 33111, "Cannot find server asymmetric key with
// thumbprint").

// readKeyEncryptor reads db's asymmetric key from master of the source: its
// thumbprint into src, or src.EncryptorProblem when the BACKUP cannot
// succeed with it.
func readKeyEncryptor(ctx context.Context, sqlDB *mssql.DB, db *config.Database, src *SourceFacts) []string {
	name := db.Encryption.ServerAsymmetricKey
	keys, err := sqlDB.ServerAsymmetricKeys(ctx)
	if err != nil {
		return []string{fmt.Sprintf("asymmetric keys of %s not read (%v): whether %s's encryption key %s is there is learnt by the BACKUP",
			db.Instance, err, db.ID(), name)}
	}
	open, _ := tsql.OpenProviderKey(name)
	switch k := keys.FindName(name); {
	case k == nil:
		src.EncryptorProblem = fmt.Sprintf("database %s: encryption.server_asymmetric_key %s is not in master of %s, or its login may not see it: "+
			"BACKUP WITH ENCRYPTION would fail with error 15151; open the EKM provider's key there (%s), grant the login VIEW DEFINITION "+
			"ON ASYMMETRIC KEY::[%s], or fix encryption.server_asymmetric_key", db.ID(), name, db.Instance, open, name)
	case !k.EKM:
		src.EncryptorProblem = fmt.Sprintf("database %s: asymmetric key %s (%s) of %s is not of an EKM provider, and SQL Server encrypts backups "+
			"only with asymmetric keys residing in an EKM provider: create the key in one, or use encryption.server_certificate",
			db.ID(), k.Name, k.Thumbprint, db.Instance)
	default:
		src.EncryptorThumbprint = k.Thumbprint
	}
	return nil
}

// verifierHoldsKey refuses (InvalidConfig) a verification instance whose
// master lacks the asymmetric key of thumbprint; one whose login does not
// see every key is a warning.
func verifierHoldsKey(ctx context.Context, sqlDB *mssql.DB, db *config.Database, verify, thumbprint string) ([]string, error) {
	keys, err := sqlDB.ServerAsymmetricKeys(ctx)
	switch {
	case err != nil:
		return []string{fmt.Sprintf("verification instance %s not asked for its asymmetric keys (%v): checked when it restores", verify, err)}, nil
	case keys.Find(thumbprint) != nil:
		return nil, nil
	case !keys.All:
		return []string{fmt.Sprintf("verification instance %s: its login does not see every asymmetric key (it needs VIEW ANY DEFINITION), "+
			"so whether it holds %s (%s), which encrypts the backups of %s, is checked when it restores", verify,
			db.Encryption.ServerAsymmetricKey, thumbprint, db.ID())}, nil
	}
	return nil, nonRetryable(ErrInvalidConfig, missingKey(db, verify, thumbprint))
}

// missingKey is the error of a verification instance without the
// asymmetric key db's backups are encrypted with.
func missingKey(db *config.Database, verify, thumbprint string) error {
	return fmt.Errorf("database %s is backed up WITH ENCRYPTION with asymmetric key %s (thumbprint %s) of %s, which verification instance %s "+
		"does not hold in master: every RESTORE of its backups there fails with error 33111; %s", db.ID(), db.Encryption.ServerAsymmetricKey,
		thumbprint, db.Instance, verify, plan.ProviderKeyFix(verify, db.Encryption.ServerAsymmetricKey))
}
