package activities

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/plan"
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
	if !src.TDE {
		return nil, nil
	}
	if src.TDEThumbprint == "" {
		return nil, nil // readEncryption warned
	}
	certs, err := sqlDB.ServerCertificates(ctx)
	if err != nil {
		return notAsked("certificates", err), nil
	}
	switch {
	case certs.Find(src.TDEThumbprint) != nil:
		return nil, nil
	case !certs.All:
		return []string{fmt.Sprintf("verification instance %s: its login does not see every certificate (it needs VIEW ANY DEFINITION), "+
			"so whether it holds %s (%s), which encrypts %s, is checked when it restores", name, certName(src.TDECertificate),
			src.TDEThumbprint, db.ID())}, nil
	}
	return nil, nonRetryable(ErrInvalidConfig, missingCertificate(db, name, src.TDEThumbprint, src.TDECertificate))
}

func certName(name string) string {
	if name == "" {
		return "the certificate"
	}
	return "certificate " + name
}

// missingCertificate is the error of a verification instance without the
// certificate of db's encryption key.
func missingCertificate(db *config.Database, verify, thumbprint, name string) error {
	return fmt.Errorf("database %s is encrypted (TDE) with %s (thumbprint %s) of %s, which verification instance %s does not hold in master: "+
		"every RESTORE of its backups there fails with error 33111; %s", db.ID(), certName(name), thumbprint, db.Instance, verify,
		plan.TDECertificateFix(db.Instance, verify, name))
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
		return nonRetryable(ErrInvalidConfig, fmt.Errorf("%w (SQL Server: %w)", missingCertificate(db, verify, tp, a.sourceCertificate(ctx, db, tp)), err))
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
