package catalog

import "time"

// ImmutableState is how a verified set's copy to an object store ended.
type ImmutableState string

const (
	// ImmutableCopied: every stripe and the manifest are on the object
	// store, each read back with the set's SHA-256 and locked until
	// RetainUntil.
	ImmutableCopied ImmutableState = "copied"
	// ImmutableFailed: the copy did not finish (Error says why); the set
	// is as verified as before.
	ImmutableFailed ImmutableState = "failed"
	// ImmutableNotImmutable: the target's probe found that a locked
	// object can be deleted or overwritten there with the worker's own
	// credentials; nothing of the set was copied.
	ImmutableNotImmutable ImmutableState = "not_immutable"
)

// ImmutableCopy is a verified set's copy on an object store with Object
// Lock, as the cycle that made it recorded it.
type ImmutableCopy struct {
	Server   string         `json:"server"`   // the kind: s3 backup server
	Location string         `json:"location"` // s3://host/bucket/prefix
	State    ImmutableState `json:"state"`
	At       time.Time      `json:"at"` // the worker's clock when it ended
	// Mode and RetainUntil are the lock every object was written with.
	Mode        string    `json:"mode,omitempty"`
	RetainUntil time.Time `json:"retain_until,omitzero"`
	// Objects are the stripes, then the manifest, as the store holds them.
	Objects []ImmutableObject `json:"objects,omitempty"`
	// Probe is the newest immutability probe of the target when the copy
	// ran.
	Probe *ImmutableProbe `json:"probe,omitempty"`
	Error string          `json:"error,omitempty"`
}

// ImmutableObject is one object of the copy: its version and the SHA-256
// it read back with (hex).
type ImmutableObject struct {
	Name      string `json:"name"`
	VersionID string `json:"version_id"`
	SHA256    string `json:"sha256"`
	Size      int64  `json:"size"`
}

// ImmutableProbe is the verdict of a target's immutability probe.
type ImmutableProbe struct {
	At        time.Time `json:"at"`
	Immutable bool      `json:"immutable"`
	Summary   string    `json:"summary"`
}
