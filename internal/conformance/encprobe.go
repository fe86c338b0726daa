package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// Backup encryption. RESTORE HEADERONLY documents KeyAlgorithm,
// EncryptorThumbprint and EncryptorType ("RESTORE Statements - HEADERONLY
// (Transact-SQL)") but neither the spelling of the algorithm nor which
// RESTORE forms read an encrypted backup without its certificate; the
// error of a RESTORE without it (33111) is documented for TDE ("Move a TDE
// Protected Database to Another SQL Server") and assumed for backup
// encryption. The product records the header's values in the manifests
// and compares them with the restoring instance's certificates.

// encObs is the probe's backup taken WITH ENCRYPTION, its header on both
// instances and the verification instance's FILELISTONLY of it.
type encObs struct {
	Algorithm, Certificate string // as configured
	Thumbprint             string // the source's certificate of that name
	Src, Ver               mssql.BackupHeader
	VerErr, FileListErr    error
}

// encryptionOf is the encryption: with a certificate of the first
// configured database of instance (or of its availability group), nil when
// none has one.
func encryptionOf(cfg *config.Config, instance string) *config.Encryption {
	for i := range cfg.Databases {
		db := &cfg.Databases[i]
		if e := db.Encryption; e.ServerCertificate != "" && (db.Instance == instance || slices.Contains(cfg.Sources(db.Instance), instance)) {
			return &e
		}
	}
	return nil
}

// scratchFiles are the files a run writes on the backup server.
func scratchFiles(p *Plan) []string {
	out := []string{p.Backup, p.VanishBackup, p.ForkBackup, p.ForkLogs[0], p.ForkLogs[1], p.ForkDiff}
	if p.EncBackup != "" {
		out = append(out, p.EncBackup)
	}
	return out
}

// probeEncryption backs the scratch database up WITH ENCRYPTION with the
// configured certificate and reads the backup's header on both instances
// and its file list on the verification instance.
func (r *runner) probeEncryption(ctx context.Context) {
	e := r.p.Encryption
	if e == nil {
		r.skip[IDEncryptedBackup] = "no database of " + r.p.Instance + " is configured with encryption: server_certificate; " +
			"the probe backs up with that certificate"
		return
	}
	o := &encObs{Algorithm: e.Algorithm, Certificate: e.ServerCertificate}
	certs, err := r.src.ServerCertificates(ctx)
	if c := certs.FindName(e.ServerCertificate); err == nil && c != nil {
		o.Thumbprint = c.Thumbprint
	}
	if o.Thumbprint == "" {
		r.skip[IDEncryptedBackup] = fmt.Sprintf("certificate %s is not in master of %s, or login %s may not see it (VIEW DEFINITION "+
			"on it): `starter preflight` says which", e.ServerCertificate, r.p.Instance, r.p.inst.User)
		return
	}
	stmt, err := tsql.BackupDatabase(tsql.BackupOptions{Database: r.p.Scratch, Disks: []string{r.p.sourcePath(r.p.EncBackup)}, Checksum: true,
		Init: true, Format: true, Compression: new(bool), CopyOnly: true, Name: r.p.setName() + " encrypted", Encryption: e.Backup()})
	if err != nil {
		r.skip[IDEncryptedBackup] = err.Error()
		return
	}
	r.made.file(r.p.EncBackup)
	if _, err := r.src.Run(ctx, "BACKUP DATABASE", stmt, nil); err != nil {
		r.skip[IDEncryptedBackup] = "BACKUP DATABASE ... WITH ENCRYPTION of the scratch database: " + err.Error()
		return
	}
	if o.Src, err = r.readHeader(ctx, r.p.EncBackup); err != nil {
		r.skip[IDEncryptedBackup] = "RESTORE HEADERONLY of the encrypted backup on " + r.p.Instance + ": " + err.Error()
		return
	}
	paths := []string{r.p.verifyPath(r.p.EncBackup)}
	if q, err := tsql.RestoreHeaderOnly(paths); err == nil {
		var hs []mssql.BackupHeader
		if hs, o.VerErr = r.ver.HeaderOnly(ctx, q); o.VerErr == nil && len(hs) > 0 {
			o.Ver = hs[0]
		}
	}
	if q, err := tsql.RestoreFileListOnly(paths); err == nil {
		_, o.FileListErr = r.ver.FileListOnly(ctx, q)
	}
	r.enc = o
}

// judgeEncryptedBackup: both headers name the configured algorithm, the
// certificate's thumbprint and CERTIFICATE as the product reads them; the
// verification instance's FILELISTONLY reads the file, or answers what the
// product takes for a missing certificate. Facts: the configured and read
// values, the errors.
func judgeEncryptedBackup(o encObs) Probe {
	p := newProbe(IDEncryptedBackup)
	p.Facts["algorithm"], p.Facts["certificate"], p.Facts["thumbprint"] = o.Algorithm, o.Certificate, o.Thumbprint
	p.Facts["key_algorithm"], p.Facts["encryptor_thumbprint"], p.Facts["encryptor_type"] = o.Src.KeyAlgorithm, o.Src.EncryptorThumbprint, o.Src.EncryptorType
	p.Facts["filelist_errors"] = nonNil(sqlErrors(o.FileListErr))
	names := func(h mssql.BackupHeader) bool {
		return h.KeyAlgorithm == o.Algorithm && strings.EqualFold(h.EncryptorThumbprint, o.Thumbprint) && h.EncryptorType == tsql.EncryptorCertificate
	}
	p.Observed = fmt.Sprintf("the backup WITH ENCRYPTION (ALGORITHM = %s, SERVER CERTIFICATE = %s, thumbprint %s) read as KeyAlgorithm %s, "+
		"EncryptorThumbprint %s, EncryptorType %s on the source", o.Algorithm, o.Certificate, o.Thumbprint, orNULL(o.Src.KeyAlgorithm),
		orNULL(o.Src.EncryptorThumbprint), orNULL(o.Src.EncryptorType))
	switch {
	case o.VerErr != nil:
		p.Observed += "; RESTORE HEADERONLY on the verification instance failed: " + o.VerErr.Error()
	case !names(o.Ver):
		p.Observed += fmt.Sprintf("; %s, %s, %s on the verification instance", orNULL(o.Ver.KeyAlgorithm), orNULL(o.Ver.EncryptorThumbprint),
			orNULL(o.Ver.EncryptorType))
	}
	missing := errors.Is(o.FileListErr, mssql.ErrCertificateMissing)
	switch {
	case o.FileListErr == nil:
		p.Observed += "; the verification instance read its file list"
	case missing:
		p.Observed += "; the verification instance, without the certificate, answered " + strings.Join(sqlErrors(o.FileListErr), "; ")
	default:
		p.Observed += "; the verification instance's FILELISTONLY failed: " + o.FileListErr.Error()
	}
	if names(o.Src) && o.VerErr == nil && names(o.Ver) && (o.FileListErr == nil || missing) {
		p.Verdict = Holds
		return p
	}
	p.Verdict = Fails
	return p
}
