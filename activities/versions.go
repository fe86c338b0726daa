package activities

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/plan"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// Whether a verification instance can read a database's backups: the SQL
// Server versions of both, and the certificate of a TDE database. A
// verification instance that cannot is an environment problem, never
// evidence about a set: the cycle fails with InvalidConfig naming the fix,
// before the BACKUP when the plan sees it, and a set already copied stays
// copied for `--resume` once the instance is fixed.

// verifyAskTimeout bounds the questions the plan asks one verification
// instance.
const verifyAskTimeout = time.Minute

// readEncryption adds to src what the source says about db's encryption:
// TDE, the certificate's thumbprint and name. Each part that cannot be read
// is a warning.
func readEncryption(ctx context.Context, sqlDB *mssql.DB, db *config.Database, src *SourceFacts) []string {
	enc, err := sqlDB.DatabaseEncryption(ctx, db.Name)
	if err != nil {
		return []string{fmt.Sprintf("encryption of %s not read (%v): whether the verification instances hold its TDE certificate is "+
			"learnt when they restore it", db.ID(), err)}
	}
	if src.TDE = enc.Encrypted; !src.TDE {
		return nil
	}
	if enc.KeyErr != nil {
		return []string{fmt.Sprintf("%s is encrypted (TDE) but its certificate's thumbprint is not readable (%v): grant %s to the source's "+
			"login so that the plan checks the verification instances hold it; meanwhile a RESTORE without it fails with error 33111",
			db.ID(), enc.KeyErr, viewEncryptionKeys(src.ProductVersion))}
	}
	src.TDEThumbprint = enc.Thumbprint
	certs, err := sqlDB.ServerCertificates(ctx)
	if err != nil {
		return nil
	}
	c := certs.Find(enc.Thumbprint)
	if c == nil {
		return nil
	}
	src.TDECertificate = c.Name
	if c.PrivateKeyBackup.IsZero() {
		return []string{fmt.Sprintf("certificate %s (%s) of %s, which encrypts %s, was never backed up with its private key: "+
			"without that backup no other instance, nor %s rebuilt, can restore the database: %s", c.Name, c.Thumbprint, db.Instance,
			db.ID(), db.Instance, plan.TDECertificateFix(db.Instance, "the verification instances", c.Name))}
	}
	return nil
}

// viewEncryptionKeys is the permission sys.dm_database_encryption_keys
// needs on a server of that version.
func viewEncryptionKeys(productVersion string) string {
	if v, _ := plan.ParseVersion(productVersion); v.Major >= 16 {
		return "VIEW SERVER SECURITY STATE"
	}
	return "VIEW SERVER STATE"
}

// checkVerifiers asks each verification instance the cycle may restore on
// its version and certificates, and refuses the cycle (InvalidConfig)
// before any BACKUP when one cannot read db's backups. An instance that
// cannot be asked is a warning: its RESTORE meets the problem, if any.
func (a *Activities) checkVerifiers(ctx context.Context, db *config.Database, src SourceFacts, mode BackupMode, instances []string) ([]string, error) {
	srcVersion, _ := plan.ParseVersion(src.ProductVersion)
	var warnings []string
	for _, name := range instances {
		w, err := a.checkVerifier(ctx, db, src, srcVersion, mode, name)
		if err != nil {
			return warnings, err
		}
		warnings = append(warnings, w...)
	}
	return warnings, nil
}

func (a *Activities) checkVerifier(ctx context.Context, db *config.Database, src SourceFacts, srcVersion plan.Version, mode BackupMode,
	name string) ([]string, error) {
	notAsked := func(what string, err error) []string {
		return []string{fmt.Sprintf("verification instance %s not asked for its %s (%v): checked when it restores", name, what, err)}
	}
	inst, err := a.Cycle.instance(name)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, verifyAskTimeout)
	defer cancel()
	sqlDB, err := a.Cycle.openSQL(ctx, inst, "master")
	if err != nil {
		return notAsked("version", err), nil
	}
	defer sqlDB.Close()
	pv, err := sqlDB.ProductVersion(ctx)
	if err != nil {
		return notAsked("version", err), nil
	}
	v, _ := plan.ParseVersion(pv)
	if why, fix := plan.Incompatible(srcVersion, v, src.TDE && mode.Compression, name); why != "" {
		return nil, nonRetryable(ErrInvalidConfig, fmt.Errorf("database %s: verification instance %s (%s) cannot restore backups of %s (%s): %s; %s",
			db.ID(), name, v, db.Instance, srcVersion, why, fix))
	}
	if !src.TDE && src.EncryptorThumbprint == "" {
		return nil, nil
	}
	var warnings []string
	encryptor := src.EncryptorThumbprint
	if db.Encryption.ServerAsymmetricKey != "" && encryptor != "" {
		w, err := verifierHoldsKey(ctx, sqlDB, db, name, encryptor)
		if warnings = w; err != nil || !src.TDE {
			return warnings, err
		}
		encryptor = ""
	}
	certs, err := sqlDB.ServerCertificates(ctx)
	if err != nil {
		return append(warnings, notAsked("certificates", err)...), nil
	}
	for _, need := range []struct {
		thumbprint, name string
		backup           bool
	}{{src.TDEThumbprint, src.TDECertificate, false}, {encryptor, db.Encryption.ServerCertificate, true}} {
		switch {
		case need.thumbprint == "" || certs.Find(need.thumbprint) != nil: // none (readEncryption warned if unread), or held
		case !certs.All:
			warnings = append(warnings, fmt.Sprintf("verification instance %s: its login does not see every certificate (it needs VIEW ANY DEFINITION), "+
				"so whether it holds %s (%s), which encrypts %s, is checked when it restores", name, certName(need.name),
				need.thumbprint, db.ID()))
		default:
			return warnings, nonRetryable(ErrInvalidConfig, missingCertificate(db, name, need.thumbprint, need.name, need.backup))
		}
	}
	return warnings, nil
}

func certName(name string) string {
	if name == "" {
		return "the certificate"
	}
	return "certificate " + name
}

// missingCertificate is the error of a verification instance without the
// certificate of db's encryption key (TDE), or of its backups' encryption
// (backup: BACKUP ... WITH ENCRYPTION).
func missingCertificate(db *config.Database, verify, thumbprint, name string, backup bool) error {
	how := "is encrypted (TDE)"
	if backup {
		how = "is backed up WITH ENCRYPTION"
	}
	return fmt.Errorf("database %s %s with %s (thumbprint %s) of %s, which verification instance %s does not hold in master: "+
		"every RESTORE of its backups there fails with error 33111; %s", db.ID(), how, certName(name), thumbprint, db.Instance, verify,
		plan.TDECertificateFix(db.Instance, verify, name))
}

// encryptionSupported reports whether the source's edition, when read,
// creates encrypted backups.
func encryptionSupported(src SourceFacts) bool {
	ok, known := plan.BackupEncryptionSupported(src.EngineEdition, src.Edition)
	return ok || !known
}

// readEncryptor reads the certificate db's backups are encrypted with
// (encryption: server_certificate) from master of the source: its
// thumbprint into src, or src.EncryptorProblem when the BACKUP cannot
// succeed with it. SQL Server's BACKUP needs it in master, visible to the
// login ("VIEW DEFINITION permission on the certificate", "Backup
// encryption"; else 15151) and not expired ("Backup with Encryption using
// certificates also checks the expiration date and won't allow a new
// backup to be created with an expired certificate", CREATE CERTIFICATE
// (Transact-SQL); 3096); and an edition that encrypts backups. A
// certificate close to its expiry, or whose private key was never
// exported, is a warning. An asymmetric key: readKeyEncryptor.
func (a *Activities) readEncryptor(ctx context.Context, sqlDB *mssql.DB, db *config.Database, src *SourceFacts) []string {
	e := db.Encryption
	if !e.Enabled() {
		return nil
	}
	if !encryptionSupported(*src) {
		src.EncryptorProblem = fmt.Sprintf("database %s: encryption: %s runs %s, which cannot create encrypted backups (Express and Web "+
			"cannot; they restore them): remove encryption: for it, or move the database to a Standard or Enterprise instance",
			db.ID(), db.Instance, src.Edition)
		return nil
	}
	if e.ServerAsymmetricKey != "" {
		return readKeyEncryptor(ctx, sqlDB, db, src)
	}
	certs, err := sqlDB.ServerCertificates(ctx)
	if err != nil {
		return []string{fmt.Sprintf("certificates of %s not read (%v): whether %s's encryption certificate %s is there is learnt by the BACKUP",
			db.Instance, err, db.ID(), e.ServerCertificate)}
	}
	c := certs.FindName(e.ServerCertificate)
	now := a.Cycle.Clock().UTC()
	switch {
	case c == nil:
		src.EncryptorProblem = fmt.Sprintf("database %s: encryption.server_certificate %s is not in master of %s, or its login may not see it: "+
			"BACKUP WITH ENCRYPTION would fail with error 15151; create the certificate there (CREATE CERTIFICATE [%s] WITH SUBJECT = N'backup encryption', "+
			"after CREATE MASTER KEY), grant the login VIEW DEFINITION ON CERTIFICATE::[%s], or fix encryption.server_certificate",
			db.ID(), e.ServerCertificate, db.Instance, e.ServerCertificate, e.ServerCertificate)
		return nil
	case !c.Expiry.IsZero() && !now.Before(c.Expiry):
		src.EncryptorProblem = fmt.Sprintf("database %s: certificate %s (%s) of %s expired at %s UTC: BACKUP WITH ENCRYPTION refuses it (error 3096); "+
			"create a new certificate, back it up with its private key, install it on the verification and drill instances and name it in "+
			"encryption.server_certificate (keep the old one there: the sets it encrypted still restore with it)",
			db.ID(), c.Name, c.Thumbprint, db.Instance, c.Expiry.Format(time.DateTime))
		return nil
	}
	src.EncryptorThumbprint = c.Thumbprint
	var warnings []string
	if !c.Expiry.IsZero() && c.Expiry.Sub(now) < plan.CertificateExpiryWarning {
		warnings = append(warnings, fmt.Sprintf("certificate %s (%s) of %s, which encrypts the backups of %s, expires at %s UTC: from then on "+
			"its BACKUPs fail (error 3096); create its successor now and install it on the verification and drill instances",
			c.Name, c.Thumbprint, db.Instance, db.ID(), c.Expiry.Format(time.DateTime)))
	}
	if c.PrivateKeyBackup.IsZero() && !e.PrivateKeyBackedUp {
		warnings = append(warnings, fmt.Sprintf("certificate %s (%s) of %s, which encrypts the backups of %s, was never backed up with its private key: "+
			"if %s is lost, no backup of the database can be restored anywhere: %s", c.Name, c.Thumbprint, db.Instance, db.ID(), db.Instance,
			plan.TDECertificateFix(db.Instance, "the verification instances", c.Name)))
	}
	return warnings
}

// verifyInstances are the verification instances of the plan's copy
// targets, each once.
func verifyInstances(d *CycleDeps, p Plan) []string {
	var out []string
	for _, target := range p.Remotes {
		if srv, err := d.server(target); err == nil && srv.VerifyInstance != "" && !slices.Contains(out, srv.VerifyInstance) {
			out = append(out, srv.VerifyInstance)
		}
	}
	slices.Sort(out)
	return out
}

// unreadable is the error of a RESTORE (FILELISTONLY or DATABASE) the
// verification instance failed because it cannot read set m: InvalidConfig
// naming why and the fix, never evidence about the set. nil when err is
// something else (sqlError classifies it), a 3241 included when the
// versions allow the restore: that one is damage. A version that cannot be
// read (the connection went) is returned as it is: retryable.
func (a *Activities) unreadable(ctx context.Context, verifyDB *mssql.DB, db *config.Database, verify string, m *catalog.Manifest, err error) error {
	if ctx.Err() != nil || err == nil {
		return nil
	}
	if errors.Is(err, mssql.ErrCertificateMissing) {
		tp := mssql.MissingThumbprint(err)
		backup := m.Header != nil && m.Header.Encryption != nil && strings.EqualFold(m.Header.Encryption.Thumbprint, tp)
		if backup && m.Header.Encryption.EncryptorType == tsql.EncryptorAsymmetricKey {
			return nonRetryable(ErrInvalidConfig, fmt.Errorf("%w (SQL Server: %w)", missingKey(db, verify, tp), err))
		}
		name := a.sourceCertificate(ctx, db, tp)
		if name == "" && backup {
			name = db.Encryption.ServerCertificate
		}
		return nonRetryable(ErrInvalidConfig, fmt.Errorf("%w (SQL Server: %w)", missingCertificate(db, verify, tp, name, backup), err))
	}
	written := ""
	if m.Header != nil {
		written = m.Header.SoftwareVersion
	}
	if !versionMatters(err) {
		return nil
	}
	src, dst, verr := a.versions(ctx, verifyDB, db, written)
	if verr != nil {
		return verr
	}
	tdeCompressed := m.Options.Compression && (m.Header != nil && m.Header.TDEThumbprint != "" || errors.Is(err, mssql.ErrUnreadableFormat))
	return versionVerdict(err, src, dst, tdeCompressed, db, verify, m.Sequence)
}

// VersionRefusal says why instance target (targetDB) failed a RESTORE of
// a backup of db written by SQL Server build written ("" when its record
// has none: the source instance's build now) with err, when the versions
// decide it: a backup of a newer version or a format the target's build
// does not read (3169, 3241, a severity 20+ error on an open connection),
// and the fix. "" when err is something else, a 3241 between versions
// that read each other included: that one is damage. An error reading a
// version is returned as it is (retryable).
// (A function, not a method: every exported method of Activities is an
// activity.)
func VersionRefusal(a *Activities, ctx context.Context, targetDB *mssql.DB, db *config.Database, target, written string, tdeCompressed bool,
	err error) (why, fix string, verr error) {
	if ctx.Err() != nil || err == nil || !versionMatters(err) {
		return "", "", nil
	}
	src, dst, verr := a.versions(ctx, targetDB, db, written)
	if verr != nil {
		return "", "", verr
	}
	why, fix = versionWhy(err, src, dst, tdeCompressed, target)
	return why, fix, nil
}

// versions are the build that wrote a backup of db (backupVersion) and
// the target's (targetDB).
func (a *Activities) versions(ctx context.Context, targetDB *mssql.DB, db *config.Database, written string) (src, dst plan.Version, err error) {
	pv, err := targetDB.ProductVersion(ctx)
	if err != nil {
		return src, dst, sqlError(err)
	}
	dst, _ = plan.ParseVersion(pv)
	src, err = a.backupVersion(ctx, db, written)
	return src, dst, err
}

// versionMatters reports a RESTORE failure that the versions of the set and
// of the verification instance decide: 3241 (damage, or a version it cannot
// read), 3169 and a severity 20+ error on an open connection.
func versionMatters(err error) bool {
	return errors.Is(err, mssql.ErrCorruptBackup) && mssql.HasNumber(err, 3241) ||
		errors.Is(err, mssql.ErrNewerVersion) || errors.Is(err, mssql.ErrUnreadableFormat)
}

// versionWhy is VersionRefusal's decision once the versions are known: a
// backup made by src, the instance target of version dst. "" for a 3241
// between versions that read each other: that is damage.
func versionWhy(err error, src, dst plan.Version, tdeCompressed bool, target string) (why, fix string) {
	why, fix = plan.Incompatible(src, dst, tdeCompressed, target)
	switch {
	case why != "":
	case errors.Is(err, mssql.ErrCorruptBackup):
		return "", "" // versions that read each other: the media are damaged
	case errors.Is(err, mssql.ErrNewerVersion):
		why, fix = fmt.Sprintf("SQL Server answers that the versions are incompatible (3169): the backup was made by %s, the instance is %s",
			src.Product(), dst.Product()), fmt.Sprintf("upgrade %s to the source's version or newer", target)
	default:
		why, fix = fmt.Sprintf("an error of severity 20 or more inside the RESTORE, on a connection that stayed open: %s cannot read "+
			"this backup's format (it was made by %s)", dst.Product(), src.Product()),
			fmt.Sprintf("patch %s to the source's build or later", target)
	}
	return why, fix
}

// versionVerdict is unreadable's decision once the versions are known:
// the set of seq made by src, the verification instance verify of version
// dst. nil for a 3241 between versions that read each other: that is
// damage.
func versionVerdict(err error, src, dst plan.Version, tdeCompressed bool, db *config.Database, verify string, seq int64) error {
	why, fix := versionWhy(err, src, dst, tdeCompressed, verify)
	if why == "" {
		return nil
	}
	return nonRetryable(ErrInvalidConfig, fmt.Errorf("set %d of %s: verification instance %s cannot read it, which says nothing about the set: %s; %s "+
		"(the set stays as it is: `starter run --database %s --resume %d` verifies it once fixed): %w",
		seq, db.ID(), verify, why, fix, db.Name, seq, err))
}

// backupVersion is the build that wrote a backup: written (its manifest's
// or chain record's), else (backups of earlier builds) the source
// instance's now.
func (a *Activities) backupVersion(ctx context.Context, db *config.Database, written string) (plan.Version, error) {
	if written != "" {
		return plan.ParseVersion(written)
	}
	inst, err := a.Cycle.sourceInstance(db)
	if err != nil {
		return plan.Version{}, err
	}
	sqlDB, err := a.Cycle.openSQL(ctx, inst, "master")
	if err != nil {
		return plan.Version{}, err
	}
	defer sqlDB.Close()
	pv, err := sqlDB.ProductVersion(ctx)
	if err != nil {
		return plan.Version{}, sqlError(err)
	}
	return plan.ParseVersion(pv)
}

// sourceCertificate is the name of the certificate of thumbprint on db's
// source instance, "" when it cannot tell.
func (a *Activities) sourceCertificate(ctx context.Context, db *config.Database, thumbprint string) string {
	inst, err := a.Cycle.sourceInstance(db)
	if err != nil || thumbprint == "" {
		return ""
	}
	sqlDB, err := a.Cycle.openSQL(ctx, inst, "master")
	if err != nil {
		return ""
	}
	defer sqlDB.Close()
	certs, err := sqlDB.ServerCertificates(ctx)
	if c := certs.Find(thumbprint); err == nil && c != nil {
		return c.Name
	}
	return ""
}
