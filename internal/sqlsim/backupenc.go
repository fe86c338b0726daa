package sqlsim

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/des"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strings"
	"time"

	"github.com/backupcycle/backupcycle/internal/sqlsim/tds"
)

// Backup encryption: BACKUP ... WITH ENCRYPTION (ALGORITHM = ..., SERVER
// CERTIFICATE = ...), SQL Server 2014 and later ("Backup encryption",
// https://learn.microsoft.com/en-us/sql/relational-databases/backup-restore/backup-encryption;
// BACKUP (Transact-SQL), ENCRYPTION). Unlike TDE, which the emulator only
// labels, the emulator really encrypts such a backup: each set gets a
// random key of the algorithm's length, every block's payload is encrypted
// with it (after compression, in counter mode: the block's sequence number
// is its nonce), and the key itself is kept in the media header sealed
// with a key derived from the certificate's private key. Reading the pages
// back therefore needs the certificate on the instance that reads them, as
// SQL Server needs it: "It does require that the certificate or the
// asymmetric key used to encrypt the backup file is available on the
// instance that you're restoring to".

// encryptionSpec is the ENCRYPTION (...) option of a BACKUP as parsed.
type encryptionSpec struct {
	algorithm string // upper case, as written
	asymKey   bool   // SERVER ASYMMETRIC KEY instead of SERVER CERTIFICATE
	encryptor string
}

// backupKeyLen is the key length of each algorithm BACKUP accepts ("ALGORITHM
// = { AES_128 | AES_192 | AES_256 | TRIPLE_DES_3KEY }"): three-key triple
// DES takes 24 bytes.
var backupKeyLen = map[string]int{"AES_128": 16, "AES_192": 24, "AES_256": 32, "TRIPLE_DES_3KEY": 24}

// parseEncryption reads `( ALGORITHM = alg , SERVER CERTIFICATE = name |
// SERVER ASYMMETRIC KEY = name )` after ENCRYPTION.
func (p *parser) parseEncryption() (*encryptionSpec, error) {
	if err := p.expectOp("("); err != nil {
		return nil, err
	}
	e := &encryptionSpec{}
	for {
		switch {
		case p.accept("ALGORITHM"):
			if err := p.expectOp("="); err != nil {
				return nil, err
			}
			t := p.peek()
			alg, err := p.ident()
			if err != nil {
				return nil, err
			}
			if _, ok := backupKeyLen[strings.ToUpper(alg)]; !ok {
				return nil, errNear(t)
			}
			e.algorithm = strings.ToUpper(alg)
		case p.accept("SERVER"):
			switch {
			case p.accept("CERTIFICATE"):
			case p.accept("ASYMMETRIC"):
				if err := p.expect("KEY"); err != nil {
					return nil, err
				}
				e.asymKey = true
			default:
				return nil, errNear(p.peek())
			}
			if err := p.expectOp("="); err != nil {
				return nil, err
			}
			name, err := p.ident()
			if err != nil {
				return nil, err
			}
			e.encryptor = name
		default:
			return nil, errNear(p.peek())
		}
		if !p.acceptOp(",") {
			break
		}
	}
	if err := p.expectOp(")"); err != nil {
		return nil, err
	}
	if e.algorithm == "" || e.encryptor == "" {
		return nil, errNear(p.toks[p.i-1])
	}
	return e, nil
}

// certKey is the private key of a certificate of the catalog: the secret
// CreateCertificate drew (its thumbprint is that secret's SHA-1); a
// certificate recorded before the emulator kept it has one derived from its
// thumbprint.
func (c *certificate) certKey() []byte {
	if k, err := hex.DecodeString(c.Key); err == nil && len(k) > 0 {
		return k
	}
	sum := sha256.Sum256([]byte("sqlsim certificate " + strings.ToLower(c.Thumbprint)))
	return sum[:]
}

// keyWrap is the AEAD that seals a backup's key with a certificate's
// private key.
func keyWrap(certKey []byte) cipher.AEAD {
	kek := sha256.Sum256(append([]byte("sqlsim backup key encryption\x00"), certKey...))
	b, _ := aes.NewCipher(kek[:])
	g, _ := cipher.NewGCM(b)
	return g
}

// setCipher encrypts and decrypts the blocks of one encrypted backup set.
type setCipher struct{ block cipher.Block }

func newSetCipher(algorithm string, key []byte) (*setCipher, error) {
	var b cipher.Block
	var err error
	if algorithm == "TRIPLE_DES_3KEY" {
		b, err = des.NewTripleDESCipher(key)
	} else {
		b, err = aes.NewCipher(key)
	}
	if err != nil {
		return nil, err
	}
	return &setCipher{block: b}, nil
}

// xor encrypts or decrypts (counter mode is its own inverse) the payload
// of block seq into dst (len(src) bytes; dst may be src). The counter
// starts at seq in the upper half of the counter block, so no two blocks
// of a set (at most 4 MiB each) share a key stream.
func (c *setCipher) xor(seq uint32, dst, src []byte) {
	iv := make([]byte, c.block.BlockSize())
	binary.BigEndian.PutUint32(iv, seq)
	cipher.NewCTR(c.block, iv).XORKeyStream(dst, src)
}

// encryptorTypeText is msdb.dbo.backupset.encryptor_type and HEADERONLY
// EncryptorType: "Certificate or Asymmetric Key" ("backupset
// (Transact-SQL)").
func encryptorTypeText(asymKey bool) string {
	if asymKey {
		return "ASYMMETRIC KEY"
	}
	return "CERTIFICATE"
}

// keyAlgorithmText is backupset.key_algorithm and HEADERONLY KeyAlgorithm of
// an encrypted set: the algorithm as SQL Server records it (lower case,
// aes_256); products compare it without regard to case.
func keyAlgorithmText(alg string) string { return strings.ToLower(alg) }

// encryptionColumns are backupset's key_algorithm, encryptor_thumbprint and
// encryptor_type, and HEADERONLY's KeyAlgorithm, EncryptorThumbprint and
// EncryptorType: the algorithm, "The thumbprint of the encryptor which can
// be used to find certificate or the asymmetric key in the database" and
// "The type of encryptor used: Certificate or Asymmetric Key"; NULL when
// the backup was not encrypted ("backupset (Transact-SQL)", "RESTORE
// Statements - HEADERONLY (Transact-SQL)": "When the correct value cannot
// be determined the value should be NULL"; backupset's NO_Encryption is
// not written by the emulator, products read both as not encrypted).
func encryptionColumns(alg, thumbprint, typ string) (keyAlg, tp, encType any) {
	if thumbprint == "" {
		return nil, nil, nil
	}
	b, _ := hex.DecodeString(thumbprint)
	return keyAlgorithmText(alg), b, typ
}

// errNoEncryptor is 15151 ("Cannot find the %S_MSG '%.*ls', because it does
// not exist or you do not have permission.", Database Engine events and
// errors 15000 to 15999): BACKUP names an encryptor master does not hold, or
// one the login may not see (backup encryption needs "VIEW DEFINITION
// permission on the certificate or asymmetric key", "Backup encryption",
// Permissions).
func errNoEncryptor(e *encryptionSpec) *tds.Error {
	kind := "certificate"
	if e.asymKey {
		kind = "asymmetric key"
	}
	return sqlErr(15151, 16, "Cannot find the %s '%s', because it does not exist or you do not have permission.", kind, e.encryptor)
}

// beginEncryption checks BACKUP's encryptor and returns the header fields
// and the cipher of a new encrypted set:
//   - Express and Web "don't support encryption during backup" ("Backup
//     encryption", Restrictions): the emulator refuses it as not emulated,
//     the error SQL Server gives being undocumented;
//   - the certificate or asymmetric key must be in master and visible to
//     the login (15151); an asymmetric key must be of an EKM provider
//     (asymEncryptor);
//   - "Backup with Encryption using certificates also checks the expiration
//     date and won't allow a new backup to be created with an expired
//     certificate" (CREATE CERTIFICATE (Transact-SQL), EXPIRY_DATE, "in
//     UTC time"): 3096 "The Certificate specified for backup encryption has
//     expired." as captured on SQL Server 2016 ("SQL Server Certificate for
//     Backups - Does Expiration Date Matter?", dba.stackexchange.com);
//   - a certificate whose private key was never exported gets the warning
//     33091 that TDE gives, which SQL Server 2014 also printed for BACKUP
//     WITH ENCRYPTION ("Database Backup Encryption with SQL Server 2014",
//     SQLServerCentral).
func (x *execCtx) beginEncryption(e *encryptionSpec, h *mediaHeader) (*setCipher, *tds.Error) {
	switch strings.ToLower(x.in.cfg.Edition) {
	case "express", "web":
		return nil, errNotSupported("BACKUP WITH ENCRYPTION on " + x.in.editionName())
	}
	if !x.in.seesCertificates(x.sessionLogin()) {
		return nil, errNoEncryptor(e)
	}
	var tp string
	var ck []byte
	if e.asymKey {
		var err *tds.Error
		if tp, ck, err = x.asymEncryptor(e); err != nil {
			return nil, err
		}
	} else {
		x.in.mu.Lock()
		c := x.in.certLocked(e.encryptor, "")
		var expiry time.Time
		var backedUp bool
		if c != nil {
			tp, ck, expiry, backedUp = c.Thumbprint, c.certKey(), c.Expiry, !c.PvtKeyBackup.IsZero()
		}
		x.in.mu.Unlock()
		if c == nil {
			return nil, errNoEncryptor(e)
		}
		if !expiry.IsZero() && !time.Now().UTC().Before(expiry) {
			return nil, sqlErr(3096, 16, "The Certificate specified for backup encryption has expired.")
		}
		if !backedUp {
			x.info(33091, 10, "Warning: The certificate used for encrypting the database encryption key has not been backed up. "+
				"You should immediately back up the certificate and the private key associated with the certificate. "+
				"If the certificate ever becomes unavailable or if you must restore or attach the database on another server, "+
				"you must have backups of both the certificate and the private key or you will not be able to open the database.")
		}
	}
	key := make([]byte, backupKeyLen[e.algorithm])
	rand.Read(key)
	sc, err := newSetCipher(e.algorithm, key)
	if err != nil { // the lengths are the algorithms'
		return nil, errNotSupported("BACKUP WITH ENCRYPTION (ALGORITHM = " + e.algorithm + ")")
	}
	wrap := keyWrap(ck)
	nonce := make([]byte, wrap.NonceSize())
	rand.Read(nonce)
	h.KeyAlgorithm, h.EncryptorThumbprint, h.EncryptorType = e.algorithm, tp, encryptorTypeText(e.asymKey)
	h.EncryptedKey = hex.EncodeToString(wrap.Seal(nonce, nonce, key, []byte(tp)))
	return sc, nil
}

// readCipher is the cipher of an encrypted set on this instance: its key
// unsealed with the certificate or asymmetric key of the set's thumbprint;
// 33111 when master does not hold it (nil, nil for a set that is not
// encrypted).
func (in *Instance) readCipher(h *mediaHeader) (*setCipher, *tds.Error) {
	if h.EncryptorThumbprint == "" {
		return nil, nil
	}
	missing := errNoCertificate
	var ck []byte
	if h.EncryptorType == encryptorTypeText(true) {
		missing = errNoAsymmetricKey
		var e *tds.Error
		if ck, e = in.asymDecryptor(h.EncryptorThumbprint); e != nil {
			return nil, e
		}
	} else {
		in.mu.Lock()
		if c := in.certLocked("", h.EncryptorThumbprint); c != nil {
			ck = c.certKey()
		}
		in.mu.Unlock()
		if ck == nil {
			return nil, errNoCertificate(h.EncryptorThumbprint)
		}
	}
	sealed, err := hex.DecodeString(h.EncryptedKey)
	wrap := keyWrap(ck)
	if err != nil || len(sealed) < wrap.NonceSize() {
		return nil, missing(h.EncryptorThumbprint)
	}
	key, err := wrap.Open(nil, sealed[:wrap.NonceSize()], sealed[wrap.NonceSize():], []byte(h.EncryptorThumbprint))
	if err != nil {
		// An encryptor of that thumbprint with another key cannot be: the
		// thumbprint is the key's hash. Read as the encryptor missing.
		return nil, missing(h.EncryptorThumbprint)
	}
	sc, err := newSetCipher(h.KeyAlgorithm, key)
	if err != nil {
		return nil, missing(h.EncryptorThumbprint)
	}
	return sc, nil
}
