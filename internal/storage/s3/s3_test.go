package s3_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/backupcycle/backupcycle/internal/s3test"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/storage/limit"
	"github.com/backupcycle/backupcycle/internal/storage/local"
	"github.com/backupcycle/backupcycle/internal/storage/s3"
	"github.com/backupcycle/backupcycle/internal/storage/storagetest"
)

// raw is a second client of the bucket, for the conformance suite.
type raw struct {
	c              *awss3.Client
	bucket, prefix string
}

func (r raw) Put(t *testing.T, key string, data []byte) {
	t.Helper()
	if _, err := r.c.PutObject(context.Background(), &awss3.PutObjectInput{Bucket: &r.bucket, Key: aws.String(r.prefix + key),
		Body: bytes.NewReader(data)}); err != nil {
		t.Fatalf("raw put %s: %v", key, err)
	}
}

func (r raw) Delete(t *testing.T, key string) {
	t.Helper()
	if _, err := r.c.DeleteObject(context.Background(), &awss3.DeleteObjectInput{Bucket: &r.bucket, Key: aws.String(r.prefix + key)}); err != nil {
		t.Fatalf("raw delete %s: %v", key, err)
	}
}

func TestConformance(t *testing.T) {
	srv := s3test.Start(t)
	ctx := context.Background()
	if err := srv.CreateBucket(ctx, "conformance", true); err != nil {
		t.Fatal(err)
	}
	cfg := srv.Config("conformance", "backupcycle/")
	cfg.Lock = s3.Lock{Mode: s3.ModeCompliance, Until: time.Now().Add(time.Hour)}
	storagetest.Run(t, func(t *testing.T) storage.Storage {
		s, err := s3.Open(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}, storagetest.Options{Secret: srv.RootSecret, ObjectStore: true, Raw: raw{srv.Client(), "conformance", "backupcycle/"}})
}

func TestOpenRefusesAMissingBucketAndBadCredentials(t *testing.T) {
	srv := s3test.Start(t)
	ctx := context.Background()
	_, err := s3.Open(ctx, srv.Config("nosuchbucket", ""))
	if !errors.Is(err, storage.ErrShareNotFound) || storage.IsRetryable(err) || !strings.Contains(err.Error(), "nosuchbucket") {
		t.Errorf("Open of a missing bucket: %v; want a non-retryable ErrShareNotFound naming it", err)
	}
	if err := srv.CreateBucket(ctx, "bkt", true); err != nil {
		t.Fatal(err)
	}
	cfg := srv.Config("bkt", "")
	cfg.SecretAccessKey = "wrong-secret-value"
	_, err = s3.Open(ctx, cfg)
	if err == nil || storage.IsRetryable(err) || strings.Contains(err.Error(), "wrong-secret-value") {
		t.Errorf("Open with a wrong secret: %v; want a non-retryable error without the secret", err)
	}
}

// source is a local directory with one file of n random bytes.
func source(t *testing.T, name string, n int) (storage.Storage, []byte, string) {
	t.Helper()
	dir := t.TempDir()
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(i*7 + i/4093)
	}
	if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := local.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	sum := sha256.Sum256(data)
	return st, data, hex.EncodeToString(sum[:])
}

func lockedStore(t *testing.T, srv *s3test.Server, bucket string) *s3.Store {
	t.Helper()
	ctx := context.Background()
	if err := srv.CreateBucket(ctx, bucket, true); err != nil {
		t.Fatal(err)
	}
	cfg := srv.Config(bucket, "sets/")
	cfg.Lock = s3.Lock{Mode: s3.ModeCompliance, Until: time.Now().Add(time.Hour)}
	st, err := s3.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// stopAfter starts job's upload and stops it once the server holds parts
// of it, returning the last checkpoint with its upload id.
func stopAfter(t *testing.T, st *s3.Store, src storage.Storage, job s3.UploadJob, opts s3.UploadOptions, parts int) s3.UploadProgress {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var last s3.UploadProgress
	opts.Progress = func(p s3.UploadProgress) {
		mu.Lock()
		defer mu.Unlock()
		if p.UploadID != "" {
			last = p
		}
		if len(p.Parts) >= parts {
			cancel()
		}
	}
	if res := st.Upload(ctx, src, job, opts); res.Err == nil {
		t.Fatal("the stopped upload succeeded")
	}
	mu.Lock()
	defer mu.Unlock()
	if last.UploadID == "" || len(last.Parts) < parts {
		t.Fatalf("checkpoint %+v: want an upload id and at least %d parts", last, parts)
	}
	return last
}

// A multipart upload stopped after some parts resumes from the upload id
// of its last checkpoint: the parts the server holds are not sent again,
// and the object is locked, checksummed and reads back as the source.
func TestUploadResumesFromTheCheckpoint(t *testing.T) {
	srv := s3test.Start(t)
	st := lockedStore(t, srv, "resume")
	src, data, sum := source(t, "db_1of2.bak", 41<<20+123)
	opts := s3.UploadOptions{PartSize: s3.MinPartSize, InFlight: 2}
	cp := stopAfter(t, st, src, s3.UploadJob{Src: "db_1of2.bak", Name: "db_1of2.bak", SHA256: sum}, opts, 3)
	if _, err := st.Stat(context.Background(), "db_1of2.bak"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("an unfinished upload is visible: %v", err)
	}
	res := st.Upload(context.Background(), src, s3.UploadJob{Src: "db_1of2.bak", Name: "db_1of2.bak", SHA256: sum, Resume: &cp}, opts)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if res.ResumedParts < 3 || res.BytesSent > int64(len(data))-3*s3.MinPartSize || res.ResumeRejected {
		t.Errorf("resumed %d parts, sent %d of %d bytes, rejected %v: want the checkpoint's parts kept", res.ResumedParts, res.BytesSent, len(data), res.ResumeRejected)
	}
	if !bytes.Equal(s3test.ReadAll(t, st, "db_1of2.bak"), data) {
		t.Fatal("the object reads otherwise than the source")
	}
	h, err := st.Head(context.Background(), "db_1of2.bak", res.VersionID)
	if err != nil {
		t.Fatal(err)
	}
	if h.Lock.Mode != s3.ModeCompliance || h.Lock.Until.IsZero() || !strings.HasSuffix(h.SHA256, "-9") {
		t.Errorf("head %+v: want a COMPLIANCE lock and the composite SHA-256 of 9 parts", h)
	}

	// Once there, the same content is not sent again.
	again := st.Upload(context.Background(), src, s3.UploadJob{Src: "db_1of2.bak", Name: "db_1of2.bak", SHA256: sum}, opts)
	if again.Err != nil || !again.AlreadyThere || again.BytesSent != 0 || again.VersionID != res.VersionID {
		t.Errorf("second upload: %+v; want AlreadyThere, nothing sent, version %s", again, res.VersionID)
	}
}

// A multipart upload whose server is killed while a part is in flight
// resumes, once the server is back on its directory, from the upload id of
// its checkpoint: exactly the parts the server held are not sent again. The
// retry locks for longer (CopyImmutable's lock runs from each attempt's
// start); the upload was created with the first attempt's lock, and the
// object ends up with the retry's.
func TestUploadResumesAfterTheServerIsKilled(t *testing.T) {
	dir := t.TempDir()
	srv, err := s3test.RunAs(dir, "root", "killed-server-secret")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	st := lockedStore(t, srv, "killed")
	src, data, sum := source(t, "db_1of1.bak", 4*s3.MinPartSize+4321)
	job := s3.UploadJob{Src: "db_1of1.bak", Name: "db_1of1.bak", SHA256: sum}
	// Parts one at a time at 10 MiB/s: the third is in flight for half a
	// second after the second is on the server, and the kill lands in it.
	opts := s3.UploadOptions{PartSize: s3.MinPartSize, InFlight: 1, Limit: limit.New(10 << 20)}
	var mu sync.Mutex
	var cp s3.UploadProgress
	killed := make(chan struct{})
	var once sync.Once
	opts.Progress = func(p s3.UploadProgress) {
		mu.Lock()
		defer mu.Unlock()
		if p.UploadID == "" {
			return
		}
		cp = p
		cp.Parts = slices.Clone(p.Parts)
		if len(p.Parts) == 2 {
			once.Do(func() {
				go func() { time.Sleep(100 * time.Millisecond); srv.Kill(); close(killed) }()
			})
		}
	}
	res := st.Upload(context.Background(), src, job, opts)
	if res.Err == nil {
		t.Fatal("the upload went through a killed server")
	}
	<-killed
	mu.Lock()
	held := cp
	mu.Unlock()
	if held.UploadID == "" || len(held.Parts) != 2 {
		t.Fatalf("checkpoint at the kill %+v: want its upload id and the 2 parts done", held)
	}

	srv2, err := s3test.RunAs(dir, "root", "killed-server-secret")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv2.Close)
	cfg := srv2.Config("killed", "sets/")
	cfg.Lock = s3.Lock{Mode: s3.ModeCompliance, Until: time.Now().Add(2 * time.Hour).Truncate(time.Second)}
	st2, err := s3.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	job.Resume = &held
	opts.Progress, opts.Limit = nil, nil
	res = st2.Upload(context.Background(), src, job, opts)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if want := int64(len(data)) - 2*s3.MinPartSize; res.ResumedParts != 2 || res.BytesSent != want || res.ResumeRejected {
		t.Errorf("after the restart: resumed %d parts, sent %d bytes, rejected %v; want the 2 parts held kept and only the other %d bytes sent",
			res.ResumedParts, res.BytesSent, res.ResumeRejected, want)
	}
	if !bytes.Equal(s3test.ReadAll(t, st2, "db_1of1.bak"), data) {
		t.Fatal("the object reads otherwise than the source")
	}
	if h, err := st2.Head(context.Background(), "db_1of1.bak", res.VersionID); err != nil || h.Lock.Mode != s3.ModeCompliance || h.Lock.Until.Before(cfg.Lock.Until) {
		t.Errorf("head %+v, %v: want the retry's COMPLIANCE lock until %s", h, err, cfg.Lock.Until)
	}
	ups, err := srv2.Client().ListMultipartUploads(context.Background(), &awss3.ListMultipartUploadsInput{Bucket: aws.String("killed")})
	if err != nil {
		t.Fatal(err)
	}
	if len(ups.Uploads) != 0 {
		t.Errorf("%d multipart uploads left behind; want the resumed one completed and no other started", len(ups.Uploads))
	}
}

// huge is a source whose files say they are more than S3 takes in one
// object (10,000 parts of 5 GiB).
type huge struct{ storage.Storage }

func (h huge) Stat(ctx context.Context, name string) (storage.FileInfo, error) {
	fi, err := h.Storage.Stat(ctx, name)
	fi.Size = s3.MaxParts*s3.MaxPartSize + 1
	return fi, err
}

// A stripe no part size fits into 10,000 parts is refused before anything
// is sent; one above 10,000 parts of the configured size is sent in larger
// parts (TestUploadResumesFromTheCheckpoint: a smaller one keeps them).
func TestUploadRefusesAStripeAboveTenThousandParts(t *testing.T) {
	srv := s3test.Start(t)
	st := lockedStore(t, srv, "toolarge")
	src, _, sum := source(t, "big.bak", 1000)
	res := st.Upload(context.Background(), huge{src}, s3.UploadJob{Src: "big.bak", Name: "big.bak", SHA256: sum}, s3.UploadOptions{PartSize: s3.MinPartSize})
	if !errors.Is(res.Err, storage.ErrTooLarge) || storage.IsRetryable(res.Err) || !strings.Contains(res.Err.Error(), "big.bak") ||
		!strings.Contains(res.Err.Error(), "more stripes") || res.BytesSent != 0 {
		t.Errorf("upload of %d bytes: %v (sent %d); want a non-retryable ErrTooLarge naming the file and the fix, nothing sent",
			int64(s3.MaxParts*s3.MaxPartSize+1), res.Err, res.BytesSent)
	}
	ups, err := srv.Client().ListMultipartUploads(context.Background(), &awss3.ListMultipartUploadsInput{Bucket: aws.String("toolarge")})
	if err != nil {
		t.Fatal(err)
	}
	if len(ups.Uploads) != 0 {
		t.Errorf("%d multipart uploads started; want none", len(ups.Uploads))
	}
}

// A checkpoint is a hint: parts the server holds are kept only where the
// source hashes as the server recorded them; a part whose source bytes
// differ is sent again.
func TestUploadChecksEveryResumedPart(t *testing.T) {
	srv := s3test.Start(t)
	st := lockedStore(t, srv, "forged")
	src, data, sum := source(t, "x.bak", 4*s3.MinPartSize)
	opts := s3.UploadOptions{PartSize: s3.MinPartSize, InFlight: 1}
	cp := stopAfter(t, st, src, s3.UploadJob{Src: "x.bak", Name: "x.bak", SHA256: sum}, opts, 2)
	// The source's first part changes in place; the checkpoint is made to
	// fit its new modification time.
	changed := bytes.Clone(data)
	changed[10] ^= 0xff
	dir := src.Location()[len("file://"):]
	if err := os.WriteFile(filepath.Join(dir, "x.bak"), changed, 0o644); err != nil {
		t.Fatal(err)
	}
	fi, _ := src.Stat(context.Background(), "x.bak")
	cp.SrcModTime = fi.ModTime.UnixNano()
	nsum := sha256.Sum256(changed)
	res := st.Upload(context.Background(), src, s3.UploadJob{Src: "x.bak", Name: "x.bak", SHA256: hex.EncodeToString(nsum[:]), Resume: &cp}, opts)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if res.ResumedParts != len(cp.Parts)-1 {
		t.Errorf("resumed %d parts of the checkpoint's %d; want all but the changed one", res.ResumedParts, len(cp.Parts))
	}
	if !bytes.Equal(s3test.ReadAll(t, st, "x.bak"), changed) {
		t.Fatal("the object is not the source as it is now")
	}
}

// A source that does not hash as its manifest says is not uploaded:
// nothing appears under the name, and the error says which file.
func TestUploadRefusesASourceThatIsNotTheManifests(t *testing.T) {
	srv := s3test.Start(t)
	st := lockedStore(t, srv, "mismatch")
	for _, n := range []int{1000, 3 * s3.MinPartSize} {
		src, _, _ := source(t, "y.bak", n)
		res := st.Upload(context.Background(), src, s3.UploadJob{Src: "y.bak", Name: fmt.Sprintf("y%d.bak", n), SHA256: strings.Repeat("ab", 32)},
			s3.UploadOptions{PartSize: s3.MinPartSize})
		if !errors.Is(res.Err, storage.ErrCorrupt) || !strings.Contains(res.Err.Error(), "y.bak") {
			t.Errorf("%d bytes: %v; want ErrCorrupt naming the source", n, res.Err)
		}
		if _, err := st.Stat(context.Background(), fmt.Sprintf("y%d.bak", n)); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("%d bytes: an object was written: %v", n, err)
		}
	}
}

// The probe, both ways: a bucket with Object Lock in COMPLIANCE mode keeps
// the probe's object whatever the worker's credentials try; a bucket
// without Object Lock, and GOVERNANCE mode with credentials that may
// bypass it, do not, and say what went through.
func TestProbe(t *testing.T) {
	srv := s3test.Start(t)
	ctx := context.Background()
	for _, b := range []struct {
		name   string
		locked bool
	}{{"worm", true}, {"plain", false}} {
		if err := srv.CreateBucket(ctx, b.name, b.locked); err != nil {
			t.Fatal(err)
		}
	}
	const user, secret = "backupworker", "backupworker-secret-1"
	if err := srv.CreateUser(ctx, user, secret); err != nil {
		t.Fatal(err)
	}
	if err := srv.PutPolicy(ctx, "worm", s3test.WorkerPolicy("worm", user)); err != nil {
		t.Fatal(err)
	}
	open := func(bucket string, asWorker bool) *s3.Store {
		cfg := srv.Config(bucket, "p/")
		if asWorker {
			cfg.AccessKeyID, cfg.SecretAccessKey = user, secret
		}
		st, err := s3.Open(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	for _, tc := range []struct {
		name      string
		bucket    string
		worker    bool
		mode      string
		immutable bool
		failed    string
	}{
		{"compliance", "worm", false, s3.ModeCompliance, true, ""},
		{"governance without bypass permission", "worm", true, s3.ModeGovernance, true, ""},
		{"governance with bypass permission", "worm", false, s3.ModeGovernance, false, "delete the locked version bypassing governance"},
		{"no object lock", "plain", false, s3.ModeCompliance, false, "write a locked object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := open(tc.bucket, tc.worker)
			res, err := st.Probe(ctx, tc.mode)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %s", tc.name, res.Summary())
			for _, c := range res.Checks {
				t.Logf("  %-48s held=%v %s", c.Name, c.Held, c.Detail)
			}
			if res.Immutable != tc.immutable {
				t.Fatalf("Immutable = %v, want %v", res.Immutable, tc.immutable)
			}
			if tc.immutable && len(res.Checks) != 6 {
				t.Errorf("%d checks, want 6", len(res.Checks))
			}
			if !tc.immutable && res.Failed().Name != tc.failed {
				t.Errorf("first failed check %q, want %q", res.Failed().Name, tc.failed)
			}
			if err := st.WriteProbeRecord(ctx, res); err != nil {
				t.Fatal(err)
			}
			rec, err := st.ReadProbeRecord(ctx)
			if err != nil || rec.Immutable != res.Immutable || !rec.At.Equal(res.At) {
				t.Fatalf("probe record: %+v, %v", rec, err)
			}
		})
	}
}

// The bucket's root key may delete the bucket, bypass governance, change
// the lock configuration and the policy; the worker's user under the
// README's policy may do none of it. Nothing a backup rests on changes:
// the bucket, its lock configuration and its policy are the same after.
func TestPrivileges(t *testing.T) {
	srv := s3test.Start(t)
	ctx := context.Background()
	const user, secret = "backupworker", "backupworker-secret-1"
	// Twice: a server restarted on its state keeps bucket, user and policy.
	for range 2 {
		if err := srv.WorkerBucket(ctx, "worm", user, secret); err != nil {
			t.Fatal(err)
		}
	}
	// A default retention, which putting the configuration back must keep.
	if _, err := srv.Client().PutObjectLockConfiguration(ctx, &awss3.PutObjectLockConfigurationInput{Bucket: aws.String("worm"),
		ObjectLockConfiguration: &types.ObjectLockConfiguration{ObjectLockEnabled: types.ObjectLockEnabledEnabled,
			Rule: &types.ObjectLockRule{DefaultRetention: &types.DefaultRetention{Mode: types.ObjectLockRetentionModeGovernance, Days: aws.Int32(1)}}}}); err != nil {
		t.Fatal(err)
	}
	lockConfig := func() string {
		out, err := srv.Client().GetObjectLockConfiguration(ctx, &awss3.GetObjectLockConfigurationInput{Bucket: aws.String("worm")})
		if err != nil {
			t.Fatal(err)
		}
		c := out.ObjectLockConfiguration
		if c == nil || c.Rule == nil || c.Rule.DefaultRetention == nil {
			return fmt.Sprintf("%+v", c)
		}
		r := c.Rule.DefaultRetention
		return fmt.Sprintf("%s %s %d days %d years", c.ObjectLockEnabled, r.Mode, aws.ToInt32(r.Days), aws.ToInt32(r.Years))
	}
	lockBefore := lockConfig()
	for _, tc := range []struct {
		name   string
		worker bool
		excess map[string]bool // check -> excess; absent: not checked
	}{
		{"root key", false, map[string]bool{s3.PrivilegeDeleteBucket: true, s3.PrivilegeBypass: true, s3.PrivilegeLockConfig: true,
			s3.PrivilegeBucketPolicy: true}},
		{"worker under the README's policy", true, map[string]bool{s3.PrivilegeDeleteBucket: false, s3.PrivilegeBypass: false,
			s3.PrivilegeLockConfig: false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := srv.Config("worm", "p/")
			if tc.worker {
				cfg.AccessKeyID, cfg.SecretAccessKey = user, secret
			}
			st, err := s3.Open(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			checks, err := st.Privileges(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(checks) != 4 {
				t.Errorf("%d checks, want 4: %+v", len(checks), checks)
			}
			for _, c := range checks {
				t.Logf("%-48s checked=%v excess=%v %s", c.Name, c.Checked, c.Excess, c.Detail)
				want, checked := tc.excess[c.Name]
				if c.Checked != checked || c.Excess != want {
					t.Errorf("%s: checked %v excess %v, want checked %v excess %v", c.Name, c.Checked, c.Excess, checked, want)
				}
			}
		})
	}
	// Unchanged: the bucket is there with its lock configuration and policy.
	if after := lockConfig(); after != lockBefore || !strings.Contains(after, "GOVERNANCE 1 days") {
		t.Errorf("lock configuration %s, was %s", after, lockBefore)
	}
	pol, err := srv.Client().GetBucketPolicy(ctx, &awss3.GetBucketPolicyInput{Bucket: aws.String("worm")})
	if err != nil || !strings.Contains(aws.ToString(pol.Policy), "s3:BypassGovernanceRetention") {
		t.Fatalf("policy after: %v, %v", pol, err)
	}
}

// An upload cut before its upload id reached a checkpoint (the heartbeat
// that would have carried it never went out) is continued, not left
// behind: without a checkpoint, the uploads in progress under the key are
// listed and the newest whose parts hash as the source is completed with
// its parts kept; an older one of the same bytes is aborted, and one
// holding other bytes (anyone's) stays. Credentials that may not list
// uploads fall back to a new upload, saying why.
func TestUploadAdoptsAnUploadNoCheckpointNamed(t *testing.T) {
	srv := s3test.Start(t)
	st := lockedStore(t, srv, "adopt")
	ctx := context.Background()
	src, data, sum := source(t, "db_1of1.bak", 3*s3.MinPartSize+777)
	job := s3.UploadJob{Src: "db_1of1.bak", Name: "db_1of1.bak", SHA256: sum}
	opts := s3.UploadOptions{PartSize: s3.MinPartSize, InFlight: 1}

	// rawUpload starts an upload of name holding parts (1-based) of data
	// cut at MinPartSize: as an attempt cut before its checkpoint leaves it.
	rawUpload := func(name string, data []byte, parts ...int32) string {
		t.Helper()
		key := aws.String(st.Key(name))
		up, err := srv.Client().CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: aws.String("adopt"), Key: key,
			ChecksumAlgorithm: types.ChecksumAlgorithmSha256})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range parts {
			b := data[int(n-1)*s3.MinPartSize : min(len(data), int(n)*s3.MinPartSize)]
			h := sha256.Sum256(b)
			if _, err := srv.Client().UploadPart(ctx, &awss3.UploadPartInput{Bucket: aws.String("adopt"), Key: key, UploadId: up.UploadId,
				PartNumber: aws.Int32(n), Body: bytes.NewReader(b), ChecksumAlgorithm: types.ChecksumAlgorithmSha256,
				ChecksumSHA256: aws.String(base64.StdEncoding.EncodeToString(h[:]))}); err != nil {
				t.Fatal(err)
			}
		}
		return aws.ToString(up.UploadId)
	}
	inProgress := func() []string {
		t.Helper()
		ups, err := srv.Client().ListMultipartUploads(ctx, &awss3.ListMultipartUploadsInput{Bucket: aws.String("adopt")})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, u := range ups.Uploads {
			ids = append(ids, aws.ToString(u.UploadId))
		}
		return ids
	}

	// Someone else's upload under the key (other bytes), then an attempt
	// cut after its upload was created and one part sent, its checkpoint
	// lost.
	foreign := rawUpload(job.Name, bytes.Repeat([]byte{9}, s3.MinPartSize), 1)
	stopAfter(t, st, src, job, opts, 1)
	if n := len(inProgress()); n != 2 {
		t.Fatalf("%d uploads in progress after the cut, want 2", n)
	}
	res := st.Upload(ctx, src, job, opts)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	t.Logf("retry: adopted %v, %d parts kept, sent %d of %d bytes", res.Adopted, res.ResumedParts, res.BytesSent, len(data))
	if !res.Adopted || res.ResumedParts < 1 || res.BytesSent > int64(len(data))-int64(res.ResumedParts)*s3.MinPartSize || res.UnlistedUploads != "" {
		t.Errorf("%+v: want the cut upload continued with its parts kept", res)
	}
	if !bytes.Equal(s3test.ReadAll(t, st, job.Name), data) {
		t.Fatal("the object reads otherwise than the source")
	}
	if left := inProgress(); !slices.Equal(left, []string{foreign}) {
		t.Errorf("uploads left in progress: %v; want only the one holding other bytes (%s)", left, foreign)
	}

	// Two such uploads of the source's bytes: the newest goes on, the
	// older is aborted.
	job.Name = "db_1of1.again"
	older := rawUpload(job.Name, data, 1)
	time.Sleep(1100 * time.Millisecond) // initiated a second apart
	rawUpload(job.Name, data, 1, 2)
	res = st.Upload(ctx, src, job, opts)
	t.Logf("two cut: adopted %v, %d parts kept, %d aborted", res.Adopted, res.ResumedParts, res.AbortedOwn)
	if res.Err != nil || !res.Adopted || res.ResumedParts != 2 || res.AbortedOwn != 1 {
		t.Errorf("%+v: want the newest upload's 2 parts kept and the older one aborted", res)
	}
	if left := inProgress(); slices.Contains(left, older) || len(left) != 1 {
		t.Errorf("uploads left in progress: %v; want only %s", left, foreign)
	}

	// A key that may not list the uploads: a new upload, and why.
	const user, secret = "backupworker", "backupworker-secret-1"
	if err := srv.CreateUser(ctx, user, secret); err != nil {
		t.Fatal(err)
	}
	pol := strings.Replace(s3test.WorkerPolicy("adopt", user), `"s3:ListBucketMultipartUploads",`, "", 1)
	if pol == s3test.WorkerPolicy("adopt", user) {
		t.Fatal("the worker policy grants no s3:ListBucketMultipartUploads to take away")
	}
	if err := srv.PutPolicy(ctx, "adopt", pol); err != nil {
		t.Fatal(err)
	}
	cfg := srv.Config("adopt", "sets/")
	cfg.AccessKeyID, cfg.SecretAccessKey = user, secret
	cfg.Lock = s3.Lock{Mode: s3.ModeCompliance, Until: time.Now().Add(time.Hour)}
	wst, err := s3.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer wst.Close()
	src2, data2, sum2 := source(t, "db_2of2.bak", 2*s3.MinPartSize+5)
	res = wst.Upload(ctx, src2, s3.UploadJob{Src: "db_2of2.bak", Name: "db_2of2.bak", SHA256: sum2}, opts)
	if res.Err != nil || res.Adopted || !strings.Contains(res.UnlistedUploads, "AccessDenied") || res.BytesSent != int64(len(data2)) {
		t.Errorf("without s3:ListBucketMultipartUploads: %+v; want a new upload, sent whole, and AccessDenied said", res)
	}
}
