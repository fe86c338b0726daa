package s3

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/backupcycle/backupcycle/internal/storage"
)

// ProbeDir is where the probe writes its objects and its record, under the
// store's prefix.
const ProbeDir = "backupcycle-probe"

// ProbeRecordName is the newest probe's record (each probe a new version).
const ProbeRecordName = ProbeDir + "/last.json"

// ProbeLock is how long a probe object is locked: long enough to outlast
// the probe, short enough to cost nothing.
const ProbeLock = 10 * time.Minute

// ProbeCheck is one thing the probe tried that a locked bucket must refuse
// (or, for the write, accept with the lock).
type ProbeCheck struct {
	Name string `json:"name"`
	// Held: the bucket kept the object as a locked one must.
	Held   bool   `json:"held"`
	Detail string `json:"detail"`
}

// ProbeResult is what one probe found. Immutable only when every check
// held.
type ProbeResult struct {
	At        time.Time     `json:"at"`
	Duration  time.Duration `json:"duration_ns"`
	Location  string        `json:"location"`
	Mode      string        `json:"mode"`
	Immutable bool          `json:"immutable"`
	Checks    []ProbeCheck  `json:"checks"`
	Object    string        `json:"object,omitempty"`
	VersionID string        `json:"version_id,omitempty"`
	// Warnings are rights of the key beyond the worker's needs that do not
	// undo the lock of Mode (AddPrivileges), in preflight's words.
	Warnings []string `json:"warnings,omitempty"`
}

// Failed is the first check that did not hold, for messages.
func (r ProbeResult) Failed() *ProbeCheck {
	for i := range r.Checks {
		if !r.Checks[i].Held {
			return &r.Checks[i]
		}
	}
	return nil
}

// Summary is one line: the verdict and, when not immutable, what was let through.
func (r ProbeResult) Summary() string {
	if r.Immutable {
		key := ""
		if slices.ContainsFunc(r.Checks, func(c ProbeCheck) bool { return strings.HasPrefix(c.Name, PrivilegePrefix) }) {
			key = ", and the key may do no more than the worker needs"
		}
		if len(r.Warnings) > 0 {
			key = "; but " + strings.Join(r.Warnings, "; and ")
		}
		return fmt.Sprintf("immutable: a %s-locked object could not be deleted, its lock shortened or its version overwritten%s (%d checks, %s)",
			r.Mode, key, len(r.Checks), r.Duration.Round(time.Millisecond))
	}
	if f := r.Failed(); f != nil {
		return fmt.Sprintf("NOT immutable: %s: %s", f.Name, f.Detail)
	}
	return "NOT immutable"
}

// Probe checks, with the store's own credentials, that the bucket keeps a
// locked object: it writes a small object locked in mode for ProbeLock,
// then tries to delete that version (plainly and bypassing governance
// mode), to shorten its lock and to overwrite it. A bucket that lets any
// of it through, or that does not keep the lock, is not immutable for
// whoever holds these credentials, which is the case a backup copy there
// must survive. An error means the probe could not finish (the server
// unreachable, say): no verdict.
func (s *Store) Probe(ctx context.Context, mode string) (ProbeResult, error) {
	start := time.Now()
	res := ProbeResult{At: start.UTC(), Location: s.Location(), Mode: mode}
	var tag [6]byte
	_, _ = rand.Read(tag[:])
	name := fmt.Sprintf("%s/%s-%s.probe", ProbeDir, start.UTC().Format("20060102T150405Z"), hex.EncodeToString(tag[:]))
	res.Object = name
	content := []byte("backupcycle immutability probe " + name + "\n")
	lock := Lock{Mode: mode, Until: start.Add(ProbeLock).UTC().Truncate(time.Second)}
	add := func(check string, held bool, format string, args ...any) {
		res.Checks = append(res.Checks, ProbeCheck{Name: check, Held: held, Detail: fmt.Sprintf(format, args...)})
	}
	finish := func() (ProbeResult, error) {
		res.Duration = time.Since(start)
		res.Immutable = res.Failed() == nil
		return res, nil
	}

	obj, err := s.Put(ctx, name, content, lock, true)
	if err != nil {
		if refused(err) {
			add("write a locked object", false, "the server refused an object with a %s lock: %v (the bucket needs Object Lock enabled, which also turns on versioning)", mode, rootCause(err))
			return finish()
		}
		return res, err
	}
	res.VersionID = obj.VersionID
	if obj.VersionID == "" || obj.VersionID == "null" {
		add("write a locked object", false, "the server gave the object no version id: the bucket is not versioned, so an overwrite replaces it")
		return finish()
	}
	kept, err := s.Retention(ctx, name, obj.VersionID)
	if err != nil {
		return res, err
	}
	if kept.Mode != mode || kept.Until.Before(lock.Until) {
		add("write a locked object", false, "the server accepted the object but keeps lock %q until %s, not %s until %s",
			kept.Mode, kept.Until.Format(time.RFC3339), mode, lock.Until.Format(time.RFC3339))
		return finish()
	}
	add("write a locked object", true, "version %s locked %s until %s", obj.VersionID, mode, lock.Until.Format(time.RFC3339))

	// Each attempt, then whether the version still reads as written.
	intact := func() (bool, string, error) {
		r, err := s.OpenVersion(ctx, name, obj.VersionID)
		if errors.Is(err, storage.ErrNotFound) {
			return false, "the version is gone", nil
		}
		if err != nil {
			return false, "", err
		}
		buf := make([]byte, len(content)+1)
		k, err := r.ReadAt(buf, 0)
		if err != nil && !errors.Is(err, io.EOF) {
			return false, "", err
		}
		if !bytes.Equal(buf[:k], content) {
			return false, "the version reads other bytes now", nil
		}
		return true, "", nil
	}
	attempt := func(check string, call func() error) error {
		err := call()
		if err != nil && !refused(err) {
			return err
		}
		ok, why, ierr := intact()
		if ierr != nil {
			return ierr
		}
		switch {
		case err == nil && !ok:
			add(check, false, "the server accepted it: %s", why)
		case !ok:
			add(check, false, "refused (%s), yet %s", refusal(err), why)
		case err == nil:
			add(check, true, "accepted, and the locked version is intact")
		default:
			add(check, true, "refused: %s", refusal(err))
		}
		return nil
	}
	key := aws.String(s.Key(name))
	vid := aws.String(obj.VersionID)
	steps := []struct {
		check string
		call  func() error
	}{
		{"delete the locked version", func() error {
			_, err := s.client.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: &s.cfg.Bucket, Key: key, VersionId: vid})
			return err
		}},
		{"delete the locked version bypassing governance", func() error {
			_, err := s.client.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: &s.cfg.Bucket, Key: key, VersionId: vid,
				BypassGovernanceRetention: aws.Bool(true)})
			return err
		}},
		{"delete it in a batch", func() error {
			out, err := s.client.DeleteObjects(ctx, &awss3.DeleteObjectsInput{Bucket: &s.cfg.Bucket, BypassGovernanceRetention: aws.Bool(true),
				Delete: &types.Delete{Objects: []types.ObjectIdentifier{{Key: key, VersionId: vid}}}})
			if err == nil && len(out.Errors) > 0 {
				code := aws.ToString(out.Errors[0].Code)
				if code == "" {
					code = "refused in the batch: " + aws.ToString(out.Errors[0].Message)
				}
				return &batchRefusal{code: code}
			}
			return err
		}},
		{"overwrite it", func() error {
			_, err := s.Put(ctx, name, []byte("overwritten by the immutability probe\n"), Lock{}, false)
			return err
		}},
	}
	for _, st := range steps {
		if err := attempt(st.check, st.call); err != nil {
			return res, err
		}
	}
	// A shortened lock shows in the version's lock, not its bytes.
	soon := time.Now().Add(2 * time.Second).UTC()
	_, err = s.client.PutObjectRetention(ctx, &awss3.PutObjectRetentionInput{Bucket: &s.cfg.Bucket, Key: key, VersionId: vid,
		BypassGovernanceRetention: aws.Bool(true),
		Retention:                 &types.ObjectLockRetention{Mode: types.ObjectLockRetentionMode(mode), RetainUntilDate: &soon}})
	if err != nil && !refused(err) {
		return res, err
	}
	now, herr := s.Retention(ctx, name, obj.VersionID)
	switch {
	case errors.Is(herr, storage.ErrNotFound):
		add("shorten its lock", false, "the version is gone")
	case herr != nil:
		return res, herr
	case now.Mode != mode || now.Until.Before(lock.Until):
		add("shorten its lock", false, "the server accepted it: the lock is now %q until %s", now.Mode, now.Until.Format(time.RFC3339))
	case err == nil:
		add("shorten its lock", true, "accepted without effect: the lock still ends %s", now.Until.Format(time.RFC3339))
	default:
		add("shorten its lock", true, "refused: %s", refusal(err))
	}
	return finish()
}

// PrivilegePrefix starts the name of a probe check that is a privilege
// check (AddPrivileges).
const PrivilegePrefix = "least privilege: "

// AddPrivileges adds to the probe the privilege checks of the key it ran
// with (access: its id), which took took. A right beyond the worker's needs
// that undoes the lock of the probe's mode is a check that did not hold, in
// preflight's words, and the store is not immutable for it: in GOVERNANCE
// mode, bypassing governance retention, or changing the bucket policy to
// grant it. Any other (deleting an emptied bucket, changing the default
// lock configuration, or any right at all under COMPLIANCE, which no key
// can lift: "Object Lock", Amazon S3 User Guide, Retention modes) leaves
// every copy locked as written: it is a warning, as preflight gives it,
// and the copies go on. A check that could not be made (Checked false) is
// no verdict and holds.
func (r *ProbeResult) AddPrivileges(access string, checks []PrivilegeCheck, took time.Duration) {
	for _, p := range checks {
		c := ProbeCheck{Name: PrivilegePrefix + p.Name, Held: !p.Excess, Detail: p.Detail}
		if p.Excess {
			c.Detail = p.Says(access) + "; " + p.Fix()
			if !UndoesLock(p.Name, r.Mode) {
				c.Held = true
				r.Warnings = append(r.Warnings, c.Detail)
			}
		}
		r.Checks = append(r.Checks, c)
	}
	r.Duration += took
	r.Immutable = r.Failed() == nil
}

// UndoesLock reports whether a key with the right of privilege check name
// can delete or shorten versions locked in mode.
func UndoesLock(name, mode string) bool {
	return mode == ModeGovernance && (name == PrivilegeBypass || name == PrivilegeBucketPolicy)
}

// batchRefusal is a refusal reported inside a successful response.
type batchRefusal struct{ code string }

func (b *batchRefusal) Error() string { return b.code }

// refused reports whether err is the server's answer (an S3 error), not an
// outage: the server looked at the request and said no.
func refused(err error) bool {
	var b *batchRefusal
	if errors.As(err, &b) {
		return true
	}
	if APICode(err) == "" {
		return false
	}
	return !errors.Is(err, storage.ErrConnection)
}

// refusal is the server's code for a refusal.
func refusal(err error) string {
	var b *batchRefusal
	if errors.As(err, &b) {
		return b.code
	}
	return APICode(err)
}

func rootCause(err error) string {
	if c := APICode(err); c != "" {
		var se *storage.Error
		if errors.As(err, &se) && se.Err != nil {
			return se.Err.Error()
		}
		return c
	}
	return err.Error()
}

// WriteProbeRecord keeps res as the newest probe's record on the store (a
// new version of ProbeRecordName, under the bucket's default retention if
// it has one).
func (s *Store) WriteProbeRecord(ctx context.Context, res ProbeResult) error {
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	_, err = s.Put(ctx, ProbeRecordName, b, Lock{}, false)
	return err
}

// ReadProbeRecord returns the newest probe's record; ErrNotFound when no
// probe ran yet.
func (s *Store) ReadProbeRecord(ctx context.Context) (ProbeResult, error) {
	b, err := storage.ReadFile(ctx, s, ProbeRecordName)
	if err != nil {
		return ProbeResult{}, err
	}
	var res ProbeResult
	if err := json.Unmarshal(b, &res); err != nil {
		return ProbeResult{}, &storage.Error{Op: "read", Location: s.Location(), Name: ProbeRecordName, Kind: storage.ErrCorrupt, Err: err}
	}
	return res, nil
}
