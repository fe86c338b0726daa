package status

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/storage/location"
	"github.com/backupcycle/backupcycle/internal/storage/s3"
)

// ObjectStore is what is known of a kind: s3 backup server's
// immutability: its newest probe, read from the store itself, else from
// the newest record a copy left in the manifests.
type ObjectStore struct {
	Name     string `json:"name"`
	Location string `json:"location,omitempty"`
	// Probed is false when no probe result was found: no copy went there
	// yet.
	Probed    bool      `json:"probed"`
	ProbedAt  time.Time `json:"probed_at,omitzero"`
	Immutable bool      `json:"immutable"`
	Verdict   string    `json:"verdict,omitempty"`
	// Error says why the store's own record could not be read (the
	// manifests' newest record is shown instead, if any).
	Error string `json:"error,omitempty"`
}

// NotImmutable reports a store whose newest probe found that a locked
// object can be deleted, shortened or overwritten there.
func (o ObjectStore) NotImmutable() bool { return o.Probed && !o.Immutable }

// Immutable is a verified set's immutable copy, as its manifest records it.
type Immutable struct {
	Server      string    `json:"server"`
	State       string    `json:"state"` // copied, failed, not_immutable
	At          time.Time `json:"at"`
	Mode        string    `json:"mode,omitempty"`
	RetainUntil time.Time `json:"retain_until,omitzero"`
	Objects     int       `json:"objects,omitempty"`
	Error       string    `json:"error,omitempty"`
}

func immutableOf(m *catalog.Manifest) *Immutable {
	r := m.Immutable
	if r == nil {
		return nil
	}
	return &Immutable{Server: r.Server, State: string(r.State), At: r.At, Mode: r.Mode, RetainUntil: r.RetainUntil, Objects: len(r.Objects), Error: r.Error}
}

// OpenStoreFunc opens a kind: s3 backup server's bucket.
type OpenStoreFunc func(ctx context.Context, srv *config.BackupServer) (*s3.Store, error)

// loadObjectStores reads the newest probe of each of c's object stores
// (open nil: location.OpenObjectStore); where the store cannot be read
// or holds no record, the newest probe the manifests in found recorded.
func loadObjectStores(ctx context.Context, c *config.Config, open OpenStoreFunc, found []Found) []ObjectStore {
	if open == nil {
		open = func(ctx context.Context, srv *config.BackupServer) (*s3.Store, error) {
			return location.OpenObjectStore(ctx, srv, s3.Lock{})
		}
	}
	recorded := map[string]*catalog.ImmutableCopy{}
	for _, f := range found {
		if m := f.Manifest; m != nil && m.Trusted() && m.Immutable != nil && m.Immutable.Probe != nil {
			if r := recorded[m.Immutable.Server]; r == nil || m.Immutable.Probe.At.After(r.Probe.At) {
				recorded[m.Immutable.Server] = m.Immutable
			}
		}
	}
	var out []ObjectStore
	for i := range c.BackupServers {
		srv := &c.BackupServers[i]
		if !srv.IsObjectStore() {
			continue
		}
		o := ObjectStore{Name: srv.Name}
		st, err := open(ctx, srv)
		if err == nil {
			o.Location = st.Location()
			var res s3.ProbeResult
			if res, err = st.ReadProbeRecord(ctx); err == nil {
				o.Probed, o.ProbedAt, o.Immutable, o.Verdict = true, res.At, res.Immutable, res.Summary()
			}
			st.Close()
		}
		if err != nil {
			o.Error = err.Error()
		}
		if r := recorded[srv.Name]; r != nil && (!o.Probed || r.Probe.At.After(o.ProbedAt)) {
			o.Probed, o.ProbedAt, o.Immutable, o.Verdict = true, r.Probe.At, r.Probe.Immutable, r.Probe.Summary
			if o.Location == "" {
				o.Location = r.Location
			}
		}
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// judgeImmutable marks the databases whose immutable_copy is an object
// store found not immutable out of their objectives.
func judgeImmutable(dbs []Database, stores []ObjectStore) {
	bad := map[string]ObjectStore{}
	for _, o := range stores {
		if o.NotImmutable() {
			bad[o.Name] = o
		}
	}
	for i := range dbs {
		d := &dbs[i]
		if o, ok := bad[d.ImmutableCopy]; ok && d.ImmutableCopy != "" {
			d.Reasons = append(d.Reasons, fmt.Sprintf("its immutable_copy %s is NOT immutable (probed %s): %s",
				o.Name, o.ProbedAt.UTC().Format(time.RFC3339), o.Verdict))
			d.OutOfObjectives = true
		}
	}
}

// judgeImmutableCopies holds every verified full the backup servers still
// keep to its immutable copy once it has been verified for longer than
// immutable_within: copied to the database's immutable_copy and locked
// until the set's retention ends (verified + keep_verified x rpo) and
// beyond now. Each set that is not adds a reason "immutable copy of set
// <seq> (verified <age> ago, immutable_within <d>) on <store>: <why>",
// oldest set first. ImmutableWaitingSince is the oldest such set's
// verification, of any age: how long a copy has been waited for.
func judgeImmutableCopies(now time.Time, d *Database, trusted map[setID]*set) {
	var kept []*catalog.Manifest
	for _, s := range trusted {
		m := s.best
		if m.State != catalog.StateVerified || m.IsDifferential() {
			continue // a differential is not copied; its full is
		}
		kept = append(kept, m)
	}
	sort.Slice(kept, func(i, j int) bool { return kept[j].Newer(kept[i]) })
	for _, m := range kept {
		why := immutableMissing(now, d, m)
		if why == "" {
			continue
		}
		at := verifiedAt(m)
		if d.ImmutableWaitingSince.IsZero() || at.Before(d.ImmutableWaitingSince) {
			d.ImmutableWaitingSince = at
		}
		if now.Sub(at) > time.Duration(d.ImmutableWithin) {
			d.ImmutableMissing = append(d.ImmutableMissing, m.Sequence)
			d.Reasons = append(d.Reasons, fmt.Sprintf("immutable copy of set %d (verified %s ago, immutable_within %s) on %s: %s",
				m.Sequence, Duration(now.Sub(at).Truncate(time.Minute)), d.ImmutableWithin, d.ImmutableCopy, why))
		}
	}
}

// verifiedAt is when the set was verified (its last update for a manifest
// that predates recording it).
func verifiedAt(m *catalog.Manifest) time.Time {
	if at := m.VerifiedAt(); !at.IsZero() {
		return at
	}
	return m.UpdatedAt
}

// immutableMissing says why the set's immutable copy, as its manifest
// records it, does not count; "" when it does.
func immutableMissing(now time.Time, d *Database, m *catalog.Manifest) string {
	r := m.Immutable
	stamp := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	switch {
	case r == nil:
		return "never made (no copy is recorded in its manifest)"
	case r.Server != d.ImmutableCopy:
		return fmt.Sprintf("the copy recorded is on %s (%s), not on the immutable_copy", r.Server, r.State)
	case r.State == catalog.ImmutableFailed:
		return fmt.Sprintf("failed at %s: %s", stamp(r.At), r.Error)
	case r.State == catalog.ImmutableNotImmutable:
		return fmt.Sprintf("not made, the store found not immutable at %s: %s", stamp(r.At), r.Error)
	case r.State != catalog.ImmutableCopied:
		return fmt.Sprintf("recorded as %q", r.State)
	}
	if until := verifiedAt(m).Add(time.Duration(d.SetKept)); r.RetainUntil.Before(until) {
		return fmt.Sprintf("its lock ends %s, before the set's retention does (%s: verified + keep_verified x rpo %s)",
			stamp(r.RetainUntil), stamp(until), d.SetKept)
	}
	if !r.RetainUntil.After(now) {
		return fmt.Sprintf("its lock ended %s and the backup servers still keep the set", stamp(r.RetainUntil))
	}
	return ""
}
