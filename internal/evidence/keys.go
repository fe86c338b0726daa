package evidence

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// PrivateKey signs records. Its String and GoString never show the key.
type PrivateKey struct {
	key ed25519.PrivateKey
	id  string
}

// ID is the key's id: the first 16 hex digits of the SHA-256 of its public
// key, written into every record it signs.
func (k *PrivateKey) ID() string { return k.id }

// Public is the key's public half.
func (k *PrivateKey) Public() PublicKey {
	pub := k.key.Public().(ed25519.PublicKey)
	return PublicKey{key: pub, id: keyID(pub)}
}

func (k *PrivateKey) String() string   { return "evidence signing key " + k.id + " (hidden)" }
func (k *PrivateKey) GoString() string { return k.String() }

func (k *PrivateKey) sign(body []byte) string {
	return base64.StdEncoding.EncodeToString(ed25519.Sign(k.key, body))
}

// PublicKey verifies records.
type PublicKey struct {
	key ed25519.PublicKey
	id  string
}

// ID is the key's id (PrivateKey.ID of its private half).
func (k PublicKey) ID() string { return k.id }

// String is the key as ParsePublicKey reads it: base64 of its
// SubjectPublicKeyInfo (DER), what `openssl pkey -pubout -outform DER`
// writes.
func (k PublicKey) String() string {
	der, err := x509.MarshalPKIXPublicKey(k.key)
	if err != nil {
		return base64.StdEncoding.EncodeToString(k.key)
	}
	return base64.StdEncoding.EncodeToString(der)
}

func keyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

// ParsePrivateKey reads a signing key: base64 of a PKCS #8 private key
// (DER, what `openssl genpkey -algorithm ed25519 -outform DER` writes) or
// of a 32-byte Ed25519 seed. Errors never show the value.
func ParsePrivateKey(s string) (*PrivateKey, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return nil, errors.New("the evidence signing key is not base64: give base64 of a PKCS #8 Ed25519 key (`starter evidence keygen` makes one)")
	}
	var priv ed25519.PrivateKey
	switch len(b) {
	case ed25519.SeedSize:
		priv = ed25519.NewKeyFromSeed(b)
	default:
		k, err := x509.ParsePKCS8PrivateKey(b)
		if err != nil {
			return nil, errors.New("the evidence signing key is neither a PKCS #8 key nor a 32-byte Ed25519 seed")
		}
		p, ok := k.(ed25519.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("the evidence signing key is a %T key, not Ed25519", k)
		}
		priv = p
	}
	pub := priv.Public().(ed25519.PublicKey)
	return &PrivateKey{key: priv, id: keyID(pub)}, nil
}

// ParsePublicKey reads a public key: base64 of a SubjectPublicKeyInfo
// (DER, `openssl pkey -pubout -outform DER`) or of the 32 raw bytes.
func ParsePublicKey(s string) (PublicKey, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return PublicKey{}, fmt.Errorf("public key %q is not base64", s)
	}
	if len(b) == ed25519.PublicKeySize {
		return PublicKey{key: ed25519.PublicKey(b), id: keyID(b)}, nil
	}
	k, err := x509.ParsePKIXPublicKey(b)
	if err != nil {
		return PublicKey{}, fmt.Errorf("public key %q is neither a SubjectPublicKeyInfo nor 32 raw Ed25519 bytes: %w", s, err)
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return PublicKey{}, fmt.Errorf("public key %q is a %T key, not Ed25519", s, k)
	}
	return PublicKey{key: pub, id: keyID(pub)}, nil
}

// GenerateKey makes a new signing key and returns it with its encoding
// for ParsePrivateKey (base64 of PKCS #8 DER).
func GenerateKey() (*PrivateKey, string, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, "", err
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, "", err
	}
	pub := priv.Public().(ed25519.PublicKey)
	return &PrivateKey{key: priv, id: keyID(pub)}, base64.StdEncoding.EncodeToString(der), nil
}

// PublicKeys are the keys records are verified with, by id.
type PublicKeys map[string]PublicKey

// NewPublicKeys is the set of keys.
func NewPublicKeys(keys ...PublicKey) PublicKeys {
	out := PublicKeys{}
	for _, k := range keys {
		out[k.id] = k
	}
	return out
}

// verify checks sig (base64) over body with the key keyID names.
func (ks PublicKeys) verify(keyID string, body []byte, sig string) error {
	k, ok := ks[keyID]
	if !ok {
		return fmt.Errorf("signed by key %s, which is not among the configured public keys", keyID)
	}
	s, err := base64.StdEncoding.DecodeString(sig)
	if err != nil || !ed25519.Verify(k.key, body, s) {
		return fmt.Errorf("signature does not verify under key %s", keyID)
	}
	return nil
}
