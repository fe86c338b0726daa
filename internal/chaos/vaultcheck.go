package chaos

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/status"
)

// vaultObject is one object of a set's immutable copy as its manifest
// recorded it, and what the checker expects of it.
type vaultObject struct {
	Set     setKey
	Name    string // the set's file name (stripe or manifest)
	Version string
	SHA256  string    // lower-case hex, the set's manifest's (a stripe) or the copy's record (the manifest)
	Mode    string    // the lock mode recorded
	Until   time.Time // the lock the copy recorded
	// MinUntil is how long the lock must last at least: the set's
	// verification plus its database's ImmutableLock.
	MinUntil time.Time
}

// vaultState is what I16 remembers across runs: every object a copy
// recorded (checked while the store keeps it, after the backup servers
// dropped the set), the versions already hashed (a version's bytes cannot
// change, only go), and the attacks' results to report.
type vaultState struct {
	objects map[string]vaultObject // key|version -> object
	hashed  map[string]bool
	// immRed replaces status.Load's verdict (tests): the reason the
	// product reports the database out of objectives for set seq, "" if
	// it does not.
	immRed func(ctx context.Context, t Target, seq int64) string
	// lockOf replaces the configuration's ImmutableLock (tests).
	lockOf func(t Target) time.Duration
	// within replaces ImmutableWithin (tests); enforced says whether the
	// product knows immutable_within (else a missing copy is a note).
	within   time.Duration
	enforced *bool
	// attacks counts the worker's requests against locked versions, and
	// how many the store refused.
	attacks, refused int
}

func (v *vaultState) init() {
	if v.objects == nil {
		v.objects, v.hashed = map[string]vaultObject{}, map[string]bool{}
	}
}

func (c *Checker) vaultWithin() (time.Duration, bool) {
	w := ImmutableWithin
	if c.vault.within > 0 {
		w = c.vault.within
	}
	if c.vault.enforced != nil {
		return w, *c.vault.enforced
	}
	return w, c.f.immWithinOn
}

func (c *Checker) immutableLock(t Target) time.Duration {
	if c.vault.lockOf != nil {
		return c.vault.lockOf(t)
	}
	if c.f.Cfg == nil {
		return 0
	}
	db, err := c.f.Cfg.Database(t.Instance, t.Database)
	if err != nil {
		return 0
	}
	return db.ImmutableLock()
}

// immutableRed is the reason status.Load gives for t being out of its
// objectives because set seq has no immutable copy ("" if none does).
func (c *Checker) immutableRed(ctx context.Context, t Target, seq int64) string {
	if c.vault.immRed != nil {
		return c.vault.immRed(ctx, t, seq)
	}
	rep := status.Load(ctx, c.f.Cfg, nil, time.Now())
	for _, d := range rep.Databases {
		if !d.OutOfObjectives || !strings.EqualFold(d.Instance, t.Instance) || !strings.EqualFold(d.Database, t.Database) {
			continue
		}
		if r := immutableReason(d.Reasons, seq); r != "" {
			return r
		}
	}
	return ""
}

// immutableReason is the reason among rs naming the immutable copy and set
// seq.
func immutableReason(rs []string, seq int64) string {
	re := regexp.MustCompile(fmt.Sprintf(`(?i)\bset %d\b`, seq))
	for _, r := range rs {
		if strings.Contains(strings.ToLower(r), "immutable copy") && re.MatchString(r) {
			return r
		}
	}
	return ""
}

// I16: every verified set of a database with immutable_copy older than
// ImmutableWithin is on vault01, each of its objects under a lock of the
// recorded mode lasting at least its database's ImmutableLock from its
// verification, byte-identical (SHA-256) to the set's manifest; or status
// reports the database out of objectives naming the immutable copy and
// the set. An object a copy recorded stays checked after the backup
// servers dropped its set: the lock outlasts their retention.
func (c *Checker) checkI16(ctx context.Context, files []manifestFile, add addFunc) Notes {
	v := c.f.vault
	if v == nil {
		return nil
	}
	c.vault.init()
	var notes Notes
	within, enforced := c.vaultWithin()
	now := time.Now()
	// One manifest per verified set, the one recording a copy if any.
	sets := map[setKey]manifestFile{}
	for _, mf := range files {
		if mf.M.State != catalog.StateVerified {
			continue
		}
		if _, ok := immutableTarget(mf.ID.Instance, mf.ID.Database); !ok {
			continue
		}
		prev, seen := sets[mf.ID.setKey]
		if !seen || copied(mf.M) && !copied(prev.M) {
			sets[mf.ID.setKey] = mf
		}
	}
	keys := make([]setKey, 0, len(sets))
	for k := range sets {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return fmt.Sprint(keys[i]) < fmt.Sprint(keys[j]) })
	for _, k := range keys {
		mf := sets[k]
		t, _ := immutableTarget(k.Instance, k.Database)
		if copied(mf.M) {
			c.rememberCopy(t, mf)
			continue
		}
		verifiedAt := mf.M.VerifiedAt()
		if verifiedAt.IsZero() || now.Sub(verifiedAt) < within {
			continue
		}
		// No copy recorded: one may still be there (the record lost to a
		// fault after the upload).
		missing, err := c.setInVault(ctx, v, t, mf)
		if err != nil {
			notes = append(notes, fmt.Sprintf("I16: cannot read %s for %s seq %d: %v", Vault01, t, k.Sequence, err))
			continue
		}
		if missing == "" {
			continue
		}
		rec := "no copy recorded"
		if r := mf.M.Immutable; r != nil {
			rec = fmt.Sprintf("copy %s: %s", r.State, short(firstLine(r.Error)))
		}
		if reason := c.immutableRed(ctx, t, k.Sequence); reason != "" {
			continue
		}
		if !enforced {
			notes = append(notes, fmt.Sprintf("I16 (not enforced: the configuration has no immutable_within): %s seq %d verified %s ago is not on %s (%s; %s)",
				t, k.Sequence, now.Sub(verifiedAt).Round(time.Second), Vault01, missing, rec))
			continue
		}
		add(16, fmt.Sprintf("missing|%v", k), "%s seq %d verified %s ago (immutable_within %s) is not on %s (%s; %s) and status does not report %s out of its objectives for its immutable copy",
			t, k.Sequence, now.Sub(verifiedAt).Round(time.Second), within, Vault01, missing, rec, t)
	}
	notes = append(notes, c.checkVaultObjects(ctx, v, add)...)
	return notes
}

func copied(m *catalog.Manifest) bool {
	return m.Immutable != nil && m.Immutable.State == catalog.ImmutableCopied
}

// rememberCopy records the objects a copy recorded, with what each must
// be: a stripe the SHA-256 of the set's manifest, the manifest what the
// copy read back.
func (c *Checker) rememberCopy(t Target, mf manifestFile) {
	r := mf.M.Immutable
	want := map[string]string{}
	for _, s := range mf.M.Stripes {
		want[s.Name] = strings.ToLower(s.SHA256)
	}
	minUntil := mf.M.VerifiedAt().Add(c.immutableLock(t)).Add(-time.Second)
	for _, o := range r.Objects {
		vo := vaultObject{Set: mf.ID.setKey, Name: o.Name, Version: o.VersionID, SHA256: strings.ToLower(o.SHA256), Mode: r.Mode, Until: r.RetainUntil, MinUntil: minUntil}
		if sum, ok := want[o.Name]; ok {
			vo.SHA256 = sum
		}
		key := o.Name + "|" + o.VersionID
		if _, ok := c.vault.objects[key]; !ok {
			c.vault.objects[key] = vo
		}
	}
}

// checkVaultObjects reads every recorded object with the root user: there
// under its version, locked (mode, retain-until), its bytes the set's.
func (c *Checker) checkVaultObjects(ctx context.Context, v *Vault, add addFunc) Notes {
	var notes Notes
	cl := v.adminClient()
	for _, k := range slices.Sorted(maps.Keys(c.vault.objects)) {
		o := c.vault.objects[k]
		what := fmt.Sprintf("%s/%s seq %d object %s version %s", o.Set.Instance, o.Set.Database, o.Set.Sequence, o.Name, o.Version)
		key := vaultPrefix + o.Name
		if o.Version == "" {
			add(16, "noversion|"+k, "%s: the copy recorded no version (a later write of the name would hide it)", what)
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		ret, err := cl.GetObjectRetention(rctx, &awss3.GetObjectRetentionInput{Bucket: aws.String(vaultBucket), Key: &key, VersionId: aws.String(o.Version)})
		cancel()
		if err != nil {
			notes = append(notes, goneOrNote(add, k, "the lock of "+what, err)...)
			continue
		}
		var mode string
		var until time.Time
		if ret.Retention != nil {
			mode, until = string(ret.Retention.Mode), aws.ToTime(ret.Retention.RetainUntilDate)
		}
		switch {
		case !strings.EqualFold(mode, config.LockCompliance) || !strings.EqualFold(mode, o.Mode):
			add(16, "mode|"+k, "%s is locked in mode %q, the copy recorded %q (the configuration: %s)", what, mode, o.Mode, config.LockCompliance)
		case until.Before(o.Until):
			add(16, "until|"+k, "%s is locked until %s, before the %s its copy recorded", what, until.UTC().Format(time.RFC3339), o.Until.UTC().Format(time.RFC3339))
		case until.Before(o.MinUntil):
			add(16, "short|"+k, "%s is locked until %s, before %s (its verification plus the database's immutable lock): it may go before its retention ends",
				what, until.UTC().Format(time.RFC3339), o.MinUntil.UTC().Format(time.RFC3339))
		}
		if c.vault.hashed[k] {
			continue
		}
		sum, err := hashObject(ctx, v, key, o.Version)
		if err != nil {
			notes = append(notes, goneOrNote(add, k, what, err)...)
			continue
		}
		c.vault.hashed[k] = true
		if sum != o.SHA256 {
			add(16, "sha|"+k, "%s has SHA-256 %s on %s, its set's manifest says %s", what, short(sum), Vault01, short(o.SHA256))
		}
	}
	return notes
}

// goneOrNote reports a read of an object that failed: a violation when the
// store says the version is not there, else a note (the store unreadable
// is no finding about the copy).
func goneOrNote(add addFunc, k, what string, err error) Notes {
	if gone(err) {
		add(16, "gone|"+k, "%s is gone from %s (%v)", what, Vault01, firstLine(err.Error()))
		return nil
	}
	return Notes{fmt.Sprintf("I16: cannot read %s: %v", what, firstLine(err.Error()))}
}

// setInVault says what of the set is not on the store under its name
// (newest version, locked, the manifest's SHA-256 for each stripe, a
// manifest naming the same stripes), "" when all of it is.
func (c *Checker) setInVault(ctx context.Context, v *Vault, t Target, mf manifestFile) (string, error) {
	minUntil := mf.M.VerifiedAt().Add(c.immutableLock(t)).Add(-time.Second)
	cl := v.adminClient()
	for _, s := range mf.M.Stripes {
		key := vaultPrefix + s.Name
		hctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		h, err := cl.HeadObject(hctx, &awss3.HeadObjectInput{Bucket: aws.String(vaultBucket), Key: &key})
		cancel()
		if err != nil {
			if gone(err) {
				return "stripe " + s.Name + " missing", nil
			}
			return "", err
		}
		if aws.ToTime(h.ObjectLockRetainUntilDate).Before(minUntil) {
			return "stripe " + s.Name + " not locked long enough", nil
		}
		sum, err := hashObject(ctx, v, key, aws.ToString(h.VersionId))
		if err != nil {
			return "", err
		}
		if sum != strings.ToLower(s.SHA256) {
			return "stripe " + s.Name + " differs", nil
		}
	}
	key := vaultPrefix + mf.M.FileName()
	gctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := cl.GetObject(gctx, &awss3.GetObjectInput{Bucket: aws.String(vaultBucket), Key: &key})
	if err != nil {
		if gone(err) {
			return "manifest missing", nil
		}
		return "", err
	}
	defer out.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(out.Body, MaxManifestRead))
	if err != nil {
		return "", err
	}
	m, err := catalog.DecodeWith(raw, c.f.keys)
	if err != nil || !m.Trusted() || m.Sequence != mf.M.Sequence || len(m.Stripes) != len(mf.M.Stripes) {
		return "manifest differs", nil
	}
	for i := range m.Stripes {
		if m.Stripes[i].Name != mf.M.Stripes[i].Name || !strings.EqualFold(m.Stripes[i].SHA256, mf.M.Stripes[i].SHA256) {
			return "manifest differs", nil
		}
	}
	return "", nil
}

func hashObject(ctx context.Context, v *Vault, key, version string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	in := &awss3.GetObjectInput{Bucket: aws.String(vaultBucket), Key: &key}
	if version != "" {
		in.VersionId = &version
	}
	out, err := v.adminClient().GetObject(ctx, in)
	if err != nil {
		return "", err
	}
	defer out.Body.Close()
	h := sha256.New()
	if _, err := io.Copy(h, out.Body); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// gone reports an S3 answer that the key or version is not there.
func gone(err error) bool {
	var ae interface{ ErrorCode() string }
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "NoSuchKey", "NoSuchVersion", "NotFound", "MethodNotAllowed":
			return true
		}
	}
	return strings.Contains(err.Error(), "StatusCode: 404")
}

func (c *Checker) vaultStats() string {
	v := &c.vault
	s := fmt.Sprintf("%d objects of immutable copies checked on %s (I16), %d requests of the worker's credentials against locked versions, %d refused",
		len(v.objects), Vault01, v.attacks, v.refused)
	if _, on := c.vaultWithin(); !on && c.f.vault != nil {
		s += "; the configuration refused immutable_within: a set missing from " + Vault01 + " was only noted"
	}
	return s
}
