package config

import (
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/backupcycle/backupcycle/internal/storage/s3"
)

// DefaultPartSize is a kind: s3 server's part_size when not given.
const DefaultPartSize = Size(s3.DefaultPartSize)

// bucketRE is S3's rule for a bucket name ("General purpose bucket naming
// rules", https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html):
// 3-63 lower-case letters, digits, dots and hyphens, a letter or digit at
// both ends.
var bucketRE = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)

// IsObjectStore reports a kind: s3 server.
func (b *BackupServer) IsObjectStore() bool { return b.Kind == KindS3 }

// SecretAccessKey resolves a kind: s3 server's secret access key now.
func (b *BackupServer) SecretAccessKey() (string, error) {
	if b.S3 == nil {
		return "", fmt.Errorf("%w: backup server %s has no s3: section", ErrSecretUnavailable, b.Name)
	}
	v, err := resolveRef(b.S3.SecretAccessKeyEnv, b.S3.SecretAccessKeyFile, "secret_access_key_env", "secret_access_key_file", "the secret access key")
	if err != nil {
		return "", fmt.Errorf("S3 secret access key of backup server %s: %w", b.Name, err)
	}
	return v, nil
}

// ImmutableLock is how long a set's immutable copy is locked:
// retention.immutable_for, else one cycle (rpo) longer than the backup
// servers keep the set (keep_verified x rpo).
func (p *Policy) ImmutableLock() time.Duration {
	if p.Retention.ImmutableFor > 0 {
		return p.Retention.ImmutableFor
	}
	return time.Duration(max(p.Retention.KeepVerified, 1)+1) * p.RPO
}

// DefaultImmutableWithin is how long a verified set may wait for its
// immutable copy when immutable_within is not given: a day, the longest
// an outage of the object store goes unnoticed.
const DefaultImmutableWithin = 24 * time.Hour

// SetKept is how long the backup servers keep a verified set:
// keep_verified newer sets, one per rpo.
func (p *Policy) SetKept() time.Duration {
	return time.Duration(max(p.Retention.KeepVerified, 1)) * p.RPO
}

// ImmutableDeadline is immutable_within: how long after it is verified a
// set must have its immutable copy; not given, DefaultImmutableWithin, or
// half of SetKept when that is shorter (a set deleted before its deadline
// would never be asked for its copy).
func (p *Policy) ImmutableDeadline() time.Duration {
	if p.ImmutableWithin > 0 {
		return p.ImmutableWithin
	}
	return min(DefaultImmutableWithin, p.SetKept()/2)
}

// checkObjectStore checks a kind: s3 server: none of a share's keys, a
// bucket, an endpoint URL, credentials by reference, a lock mode.
func (d *decoder) checkObjectStore(b *BackupServer, path, owner string) {
	for _, k := range []struct {
		key string
		set bool
	}{{"unc_paths", len(b.UNCPaths) > 0}, {"sql_paths", len(b.SQLPaths) > 0}, {"location", b.Location != ""}, {"smb", b.SMB != nil},
		{"verify_instance", b.VerifyInstance != ""}, {"restore_data_dir", b.RestoreDataDir != ""}, {"restore_log_dir", b.RestoreLogDir != ""}} {
		if k.set {
			kp := join(path, k.key)
			d.errf(d.line(kp), kp, "%s: %s is a share's setting; a kind: s3 server is reached through s3: (endpoint, bucket, prefix, credentials): remove %s",
				owner, k.key, k.key)
		}
	}
	sp := join(path, "s3")
	if b.S3 == nil {
		d.errf(d.line(path), sp, "missing required key \"s3\" in %s: a kind: s3 server needs s3: {endpoint, bucket, access_key_id, secret_access_key_env or secret_access_key_file}", owner)
		return
	}
	s := b.S3
	so := owner + ".s3"
	if d.required(s.Bucket, sp, "bucket", so, "the bucket, created with Object Lock enabled") && !bucketRE.MatchString(s.Bucket) {
		kp := join(sp, "bucket")
		d.errf(d.line(kp), kp, "%s: bucket %q is not an S3 bucket name: 3-63 lower-case letters, digits, '.' and '-', starting and ending with a letter or digit", so, s.Bucket)
	}
	if s.Endpoint != "" {
		kp := join(sp, "endpoint")
		u, err := url.Parse(s.Endpoint)
		switch {
		case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "":
			d.errf(d.line(kp), kp, "%s: endpoint %q: use the server's URL, https://host[:port], or leave it out for AWS S3 (with region)", so, s.Endpoint)
		case u.User != nil:
			d.errf(d.line(kp), kp, "%s: endpoint must not hold credentials: give access_key_id and secret_access_key_env or secret_access_key_file", so)
		case u.Scheme == "http" && !LoopbackHost(u.Hostname()):
			d.warnf(d.line(kp), kp, "%s: endpoint %s is plain http: the backup sets and the signed requests cross the network in clear and nothing proves the server is the bucket's: use https (ca_file for a private CA)", so, s.Endpoint)
		}
		if !d.given(join(sp, "path_style")) {
			s.PathStyle = true
		}
		s.Endpoint = strings.TrimSuffix(s.Endpoint, "/")
	}
	if s.Region == "" {
		s.Region = "us-east-1"
	}
	if s.Prefix != "" {
		kp := join(sp, "prefix")
		p := strings.TrimSuffix(s.Prefix, "/")
		if strings.HasPrefix(p, "/") || p == "" || strings.Contains(p, "//") || strings.ContainsAny(p, `\:*?"<>|`) ||
			strings.Contains("/"+p+"/", "/./") || strings.Contains("/"+p+"/", "/../") {
			d.errf(d.line(kp), kp, "%s: prefix %q: use a relative path such as backupcycle/ (no leading /, no empty, . or .. element)", so, s.Prefix)
		}
		s.Prefix = p + "/"
	}
	if d.required(s.AccessKeyID, sp, "access_key_id", so, "the access key id of the worker's S3 user") && strings.ContainsAny(s.AccessKeyID, " \t/+=") && len(s.AccessKeyID) > 30 {
		kp := join(sp, "access_key_id")
		d.errf(d.line(kp), kp, "%s: access_key_id %s", so, pasted("secret access key"))
	}
	d.checkSecretRef(&s.SecretAccessKeyEnv, &s.SecretAccessKeyFile, sp, so, "secret_access_key_env", "secret_access_key_file", "secret access key")
	if s.CAFile != "" {
		cp := join(sp, "ca_file")
		s.CAFile = d.relPath(s.CAFile)
		data, err := os.ReadFile(s.CAFile)
		if err != nil {
			d.errf(d.line(cp), cp, "%s: ca_file: %v", so, err)
		} else if n, err := pemCertificates(data); err != nil || n == 0 {
			d.errf(d.line(cp), cp, "%s: ca_file %s holds no PEM certificate it can use: give the PEM file of the CA that signed the endpoint's certificate", so, s.CAFile)
		}
	}
	switch m := strings.ToUpper(s.LockMode); m {
	case "":
		s.LockMode = LockCompliance
	case LockCompliance, LockGovernance:
		s.LockMode = m
	default:
		kp := join(sp, "lock_mode")
		d.errf(d.line(kp), kp, "%s: lock_mode %q: use compliance (nobody can delete a locked version before its lock ends) or governance", so, s.LockMode)
	}
	d.checkPartSize(s, sp, so)
}

// checkPartSize holds part_size to S3's multipart limits: parts of 5 MiB
// to 5 GiB (only the last may be smaller).
func (d *decoder) checkPartSize(s *S3, sp, so string) {
	kp := join(sp, "part_size")
	switch {
	case !d.given(kp):
		s.PartSize = DefaultPartSize
	case s.PartSize < s3.MinPartSize:
		d.errf(d.line(kp), kp, "%s: part_size %s is below the %s S3 takes for every part but the last: use at least %s, or leave it out for %s",
			so, s.PartSize, Size(s3.MinPartSize), Size(s3.MinPartSize), DefaultPartSize)
	case s.PartSize > s3.MaxPartSize:
		d.errf(d.line(kp), kp, "%s: part_size %s is above the %s S3 takes for a part: use at most %s, or leave it out for %s",
			so, s.PartSize, Size(s3.MaxPartSize), Size(s3.MaxPartSize), DefaultPartSize)
	}
}

// checkImmutableCopies checks every immutable_copy (defaults' and each
// database's, as inherited): it names a kind: s3 server, and the lock
// outlasts the time the backup servers keep a set.
func (d *decoder) checkImmutableCopies(c *Config, servers map[string]*BackupServer) {
	check := func(p *Policy, path, owner string, own bool) {
		kp := join(path, "immutable_copy")
		if p.ImmutableCopy != "" && (own || path == "defaults") {
			switch s := servers[p.ImmutableCopy]; {
			case s == nil:
				d.errf(d.line(kp), kp, "%s: immutable_copy %q is not defined in backup_servers (defined: %s)", owner, p.ImmutableCopy, keys(servers))
			case !s.IsObjectStore():
				d.errf(d.line(kp), kp, "%s: immutable_copy %q is a share, not an object store: name a backup server of kind: s3", owner, p.ImmutableCopy)
			}
		}
		d.checkImmutableWithin(p, path, owner, own || path == "defaults")
		ip := join(path, "retention.immutable_for")
		if !d.given(ip) {
			return
		}
		keep := p.SetKept()
		if p.Retention.ImmutableFor <= 0 {
			d.errf(d.line(ip), ip, "%s: retention.immutable_for must be positive, e.g. 35d", owner)
		} else if p.Retention.ImmutableFor < keep {
			d.errf(d.line(ip), ip, "%s: retention.immutable_for %s is shorter than the %s the backup servers keep a set (keep_verified %d x rpo %s): the immutable copy would be unlocked first; raise it",
				owner, p.Retention.ImmutableFor, keep, p.Retention.KeepVerified, p.RPO)
		}
	}
	check(&c.Defaults, "defaults", "defaults", true)
	for i := range c.Databases {
		path := fmt.Sprintf("databases[%d]", i)
		check(&c.Databases[i].Policy, path, labelled(path, c.Databases[i].Name), d.given(join(path, "immutable_copy")))
	}
}

// checkImmutableWithin checks immutable_within as the policy at path uses
// it: positive, and shorter than the time the backup servers keep a set
// (which the lock outlasts): a set retention deletes before its copy is
// due would never be held to it.
func (d *decoder) checkImmutableWithin(p *Policy, path, owner string, own bool) {
	kp := join(path, "immutable_within")
	given := d.given(kp)
	if !given && !own && !d.given(join(path, "rpo")) && !d.given(join(path, "retention.keep_verified")) {
		return // inherited as it is: judged under defaults
	}
	switch {
	case p.ImmutableWithin < 0 || given && p.ImmutableWithin == 0:
		d.errf(d.line(kp), kp, "%s: immutable_within must be positive, e.g. 24h: how long a verified set may wait for its copy on the immutable_copy", owner)
	case p.ImmutableWithin > 0 && p.ImmutableCopy == "" && given && path != "defaults":
		d.errf(d.line(kp), kp, "%s: immutable_within without immutable_copy: name the kind: s3 backup server the sets are copied to, or remove immutable_within", owner)
	case p.ImmutableWithin > 0 && p.ImmutableWithin >= p.SetKept():
		line := d.line(kp)
		if !given {
			line = d.line(path)
		}
		d.errf(line, kp, "%s: immutable_within %s is not shorter than the %s the backup servers keep a set (keep_verified %d x rpo %s): "+
			"retention would delete a set before its missing immutable copy turns status red, so nothing would check it; lower it (the default is 24h)",
			owner, p.ImmutableWithin, p.SetKept(), max(p.Retention.KeepVerified, 1), p.RPO)
	}
}
