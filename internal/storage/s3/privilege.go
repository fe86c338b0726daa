package s3

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/backupcycle/backupcycle/internal/storage"
)

// PrivilegeCheck is one right beyond the product's needs that Privileges
// tried with the store's own credentials.
type PrivilegeCheck struct {
	Name string `json:"name"`
	// Excess: the server let the credentials do it.
	Excess bool `json:"excess"`
	// Checked is false when the check could not be made without changing
	// anything (Detail says why): no verdict.
	Checked bool   `json:"checked"`
	Detail  string `json:"detail"`
}

// Says is what an excess check says of the key (access, its id): what it
// may do that it should not, and the server's answer that shows it.
func (p PrivilegeCheck) Says(access string) string {
	return "the key " + access + " may " + p.Name + ": " + p.Detail
}

// Fix is what takes an excess right away from the worker's key.
func (p PrivilegeCheck) Fix() string {
	return "deny " + PrivilegeAction(p.Name) + " to the worker's user in the bucket policy"
}

// PrivilegeAction is the bucket policy action behind a privilege check.
func PrivilegeAction(check string) string {
	switch check {
	case PrivilegeDeleteBucket:
		return "s3:DeleteBucket"
	case PrivilegeBypass:
		return "s3:BypassGovernanceRetention"
	case PrivilegeLockConfig:
		return "s3:PutBucketObjectLockConfiguration"
	case PrivilegeBucketPolicy:
		return "s3:PutBucketPolicy and s3:DeleteBucketPolicy"
	}
	return check
}

// Names of the privilege checks.
const (
	PrivilegeDeleteBucket   = "delete the bucket"
	PrivilegeBypass         = "bypass governance retention"
	PrivilegeLockConfig     = "change the bucket's Object Lock configuration"
	PrivilegeBucketPolicy   = "change the bucket policy"
	privilegeObjectTemplate = "%s/%s-%s.privilege"
)

// Privileges tries, with the store's own credentials and without changing
// anything a backup rests on, what the worker's key must not be able to
// do on the bucket (its policy's Deny list, README "Immutable copies on
// object storage"):
//   - delete the bucket: DeleteBucket while the bucket holds a locked
//     version just written: S3 authorizes the request before it looks at
//     the content, so AccessDenied means the key may not, and
//     BucketNotEmpty that only the content kept the bucket
//     ("DeleteBucket", Amazon S3 API Reference: all objects, versions and
//     delete markers must be deleted first);
//   - bypass governance retention: deleting that version, locked in
//     GOVERNANCE mode, with x-amz-bypass-governance-retention; whether
//     the worker's lock mode is governance or not, a key with
//     s3:BypassGovernanceRetention removes governance-locked versions;
//   - change the Object Lock configuration: PutObjectLockConfiguration
//     with the configuration GetObjectLockConfiguration returned, the
//     same, so nothing changes when it is accepted;
//   - change the bucket policy: PutBucketPolicy with the very policy
//     GetBucketPolicy returned.
//
// The version it writes stays until its ProbeLock ends (the bucket's
// lifecycle rule removes it then), as the probe's do. An error means the
// server could not be asked (unreachable): no verdict.
func (s *Store) Privileges(ctx context.Context) ([]PrivilegeCheck, error) {
	var out []PrivilegeCheck
	add := func(name string, checked, excess bool, format string, args ...any) {
		out = append(out, PrivilegeCheck{Name: name, Checked: checked, Excess: excess, Detail: fmt.Sprintf(format, args...)})
	}
	// answer sorts a request's outcome: accepted, refused by the server
	// (its code), or an outage.
	answer := func(err error) (accepted bool, code string, outage error) {
		switch {
		case err == nil:
			return true, "", nil
		case refused(err):
			return false, refusal(err), nil
		}
		return false, "", s.err("privileges", "", err)
	}

	var tag [6]byte
	_, _ = rand.Read(tag[:])
	start := time.Now().UTC()
	name := fmt.Sprintf(privilegeObjectTemplate, ProbeDir, start.Format("20060102T150405Z"), hex.EncodeToString(tag[:]))
	lock := Lock{Mode: ModeGovernance, Until: start.Add(ProbeLock).Truncate(time.Second)}
	obj, err := s.Put(ctx, name, []byte("backupcycle privilege check "+name+"\n"), lock, true)
	locked := false
	switch {
	case err == nil && obj.VersionID != "" && obj.VersionID != "null":
		kept, rerr := s.Retention(ctx, name, obj.VersionID)
		if rerr != nil && !errors.Is(rerr, storage.ErrNotFound) {
			return out, rerr
		}
		locked = rerr == nil && kept.Mode == ModeGovernance && !kept.Until.Before(lock.Until)
	case err != nil && !refused(err):
		return out, err
	}
	if !locked {
		why := "the server gave it no version or did not keep the lock"
		if err != nil {
			why = refusal(err)
		}
		add(PrivilegeDeleteBucket, false, false, "not checked: it needs a locked version in the bucket, and a GOVERNANCE-locked object could not be written (%s)", why)
		add(PrivilegeBypass, false, false, "not checked: a GOVERNANCE-locked object could not be written (%s)", why)
	} else {
		bucket := s.cfg.Bucket
		ok, code, oerr := answer(func() error {
			_, err := s.client.DeleteBucket(ctx, &awss3.DeleteBucketInput{Bucket: &bucket})
			return err
		}())
		switch {
		case oerr != nil:
			return out, oerr
		case ok:
			// Not with a locked version in it; said plainly should a
			// server ever do it.
			add(PrivilegeDeleteBucket, true, true, "the server deleted the bucket %s although it held a locked version", bucket)
			return out, nil
		case code == "BucketNotEmpty":
			add(PrivilegeDeleteBucket, true, true, "allowed: only the objects in it kept bucket %s (BucketNotEmpty); emptied, it goes", bucket)
		default:
			add(PrivilegeDeleteBucket, true, false, "refused: %s", code)
		}
		ok, code, oerr = answer(func() error {
			_, err := s.client.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: &bucket, Key: aws.String(s.Key(name)),
				VersionId: aws.String(obj.VersionID), BypassGovernanceRetention: aws.Bool(true)})
			return err
		}())
		switch {
		case oerr != nil:
			return out, oerr
		case ok:
			add(PrivilegeBypass, true, true, "allowed: a GOVERNANCE-locked version (%s) was deleted with x-amz-bypass-governance-retention", name)
		default:
			add(PrivilegeBypass, true, false, "refused: %s", code)
		}
	}

	// putBack puts a setting read with the key back unchanged: accepted,
	// the key may change it. whyNot says why a refused read leaves it
	// unchecked.
	putBack := func(check string, readErr error, whyNot func(code string) string, put func() error) error {
		if _, code, oerr := answer(readErr); oerr != nil {
			return oerr
		} else if readErr != nil {
			add(check, false, false, "not checked: %s (%s)", whyNot(code), code)
			return nil
		}
		ok, code, oerr := answer(put())
		switch {
		case oerr != nil:
			return oerr
		case ok:
			add(check, true, true, "allowed: the bucket's own setting was put back unchanged, so another would be accepted too")
		default:
			add(check, true, false, "refused: %s", code)
		}
		return nil
	}
	bucket := s.cfg.Bucket
	lc, err := s.client.GetObjectLockConfiguration(ctx, &awss3.GetObjectLockConfigurationInput{Bucket: &bucket})
	if err := putBack(PrivilegeLockConfig, err, func(string) string {
		return "the key may not read the configuration to put the same one back"
	}, func() error {
		_, err := s.client.PutObjectLockConfiguration(ctx, &awss3.PutObjectLockConfigurationInput{Bucket: &bucket,
			ObjectLockConfiguration: lc.ObjectLockConfiguration})
		return err
	}); err != nil {
		return out, err
	}
	pol, err := s.client.GetBucketPolicy(ctx, &awss3.GetBucketPolicyInput{Bucket: &bucket})
	if err := putBack(PrivilegeBucketPolicy, err, func(code string) string {
		if code == "NoSuchBucketPolicy" {
			return "the bucket has no policy to put back unchanged"
		}
		return "the key may not read the policy to put the same one back"
	}, func() error {
		_, err := s.client.PutBucketPolicy(ctx, &awss3.PutBucketPolicyInput{Bucket: &bucket, Policy: pol.Policy})
		return err
	}); err != nil {
		return out, err
	}
	return out, nil
}
