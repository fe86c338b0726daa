package preflight

import (
	"context"
	"fmt"
	"slices"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/plan"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// Checks across instances: can each verification instance read the sets of
// the databases it verifies? SQL Server never restores a backup of a newer
// version, and a TDE database's backup only where master holds its
// certificate (plan.Incompatible; "Move a TDE Protected Database to
// Another SQL Server").

// estate is what the instances said that those checks need.
type estate struct {
	versions map[string]plan.Version       // instance -> its build
	logins   map[string]string             // instance -> the login connected
	majors   map[string]int                // instance -> ProductMajorVersion
	editions map[string]serverFacts        // instance -> its facts (edition)
	certs    map[string]certsSeen          // verification instance -> master's certificates
	tde      map[*config.Database]tdeSeen  // source database -> its encryption
	srcCerts map[string]mssql.Certificates // source instance -> its certificates, read once
	// encryptors are the certificates of the databases with encryption:,
	// as their source shows them (backupenc.go).
	encryptors map[*config.Database]encryptorSeen
	// keys are the asymmetric keys of master of each instance that
	// restores sets (backupkey.go), keyEncryptors the keys of the
	// databases encrypted by one, as their source shows them.
	keys          map[string]keysSeen
	keyEncryptors map[*config.Database]keysSeen
}

type certsSeen struct {
	c   mssql.Certificates
	err error
}

// tdeSeen is a source database's encryption and, when the login sees it,
// its certificate on the source.
type tdeSeen struct {
	enc  mssql.Encryption
	cert *mssql.ServerCertificate
}

func newEstate() *estate {
	return &estate{versions: map[string]plan.Version{}, logins: map[string]string{}, majors: map[string]int{}, editions: map[string]serverFacts{},
		certs: map[string]certsSeen{}, tde: map[*config.Database]tdeSeen{}, srcCerts: map[string]mssql.Certificates{},
		encryptors: map[*config.Database]encryptorSeen{}, keys: map[string]keysSeen{}, keyEncryptors: map[*config.Database]keysSeen{}}
}

// sourceCertificates are master's certificates of d's source, read once.
func (e *estate) sourceCertificates(ctx context.Context, db *mssql.DB, d *config.Database) (mssql.Certificates, error) {
	if c, ok := e.srcCerts[d.Instance]; ok {
		return c, nil
	}
	c, err := db.ServerCertificates(ctx)
	if err == nil {
		e.srcCerts[d.Instance] = c
	}
	return c, err
}

// noteInstance records an instance's build and login; a verification
// instance's certificates and asymmetric keys too.
func (e *estate) noteInstance(ctx context.Context, db *mssql.DB, name string, sf serverFacts, verifies bool) {
	e.versions[name], e.logins[name], e.majors[name], e.editions[name] = sf.Version, sf.Login, sf.Major, sf
	if verifies {
		c, err := db.ServerCertificates(ctx)
		e.certs[name] = certsSeen{c, err}
		k, err := db.ServerAsymmetricKeys(ctx)
		e.keys[name] = keysSeen{k, err}
	}
}

// noteDatabase records a source database's encryption; a database that
// could not be asked is left out (its other rows say why).
func (e *estate) noteDatabase(ctx context.Context, db *mssql.DB, d *config.Database) {
	e.noteEncryptor(ctx, db, d)
	enc, err := db.DatabaseEncryption(ctx, d.Name)
	if err != nil || !enc.Encrypted {
		return
	}
	t := tdeSeen{enc: enc}
	if enc.Thumbprint != "" {
		c, _ := e.sourceCertificates(ctx, db, d)
		t.cert = c.Find(enc.Thumbprint)
	}
	e.tde[d] = t
}

// verifiersOf are the verification instances that restore db's sets: those
// of the copy targets of its backup servers.
func verifiersOf(cfg *config.Config, db *config.Database) []string {
	var out []string
	for _, b := range db.BackupServers {
		if srv, ok := cfg.BackupServer(db.CopyTarget(b)); ok && srv.VerifyInstance != "" && !slices.Contains(out, srv.VerifyInstance) {
			out = append(out, srv.VerifyInstance)
		}
	}
	return out
}

// readabilityChecks are, per database, whether each of its verification
// instances reads its sets, and the TDE warnings of the source.
func readabilityChecks(cfg *config.Config, dbs []*config.Database, e *estate) []Check {
	var cs []Check
	for _, db := range dbs {
		base := Check{Kind: KindDatabase, Instance: db.Instance, Database: db.Name}
		src, srcRead := e.versions[db.Instance]
		tde, encrypted := e.tde[db]
		for _, v := range verifiersOf(cfg, db) {
			dst, ok := e.versions[v]
			if srcRead && ok && src.Known() && dst.Known() {
				cs = append(cs, versionCheck(base, db, v, src, dst, encrypted && db.Compression))
			}
			if encrypted {
				if seen, ok := e.certs[v]; ok {
					cs = append(cs, certificateCheck(base, db, v, tde, seen, e))
				}
			}
		}
		if encrypted {
			cs = append(cs, tdeSourceChecks(base, db, src, tde)...)
		}
		cs = append(cs, encryptionChecks(cfg, base, db, e)...)
	}
	return cs
}

func versionCheck(base Check, db *config.Database, verify string, src, dst plan.Version, tdeCompressed bool) Check {
	c := base
	c.Name, c.For = "restores on "+verify, "verification: RESTORE of the sets on "+verify
	why, fix := plan.Incompatible(src, dst, tdeCompressed, verify)
	if why == "" {
		c.Status, c.Detail = OK, fmt.Sprintf("%s runs %s, the source %s", verify, dst.Product(), src.Product())
		return c
	}
	c.Status = Missing
	c.Detail = fmt.Sprintf("%s runs %s, the source %s runs %s: %s", verify, dst.Product(), db.Instance, src.Product(), why)
	c.Fix = fix
	return c
}

func certificateCheck(base Check, db *config.Database, verify string, tde tdeSeen, seen certsSeen, e *estate) Check {
	c := base
	c.Name, c.For = "TDE certificate on "+verify, "verification: "+verify+" restores the sets of a TDE database"
	name := ""
	if tde.cert != nil {
		name = tde.cert.Name
	}
	switch {
	case tde.enc.KeyErr != nil:
		perm := tsql.PermViewServerState
		if e.majors[db.Instance] >= 16 {
			perm = tsql.PermViewServerSecurityState
		}
		c.Status = Warn
		c.Detail = fmt.Sprintf("%s is encrypted (TDE), but %s may not read sys.dm_database_encryption_keys on %s: its certificate "+
			"is not compared with %s's (a RESTORE without it fails with error 33111)", db.Name, e.logins[db.Instance], db.Instance, verify)
		c.Fix, _ = tsql.GrantServerPermission(perm, e.logins[db.Instance])
	case seen.err != nil:
		c.Status, c.Detail = Warn, "could not read the certificates of "+verify+": "+seen.err.Error()
	case seen.c.Find(tde.enc.Thumbprint) != nil:
		c.Status, c.Detail = OK, fmt.Sprintf("%s holds %s (%s)", verify, certLabel(name), tde.enc.Thumbprint)
	case !seen.c.All:
		c.Status = Warn
		c.Detail = fmt.Sprintf("%s does not see every certificate of %s, so whether it holds %s (%s) is not known", e.logins[verify], verify,
			certLabel(name), tde.enc.Thumbprint)
		c.Fix, _ = tsql.GrantServerPermission(tsql.PermViewAnyDefinition, e.logins[verify])
	default:
		c.Status = Missing
		c.Detail = fmt.Sprintf("%s is encrypted (TDE) with %s (%s) of %s, which %s does not hold in master: every RESTORE of its sets "+
			"there fails with error 33111", db.Name, certLabel(name), tde.enc.Thumbprint, db.Instance, verify)
		c.Fix = plan.TDECertificateFix(db.Instance, verify, name)
	}
	return c
}

func certLabel(name string) string {
	if name == "" {
		return "the certificate"
	}
	return "certificate " + name
}

// tdeSourceChecks: the certificate's private key backed up, and TDE with
// compression on the source's build.
func tdeSourceChecks(base Check, db *config.Database, src plan.Version, tde tdeSeen) []Check {
	var cs []Check
	if tde.cert != nil {
		c := base
		c.Name, c.For = "TDE certificate backup", "a restore anywhere but "+db.Instance
		if tde.cert.PrivateKeyBackup.IsZero() {
			c.Status = Warn
			c.Detail = fmt.Sprintf("certificate %s (%s) was never backed up with its private key: without that backup no other "+
				"instance, nor %s rebuilt, can restore %s", tde.cert.Name, tde.cert.Thumbprint, db.Instance, db.Name)
			c.Fix, _ = tsql.BackupCertificate(tde.cert.Name, "<password>")
		} else {
			c.Status, c.Detail = OK, fmt.Sprintf("certificate %s: private key last exported %s", tde.cert.Name,
				tde.cert.PrivateKeyBackup.Format("2006-01-02 15:04"))
		}
		cs = append(cs, c)
	}
	if !db.Compression || !src.Known() {
		return cs
	}
	c := base
	c.Name, c.For = "TDE and backup compression", "compression: true"
	why, fix := plan.TDECompressionRisk(src)
	switch {
	case why != "":
		c.Status, c.Detail, c.Fix = Warn, why, fix
	case plan.TDEMaxTransferSize(src) > 0 && db.MaxTransferSize == 0:
		c.Status = OK
		c.Detail = fmt.Sprintf("%s compresses TDE pages only with MAXTRANSFERSIZE above 64 KiB: the cycle sends %d", src.Release(),
			plan.TDEMaxTransferSize(src))
	default:
		c.Status, c.Detail = OK, "no known problem on "+src.Product()
	}
	return append(cs, c)
}
