package catalog

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
)

// Anyone who can write a backup share (another tool, a person, SQL
// Server's service account) can plant a file there that reads like a
// manifest. The workers sign what they write with HMAC-SHA256 (RFC 2104,
// FIPS 198-1) under a key only they hold, and trust a manifest they read
// for retention, status, the plan and ownership only when its signature
// verifies (Auth). A signature proves that a worker wrote these very bytes
// once; an older version of the same manifest, copied back, still
// verifies (it is the set as it was).

// MinKeyBytes is the shortest key accepted: HMAC-SHA256 keys shorter than
// the hash (32 bytes) weaken it (RFC 2104, section 3).
const MinKeyBytes = 32

// keyIDRE is what a key id may be: it is written into every signature.
var keyIDRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// ValidKeyID reports whether id may name a manifest key: 1-64 letters,
// digits, '.', '_' or '-', starting with a letter or digit.
func ValidKeyID(id string) bool { return keyIDRE.MatchString(id) }

// Key is one manifest key: its id, written into every signature made with
// it, and the secret.
type Key struct {
	ID     string
	Secret []byte
}

// Keys are the manifest keys of a configuration: the first signs, every
// one verifies, so that a key is replaced without stranding what the old
// one signed. A nil *Keys is a configuration without keys: nothing is
// signed, and nothing read can be authenticated (AuthOff).
type Keys struct{ keys []Key }

// NewKeys checks the keys (ids unique and well-formed, secrets long
// enough) and makes the ring, the first key signing.
func NewKeys(keys ...Key) (*Keys, error) {
	if len(keys) == 0 {
		return nil, errors.New("manifest keys: none given")
	}
	var errs []error
	for i, k := range keys {
		if !keyIDRE.MatchString(k.ID) {
			errs = append(errs, fmt.Errorf("manifest key %d: id %q is not 1-64 letters, digits, '.', '_' or '-' starting with a letter or digit", i+1, k.ID))
		}
		if slices.ContainsFunc(keys[:i], func(o Key) bool { return o.ID == k.ID }) {
			errs = append(errs, fmt.Errorf("manifest key %d: id %q is used twice: every key needs its own id", i+1, k.ID))
		}
		if len(k.Secret) < MinKeyBytes {
			errs = append(errs, fmt.Errorf("manifest key %q is %d bytes: use at least %d random bytes (e.g. `openssl rand -base64 48`)", k.ID, len(k.Secret), MinKeyBytes))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &Keys{keys: slices.Clone(keys)}, nil
}

// Current is the id of the key that signs; "" without keys.
func (k *Keys) Current() string {
	if k == nil {
		return ""
	}
	return k.keys[0].ID
}

// IDs are the ids of every key, the signing one first.
func (k *Keys) IDs() []string {
	if k == nil {
		return nil
	}
	out := make([]string, len(k.keys))
	for i, key := range k.keys {
		out[i] = key.ID
	}
	return out
}

// Purposes of a signature: a manifest's MAC never verifies a sequence
// file, nor the other way round.
const (
	purposeManifest = "backupcycle manifest"
	PurposeSequence = "backupcycle sequence"
)

// Signature is an HMAC-SHA256 over a record's canonical bytes, with the id
// of the key that made it.
type Signature struct {
	KeyID      string `json:"key_id"`
	HMACSHA256 string `json:"hmac_sha256"` // lower-case hex
}

// Sign signs body for purpose with the current key; nil without keys.
func (k *Keys) Sign(purpose string, body []byte) *Signature {
	if k == nil {
		return nil
	}
	return &Signature{KeyID: k.keys[0].ID, HMACSHA256: hex.EncodeToString(mac(k.keys[0].Secret, purpose, body))}
}

// Verify says whether sig is the signature of body for purpose under one
// of the keys.
func (k *Keys) Verify(purpose string, body []byte, sig *Signature) Auth {
	switch {
	case k == nil:
		return AuthOff
	case sig == nil:
		return AuthUnsigned
	}
	i := slices.IndexFunc(k.keys, func(key Key) bool { return key.ID == sig.KeyID })
	got, err := hex.DecodeString(sig.HMACSHA256)
	if i < 0 || err != nil || !hmac.Equal(got, mac(k.keys[i].Secret, purpose, body)) {
		return AuthInvalid
	}
	return AuthSigned
}

func mac(secret []byte, purpose string, body []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(purpose))
	h.Write([]byte{0})
	h.Write(body)
	return h.Sum(nil)
}

// Auth is what the reader of a manifest (or sequence file) knows of who
// wrote it.
type Auth string

const (
	// AuthNone: not read from a backup server (made by this process), or
	// read without asking (Decode): trusted, as before keys existed.
	AuthNone Auth = ""
	// AuthOff: read with no key configured: nothing can be authenticated,
	// and everything is trusted as before keys existed.
	AuthOff Auth = "off"
	// AuthSigned: its signature verifies under a configured key.
	AuthSigned Auth = "signed"
	// AuthUnsigned: a key is configured and it carries no signature:
	// written before keys were configured, or by anyone who can write the
	// share.
	AuthUnsigned Auth = "unsigned"
	// AuthInvalid: its signature verifies under no configured key: it was
	// changed after it was signed, or signed with a key no longer
	// configured.
	AuthInvalid Auth = "invalid"
)

// Trusted reports whether what was read may steer the product: always
// without keys, and with keys only when signed.
func (a Auth) Trusted() bool { return a == AuthNone || a == AuthOff || a == AuthSigned }

// Why says, for messages, why an untrusted manifest is not trusted.
func (a Auth) Why() string {
	switch a {
	case AuthUnsigned:
		return "it carries no signature (written before manifest keys were configured, or by someone else)"
	case AuthInvalid:
		return "its signature verifies under none of the configured manifest keys (changed after it was signed, or signed with a key no longer configured)"
	}
	return "it is trusted"
}

// Trusted reports whether m may steer retention, status, the plan and
// ownership (Auth.Trusted).
func (m *Manifest) Trusted() bool { return m.Auth.Trusted() }

// Authenticate sets m.Auth: whether m's signature verifies under keys (a
// manifest as decoded from its file).
func (k *Keys) Authenticate(m *Manifest) {
	if k == nil || m.Signature == nil {
		m.Auth = k.Verify(purposeManifest, nil, m.Signature)
		return
	}
	body, err := marshal(unsigned(m))
	if err != nil {
		m.Auth = AuthInvalid
		return
	}
	m.Auth = k.Verify(purposeManifest, body, m.Signature)
}

// DecodeWith is Decode, the result authenticated with keys (m.Auth).
func DecodeWith(data []byte, keys *Keys) (*Manifest, error) {
	m, err := Decode(data)
	if err != nil {
		return nil, err
	}
	keys.Authenticate(m)
	return m, nil
}

// unsigned is a copy of m without its signature: what the signature
// covers.
func unsigned(m *Manifest) *Manifest {
	out := *m
	out.Signature = nil
	return &out
}
