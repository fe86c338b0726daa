package sqlsim

import (
	"crypto/rand"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/backupcycle/backupcycle/internal/sqlsim/tds"
)

// Transparent data encryption: server certificates in master and databases
// whose encryption key a certificate protects. The emulator encrypts no
// page; it keeps what SQL Server requires of the instance that reads a TDE
// database's backup: "the certificate or asymmetric key must be installed in
// the master database of the destination server" ("Move a TDE Protected
// Database to Another SQL Server",
// https://learn.microsoft.com/en-us/sql/relational-databases/security/encryption/move-a-tde-protected-database-to-another-sql-server).

// Certificate is a server certificate in master (master.sys.certificates),
// as BACKUP CERTIFICATE ... WITH PRIVATE KEY exports it and CREATE
// CERTIFICATE ... FROM FILE imports it elsewhere.
type Certificate struct {
	Name       string
	Subject    string
	Thumbprint []byte // SHA-1 of the certificate, 20 bytes
	Start      time.Time
	Expiry     time.Time
	// PrivateKey is the key pair's secret, which BACKUP CERTIFICATE ...
	// WITH PRIVATE KEY exports: an instance that imports the certificate
	// without it (nil) gets one derived from the thumbprint, which reads
	// no backup encrypted with the original (backupenc.go).
	PrivateKey []byte
}

// ThumbprintText is the thumbprint as SQL Server prints a varbinary:
// 0x and upper-case hex digits.
func (c Certificate) ThumbprintText() string { return thumbprintText(c.Thumbprint) }

func thumbprintText(b []byte) string { return "0x" + strings.ToUpper(hex.EncodeToString(b)) }

// certificate is a certificate of the instance's catalog.
type certificate struct {
	ID         int       `json:"id"`
	Name       string    `json:"name"`
	Subject    string    `json:"subject"`
	Thumbprint string    `json:"thumbprint"` // hex
	Start      time.Time `json:"start"`
	Expiry     time.Time `json:"expiry"`
	// PvtKeyBackup is sys.certificates.pvt_key_last_backup_date: "The date
	// and time the certificate's private key was last exported"; zero is
	// NULL (never exported).
	PvtKeyBackup time.Time `json:"pvt_key_last_backup_date,omitzero"`
	// Key is the private key (hex), with which backups encrypted by the
	// certificate seal their key (backupenc.go); "" in catalogs written
	// before it was kept.
	Key string `json:"key,omitempty"`
}

func (c *certificate) public() Certificate {
	tp, _ := hex.DecodeString(c.Thumbprint)
	return Certificate{Name: c.Name, Subject: c.Subject, Thumbprint: tp, Start: c.Start, Expiry: c.Expiry, PrivateKey: c.certKey()}
}

// certLocked finds a certificate by name (case-insensitive) or, with
// name "", by thumbprint; in.mu must be held.
func (in *Instance) certLocked(name, thumbprint string) *certificate {
	for _, c := range in.cat.Certificates {
		if name != "" && strings.EqualFold(c.Name, name) || name == "" && strings.EqualFold(c.Thumbprint, thumbprint) {
			return c
		}
	}
	return nil
}

// hasCertificate reports whether master holds the certificate of thumbprint
// (hex).
func (in *Instance) hasCertificate(thumbprint string) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.certLocked("", thumbprint) != nil
}

// nextSecurableID is the id of a new certificate or asymmetric key of
// master: ids start at 256 (ids below are system ones).
func nextSecurableID[T any](list []*T, idOf func(*T) int) int {
	id := 256
	for _, x := range list {
		id = max(id, idOf(x)+1)
	}
	return id
}

// removeNamed removes the securable of that name (case-insensitive) from
// *list, and reports whether there was one.
func removeNamed[T any](list *[]*T, nameOf func(*T) string, name string) bool {
	for i, x := range *list {
		if strings.EqualFold(nameOf(x), name) {
			*list = append((*list)[:i], (*list)[i+1:]...)
			return true
		}
	}
	return false
}

// errCertExists is 15232, CREATE CERTIFICATE of a name or certificate master
// already holds.
func errCertExists(name string) error {
	return fmt.Errorf("sqlsim: error 15232: a certificate with name '%s' already exists or this certificate already has been added to the database", name)
}

// CreateCertificate creates a server certificate in master, as CREATE
// CERTIFICATE name WITH SUBJECT = subject does after CREATE MASTER KEY: a
// new key pair, so a new thumbprint, valid for a year from now (EXPIRY_DATE
// defaults to one year after START_DATE, "CREATE CERTIFICATE
// (Transact-SQL)").
func (in *Instance) CreateCertificate(name, subject string) (Certificate, error) {
	if name == "" {
		return Certificate{}, fmt.Errorf("sqlsim: CreateCertificate: the name is empty")
	}
	seed := make([]byte, 32)
	rand.Read(seed)
	sum := sha1.Sum(seed)
	now := time.Now().UTC().Truncate(time.Second)
	c := Certificate{Name: name, Subject: subject, Thumbprint: sum[:], Start: now, Expiry: now.AddDate(1, 0, 0), PrivateKey: seed}
	return c, in.ImportCertificate(c)
}

// ExportCertificate is BACKUP CERTIFICATE name TO FILE ... WITH PRIVATE KEY
// (...): it returns the certificate, which ImportCertificate installs on
// another instance, and records the export in pvt_key_last_backup_date.
func (in *Instance) ExportCertificate(name string) (Certificate, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	c := in.certLocked(name, "")
	if c == nil {
		return Certificate{}, fmt.Errorf("sqlsim: error 15151: cannot find the certificate '%s', because it does not exist or you do not have permission", name)
	}
	c.PvtKeyBackup = in.serverTime(time.Now())
	return c.public(), in.saveCatalog()
}

// ImportCertificate is CREATE CERTIFICATE name FROM FILE = ... WITH PRIVATE
// KEY (FILE = ..., DECRYPTION BY PASSWORD = ...) in master: the same
// certificate (name, thumbprint) on this instance, which can then read the
// backups of databases it protects.
func (in *Instance) ImportCertificate(c Certificate) error {
	if c.Name == "" || len(c.Thumbprint) != sha1.Size {
		return fmt.Errorf("sqlsim: ImportCertificate: a certificate needs a name and a 20-byte thumbprint")
	}
	tp := hex.EncodeToString(c.Thumbprint)
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.certLocked(c.Name, "") != nil || in.certLocked("", tp) != nil {
		return errCertExists(c.Name)
	}
	id := nextSecurableID(in.cat.Certificates, func(x *certificate) int { return x.ID })
	in.cat.Certificates = append(in.cat.Certificates, &certificate{ID: id, Name: c.Name, Subject: c.Subject, Thumbprint: tp,
		Start: c.Start, Expiry: c.Expiry, Key: hex.EncodeToString(c.PrivateKey)})
	return in.saveCatalog()
}

// DropCertificate is DROP CERTIFICATE name in master (a certificate rotated
// away, or never installed on a rebuilt instance).
func (in *Instance) DropCertificate(name string) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if removeNamed(&in.cat.Certificates, func(c *certificate) string { return c.Name }, name) {
		return in.saveCatalog()
	}
	return fmt.Errorf("sqlsim: error 15151: cannot drop the certificate '%s', because it does not exist or you do not have permission", name)
}

// EnableTDE encrypts a database with a server certificate of master: CREATE
// DATABASE ENCRYPTION KEY WITH ALGORITHM = AES_256 ENCRYPTION BY SERVER
// CERTIFICATE certificate, then ALTER DATABASE db SET ENCRYPTION ON, with
// the encryption scan already finished (encryption_state 3).
func (in *Instance) EnableTDE(db, certificate string) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	d := in.lookupDBLocked(db)
	if d == nil || d.system {
		return fmt.Errorf("sqlsim: EnableTDE: no user database %q on %s", db, in.cfg.Name)
	}
	c := in.certLocked(certificate, "")
	if c == nil {
		return fmt.Errorf("sqlsim: EnableTDE: no certificate %q in master of %s", certificate, in.cfg.Name)
	}
	d.TDEThumbprint = c.Thumbprint
	return in.saveCatalog()
}

// errNoCertificate is 33111, raised by RESTORE (HEADERONLY, FILELISTONLY,
// VERIFYONLY, DATABASE) of a TDE database's backup on an instance without
// the certificate: "Msg 33111, Level 16, State 3 Cannot find server
// certificate with thumbprint '%'." ("Error after you perform TDE
// certificate or key rotation", KB4534430,
// https://learn.microsoft.com/en-us/troubleshoot/sql/database-engine/backup-restore/error-after-perform-tde-certificate-key-rotation).
// Which of the RESTORE forms need the key is not documented; the emulator
// refuses them all, the stricter choice.
func errNoCertificate(thumbprint string) *tds.Error {
	b, _ := hex.DecodeString(thumbprint)
	e := sqlErr(33111, 16, "Cannot find server certificate with thumbprint '%s'.", thumbprintText(b))
	e.State = 3
	return e
}

// seesCertificates: catalog views show only the securables the login owns
// or holds a permission on ("Metadata Visibility Configuration",
// https://learn.microsoft.com/en-us/sql/relational-databases/security/metadata-visibility-configuration);
// the emulator's logins own no certificate, so they see master's
// certificates with VIEW ANY DEFINITION (or CONTROL SERVER, or as sysadmin).
func (in *Instance) seesCertificates(l *Login) bool { return l.hasServer("VIEW ANY DEFINITION") }

// certificatesView is [db].sys.certificates: master's server certificates
// (https://learn.microsoft.com/en-us/sql/relational-databases/system-catalog-views/sys-certificates-transact-sql);
// user databases of the emulator hold none.
func (x *execCtx) certificatesView(d *database, qual string) *relation {
	rel := &relation{cols: []relCol{col(qual, "name", tds.TypeNVarChar, 128), col(qual, "certificate_id", tds.TypeInt, 0),
		col(qual, "principal_id", tds.TypeInt, 0), col(qual, "pvt_key_encryption_type", tds.TypeChar, 2),
		col(qual, "pvt_key_encryption_type_desc", tds.TypeNVarChar, 60), col(qual, "issuer_name", tds.TypeNVarChar, 442),
		col(qual, "subject", tds.TypeNVarChar, 4000), col(qual, "expiry_date", tds.TypeDateTime, 0),
		col(qual, "start_date", tds.TypeDateTime, 0), col(qual, "thumbprint", tds.TypeVarBinary, 32),
		col(qual, "pvt_key_last_backup_date", tds.TypeDateTime, 0), col(qual, "key_length", tds.TypeInt, 0)}}
	if !strings.EqualFold(d.Name, "master") || !x.in.seesCertificates(x.sessionLogin()) {
		return rel
	}
	x.in.mu.Lock()
	defer x.in.mu.Unlock()
	for _, c := range x.in.cat.Certificates {
		tp, _ := hex.DecodeString(c.Thumbprint)
		var backedUp any
		if !c.PvtKeyBackup.IsZero() {
			backedUp = c.PvtKeyBackup // stamped on the server's clock when written
		}
		rel.rows = append(rel.rows, []any{c.Name, int64(c.ID), int64(1), "MK", "ENCRYPTED_BY_MASTER_KEY", c.Subject, c.Subject,
			c.Expiry, c.Start, tp, backedUp, int64(2048)})
	}
	return rel
}

// encryptionKeysView is sys.dm_database_encryption_keys: one row per
// encrypted database. It needs VIEW SERVER STATE, on SQL Server 2022 VIEW
// SERVER SECURITY STATE (which VIEW SERVER STATE implies); without it, 300
// then 297
// (https://learn.microsoft.com/en-us/sql/relational-databases/system-dynamic-management-views/sys-dm-database-encryption-keys-transact-sql).
func (x *execCtx) encryptionKeysView(qual string) (*relation, error) {
	perm := "VIEW SERVER STATE"
	if x.in.cfg.MajorVersion >= 16 {
		perm = "VIEW SERVER SECURITY STATE"
	}
	if !x.sessionLogin().hasServer(perm) {
		return nil, tds.Errors{
			sqlErr(300, 14, "%s permission was denied on object 'server', database 'master'.", perm),
			sqlErr(297, 16, "The user does not have permission to perform this action."),
		}
	}
	rel := &relation{cols: []relCol{col(qual, "database_id", tds.TypeInt, 0), col(qual, "encryption_state", tds.TypeInt, 0),
		col(qual, "create_date", tds.TypeDateTime, 0), col(qual, "key_algorithm", tds.TypeNVarChar, 32),
		col(qual, "key_length", tds.TypeInt, 0), col(qual, "encryptor_thumbprint", tds.TypeVarBinary, 20),
		col(qual, "encryptor_type", tds.TypeNVarChar, 32), col(qual, "percent_complete", tds.TypeReal, 0)}}
	for _, d := range x.in.allDatabases() {
		if d.TDEThumbprint == "" {
			continue
		}
		tp, _ := hex.DecodeString(d.TDEThumbprint)
		// encryption_state 3: encrypted.
		rel.rows = append(rel.rows, []any{int64(d.ID), int64(3), d.Created, "AES", int64(256), tp,
			"CERTIFICATE", float64(0)})
	}
	return rel, nil
}

// tdeTransfer applies what TDE changes in a BACKUP of d, and returns
// whether its pages get compressed and whether the set takes the TDE
// compressed format of KB5014298:
//   - a TDE database's default MAXTRANSFERSIZE is 64 KiB, and at 64 KiB
//     compression "directly compresses the encrypted pages, and may not
//     yield good compression ratios": "you must explicitly set
//     MAXTRANSFERSIZE greater than 64K" for the algorithm that decrypts,
//     compresses and encrypts ("BACKUP (Transact-SQL)", MAXTRANSFERSIZE;
//     "Backup compression (SQL Server)"). The emulator stores such pages
//     uncompressed;
//   - from SQL Server 2019 CU5 a compressed backup of a TDE database
//     raises an unset MAXTRANSFERSIZE to 128 KiB on its own ("Backup
//     compression (SQL Server)");
//   - from SQL Server 2019 CU16 compressed backups of TDE databases use a
//     format that only CU16 and later restore ("KB5014298 - FIX: Error 3241
//     occurs during executing RESTORE DATABASE or RESTORE LOG",
//     https://support.microsoft.com/help/5014298).
func (x *execCtx) tdeTransfer(d *database, mtsGiven bool, o *backupOptions) (compress, tdeFormat bool) {
	if d.TDEThumbprint == "" {
		return o.compression, false
	}
	v := x.in.versionInfo()
	atLeast := func(major int, build uint16) bool {
		return x.in.cfg.MajorVersion > major || x.in.cfg.MajorVersion == major && v.num >= build
	}
	if !mtsGiven {
		o.maxTransfer = 64 << 10
		if o.compression && atLeast(15, 4043) { // 2019 CU5
			o.maxTransfer = 128 << 10
		}
	}
	compress = o.compression && o.maxTransfer > 64<<10
	return compress, compress && atLeast(15, 4223) // 2019 CU16
}

// readsTDECompressedFormat: the instance restores the KB5014298 format
// (SQL Server 2019 CU16 and later).
func (in *Instance) readsTDECompressedFormat() bool {
	return in.cfg.MajorVersion > 15 || in.cfg.MajorVersion == 15 && in.versionInfo().num >= 4223
}

// errTDEFormat is what a SQL Server 2019 before CU16 answers to RESTORE
// DATABASE of a compressed TDE backup made on CU16 or later, as KB5014298
// lists it: "Msg 3013, Level 16, State 1 RESTORE DATABASE is terminating
// abnormally. Msg 9004, Level 21, State 1 An error occurred while processing
// the log for database 'TDE_DB'. ..." The severity 21 error does not end
// the session here: the RESTORE fails, the connection stays.
func errTDEFormat(op, db string) tds.Errors {
	e := sqlErr(9004, 21, "An error occurred while processing the log for database '%s'. If possible, restore from backup. If a backup is not available, it might be necessary to rebuild the log.", db)
	e.SessionSurvives = true
	return tds.Errors{errTerminating(op), e}
}
