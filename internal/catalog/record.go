package catalog

import (
	"context"
	"encoding/json"
	"fmt"
)

// The records stored beside the manifests (a chain's parts, the log proof
// record, the drill record) share one encoding: indented JSON with a
// schema version, validated, signed with the manifest keys for the
// record's own purpose (a signature of one kind never passes for another),
// at most MaxChainRecordBytes, decoded strictly and authenticated.

// recordKind names a record type: what messages call it, its signature's
// purpose and the schema version this build writes.
type recordKind struct {
	what    string
	purpose string
	version int
}

// signedRecord is a record type's pointer, with access to the fields the
// shared encoding sets.
type signedRecord[T any] interface {
	*T
	FileName() string
	Validate() error
	seal() (version *int, sig **Signature, auth *Auth)
}

func marshalRecord[T any, P signedRecord[T]](r P, k recordKind) ([]byte, error) {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("%s %s: encode: %w", k.what, r.FileName(), err)
	}
	return append(b, '\n'), nil
}

// encodeRecord validates r and renders it signed with keys (unsigned with
// nil keys); one over MaxChainRecordBytes is refused.
func encodeRecord[T any, P signedRecord[T]](r P, k recordKind, keys *Keys) ([]byte, error) {
	out := P(new(T))
	*out = *r
	version, sig, _ := out.seal()
	*sig, *version = nil, k.version
	if v, ok := any(out).(interface{ schemaVersion() int }); ok {
		*version = v.schemaVersion() // the oldest version that holds it
	}
	if err := out.Validate(); err != nil {
		return nil, err
	}
	b, err := marshalRecord[T](out, k)
	if err == nil && keys != nil {
		*sig = keys.Sign(k.purpose, b)
		b, err = marshalRecord[T](out, k)
	}
	if err != nil {
		return nil, err
	}
	if len(b) > MaxChainRecordBytes {
		return nil, fmt.Errorf("%s %s: %d bytes, more than the %d a record may have", k.what, r.FileName(), len(b), MaxChainRecordBytes)
	}
	return b, nil
}

// decodeRecord parses a record strictly (unknown fields, trailing data, an
// invalid record or one over MaxChainRecordBytes are errors) and
// authenticates it with keys.
func decodeRecord[T any, P signedRecord[T]](data []byte, k recordKind, keys *Keys) (P, error) {
	if len(data) > MaxChainRecordBytes {
		return nil, fmt.Errorf("decode %s: %d bytes, more than the %d a record may have", k.what, len(data), MaxChainRecordBytes)
	}
	r := P(new(T))
	if err := decodeStrict(data, r, k.what, r.FileName); err != nil {
		return nil, err
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	body := P(new(T))
	*body = *r
	_, sig, _ := body.seal()
	*sig = nil
	_, rsig, auth := r.seal()
	if b, err := marshalRecord[T](body, k); err != nil {
		*auth = AuthInvalid
	} else {
		*auth = keys.Verify(k.purpose, b, *rsig)
	}
	return r, nil
}

// saveRecord writes r signed with keys, atomically, as r.FileName().
func saveRecord[T any, P signedRecord[T]](ctx context.Context, fsys FS, r P, k recordKind, keys *Keys) error {
	data, err := encodeRecord[T](r, k, keys)
	if err != nil {
		return err
	}
	return WriteFileAtomic(ctx, fsys, r.FileName(), data)
}

// loadOneRecord reads the single record of its kind of (instance, db) at
// name; a missing one is nil without error, one describing another
// database an error. of gives the instance and database a record names.
func loadOneRecord[T any, P signedRecord[T]](ctx context.Context, fsys FS, keys *Keys, name string, k recordKind,
	instance, db string, of func(P) (string, string)) (P, error) {
	data, err := fsys.ReadFile(ctx, name)
	if IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s %s: %w", k.what, name, err)
	}
	r, err := decodeRecord[T, P](data, k, keys)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if i, d := of(r); i != instance || d != db {
		return nil, fmt.Errorf("%s %s describes %s/%s", k.what, name, i, d)
	}
	return r, nil
}
