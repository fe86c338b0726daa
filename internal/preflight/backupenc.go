package preflight

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/plan"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// Backup encryption (encryption:): the certificate BACKUP ... WITH
// ENCRYPTION names must be in master of the source, visible to the login
// ("VIEW DEFINITION permission on the certificate", "Backup encryption",
// https://learn.microsoft.com/sql/relational-databases/backup-restore/backup-encryption;
// else 15151) and not expired ("won't allow a new backup to be created with
// an expired certificate", CREATE CERTIFICATE (Transact-SQL); 3096); every
// instance that restores the sets needs the same thumbprint in master
// (else 33111). Its private key never exported is refused unless
// acknowledged: "Without the certificate or asymmetric key, you can't
// restore the backup, rendering the backup file unusable" (same page), so
// if the source is lost with it, every encrypted set is lost too. A
// certificate created from files (CREATE CERTIFICATE ... FROM FILE) has
// pvt_key_last_backup_date NULL although its files exist elsewhere:
// encryption.private_key_backed_up: true says so.

// encryptorSeen is a database's backup encryption certificate as its
// source shows it.
type encryptorSeen struct {
	cert *mssql.ServerCertificate // nil: not there, or not visible
	all  bool                     // the login sees every certificate
	err  error
}

// noteEncryptor records d's encryption certificate on its source.
func (e *estate) noteEncryptor(ctx context.Context, db *mssql.DB, d *config.Database) {
	if d.Encryption.Enabled() && d.Encryption.ServerAsymmetricKey != "" {
		k, err := db.ServerAsymmetricKeys(ctx)
		e.keyEncryptors[d] = keysSeen{k, err}
	}
	if !d.Encryption.Enabled() || d.Encryption.ServerCertificate == "" {
		return
	}
	c, err := e.sourceCertificates(ctx, db, d)
	e.encryptors[d] = encryptorSeen{cert: c.FindName(d.Encryption.ServerCertificate), all: c.All, err: err}
}

// encryptionChecks are db's backup encryption checks: on the source, its
// private key, and on each instance that restores its sets.
func encryptionChecks(cfg *config.Config, base Check, db *config.Database, e *estate) []Check {
	enc := db.Encryption
	if !enc.Enabled() {
		return nil
	}
	if sf, ok := e.editions[db.Instance]; ok {
		if supported, known := plan.BackupEncryptionSupported(sf.EngineEdition, sf.Edition); known && !supported {
			c := base
			c.Name, c.For, c.Status = "backup encryption edition", "encryption:", Missing
			c.Detail = fmt.Sprintf("%s runs %s, which cannot create encrypted backups (Express and Web restore them only)", db.Instance, sf.Edition)
			c.Fix = "remove encryption: for " + db.Name + ", or move it to a Standard or Enterprise instance"
			return []Check{c}
		}
	}
	if enc.ServerAsymmetricKey != "" {
		return keyChecks(cfg, base, db, e)
	}
	seen, ok := e.encryptors[db]
	if !ok {
		return nil // the database could not be asked; its other rows say why
	}
	c := base
	c.Name, c.For = "backup encryption certificate", "encryption: server_certificate "+enc.ServerCertificate
	now := time.Now().UTC()
	switch {
	case seen.err != nil:
		c.Status, c.Detail = Warn, "could not read the certificates of "+db.Instance+": "+seen.err.Error()
		return []Check{c}
	case seen.cert == nil:
		c.Status = Missing
		c.Detail = fmt.Sprintf("certificate %s is not in master of %s, or %s may not see it: BACKUP WITH ENCRYPTION fails with error 15151",
			enc.ServerCertificate, db.Instance, e.logins[db.Instance])
		c.Fix = fmt.Sprintf("USE [master]; CREATE CERTIFICATE [%s] WITH SUBJECT = N'backup encryption'; (after CREATE MASTER KEY ENCRYPTION BY PASSWORD = N'<password>'), "+
			"or GRANT VIEW DEFINITION ON CERTIFICATE::[%s] TO [%s]; or fix encryption.server_certificate", enc.ServerCertificate, enc.ServerCertificate,
			e.logins[db.Instance])
		return []Check{c}
	case !seen.cert.Expiry.IsZero() && !now.Before(seen.cert.Expiry):
		c.Status = Missing
		c.Detail = fmt.Sprintf("certificate %s (%s) expired at %s UTC: SQL Server refuses BACKUP WITH ENCRYPTION with it (error 3096)",
			seen.cert.Name, seen.cert.Thumbprint, seen.cert.Expiry.Format(time.DateTime))
		c.Fix = "create a new certificate, back it up with its private key, install it on the verification and drill instances and name it in " +
			"encryption.server_certificate; keep the old one there, the sets it encrypted still restore with it"
	case !seen.cert.Expiry.IsZero() && seen.cert.Expiry.Sub(now) < plan.CertificateExpiryWarning:
		c.Status = Warn
		c.Detail = fmt.Sprintf("certificate %s (%s) expires at %s UTC: from then on every BACKUP WITH ENCRYPTION with it fails (error 3096)",
			seen.cert.Name, seen.cert.Thumbprint, seen.cert.Expiry.Format(time.DateTime))
		c.Fix = "create its successor now, back it up with its private key, install it on the verification and drill instances and name it in " +
			"encryption.server_certificate"
	default:
		c.Status, c.Detail = OK, fmt.Sprintf("certificate %s (%s) of %s, expires %s UTC", seen.cert.Name, seen.cert.Thumbprint, db.Instance,
			seen.cert.Expiry.Format(time.DateOnly))
	}
	cs := []Check{c, privateKeyCheck(base, db, seen.cert)}
	for _, in := range restorersOf(cfg, db) {
		if certs, ok := e.certs[in]; ok {
			cs = append(cs, encryptorOnCheck(base, db, in, seen.cert, certs, e))
		}
	}
	return cs
}

// privateKeyCheck: the certificate's private key exported, or its backup
// acknowledged.
func privateKeyCheck(base Check, db *config.Database, cert *mssql.ServerCertificate) Check {
	c := base
	c.Name, c.For = "backup encryption private key", "a restore of the sets anywhere once "+db.Instance+" is lost"
	backup, _ := tsql.BackupCertificate(cert.Name, "<password>")
	switch {
	case !cert.PrivateKeyBackup.IsZero():
		c.Status, c.Detail = OK, fmt.Sprintf("certificate %s: private key last exported %s", cert.Name, cert.PrivateKeyBackup.Format("2006-01-02 15:04"))
	case db.Encryption.PrivateKeyBackedUp:
		c.Status = OK
		c.Detail = fmt.Sprintf("certificate %s: never exported by %s; its files are kept elsewhere (encryption.private_key_backed_up)", cert.Name, db.Instance)
	default:
		c.Status = Missing
		c.Detail = fmt.Sprintf("certificate %s (%s) was never backed up with its private key: if %s is lost, no encrypted set of %s can be "+
			"restored anywhere", cert.Name, cert.Thumbprint, db.Instance, db.Name)
		c.Fix = backup + " and keep the two files and the password away from " + db.Instance + "; or, when the certificate was created " +
			"from files you keep, set encryption.private_key_backed_up: true"
	}
	return c
}

// encryptorOnCheck: instance in holds the certificate of the same
// thumbprint in master.
func encryptorOnCheck(base Check, db *config.Database, in string, cert *mssql.ServerCertificate, seen certsSeen, e *estate) Check {
	h := holder{kind: "certificate", name: cert.Name, thumbprint: cert.Thumbprint, err: seen.err, held: seen.c.Find(cert.Thumbprint) != nil,
		all: seen.c.All, fix: plan.TDECertificateFix(db.Instance, in, cert.Name)}
	return h.check(base, db, in, e)
}

// holder is what an instance that restores the encrypted sets showed of
// their encryptor (a certificate or an asymmetric key) in its master.
type holder struct {
	kind, name, thumbprint string
	err                    error // its encryptors could not be read
	held, all              bool  // it holds the thumbprint; its login sees every encryptor
	fix                    string
}

// check is the row "backup encryption <kind> on <in>".
func (h holder) check(base Check, db *config.Database, in string, e *estate) Check {
	c := base
	c.Name, c.For = "backup encryption "+shortKind(h.kind)+" on "+in, "RESTORE of the encrypted sets on "+in
	switch {
	case h.err != nil:
		c.Status, c.Detail = Warn, "could not read the "+h.kind+"s of "+in+": "+h.err.Error()
	case h.held:
		c.Status, c.Detail = OK, fmt.Sprintf("%s holds %s %s (%s)", in, h.kind, h.name, h.thumbprint)
	case !h.all:
		c.Status = Warn
		c.Detail = fmt.Sprintf("%s does not see every %s of %s, so whether it holds %s (%s) is not known", e.logins[in], h.kind, in,
			h.name, h.thumbprint)
		c.Fix, _ = tsql.GrantServerPermission(tsql.PermViewAnyDefinition, e.logins[in])
	default:
		c.Status = Missing
		c.Detail = fmt.Sprintf("%s is backed up WITH ENCRYPTION with %s %s (%s) of %s, which %s does not hold in master "+
			"(one of the same name with another key does not count): every RESTORE of its sets there fails with error 33111",
			db.Name, h.kind, h.name, h.thumbprint, db.Instance, in)
		c.Fix = h.fix
	}
	return c
}

// shortKind is the kind as the rows name it: certificate, key.
func shortKind(kind string) string {
	if kind == "asymmetric key" {
		return "key"
	}
	return kind
}

// restorersOf are the instances that restore db's sets: its verification
// instances and its drill's.
func restorersOf(cfg *config.Config, db *config.Database) []string {
	out := verifiersOf(cfg, db)
	if in := cfg.DrillInstance(db); db.Drills() && in != "" && !slices.Contains(out, in) {
		out = append(out, in)
	}
	return out
}
