package s3

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/storage/copier"
	"github.com/backupcycle/backupcycle/internal/storage/limit"
)

// Multipart limits of S3 ("Amazon S3 multipart upload limits",
// https://docs.aws.amazon.com/AmazonS3/latest/userguide/qfacts.html): parts
// of 5 MiB to 5 GiB (the last may be smaller), at most 10,000 of them.
const (
	MinPartSize     = 5 << 20
	MaxPartSize     = 5 << 30
	MaxParts        = 10000
	DefaultPartSize = 16 << 20
	DefaultInFlight = 4
)

// ErrNotLocked: the server stored an object without the lock it was
// written with. Such a bucket keeps nothing from being deleted.
var ErrNotLocked = errors.New("the server did not keep the object's lock")

// UploadJob is one file to copy into the store.
type UploadJob struct {
	Src  string // name in the source storage
	Name string // object name in the store
	// SHA256 is the hex SHA-256 the source must have (the manifest's): the
	// source is hashed as it is read and nothing is completed unless it
	// matches, and the object read back must have it too.
	SHA256 string
	// Resume is the last UploadProgress an earlier attempt reported for
	// this file, or nil.
	Resume *UploadProgress
	// Lock is the object's retention; the zero Lock takes the store's.
	Lock Lock
}

// UploadProgress is a resumable checkpoint of one file: the multipart
// upload it goes into and the parts the server holds. It is small and
// JSON-serializable for a heartbeat. A resumed attempt trusts none of it:
// the parts are listed on the server (ListParts), and one is kept only when
// the source's bytes hash to the SHA-256 the server recorded for it.
type UploadProgress struct {
	File       string  `json:"file"` // UploadJob.Name
	UploadID   string  `json:"upload_id,omitempty"`
	PartSize   int64   `json:"part_size,omitempty"`
	Size       int64   `json:"size"`
	SrcModTime int64   `json:"src_mtime"`       // Unix ns: ties the upload to one version of the source
	Parts      []int32 `json:"parts,omitempty"` // numbers of the parts the server holds
	BytesSent  int64   `json:"bytes_sent"`      // sent by this attempt
	Checked    int64   `json:"checked,omitempty"`
	VersionID  string  `json:"version_id,omitempty"`
	Done       bool    `json:"done"`
}

// UploadOptions tune Upload; zero values take the defaults.
type UploadOptions struct {
	PartSize int64 // default DefaultPartSize; raised for files over 10,000 parts
	InFlight int   // parts read and sent at once per file; default DefaultInFlight
	Files    int   // files at once (UploadAll); default 2
	// Limit caps what is sent, shared with every upload given it (one per
	// target: concurrent copies share its bandwidth_limit); nil = none.
	Limit *limit.Limiter
	// Progress gets each file's checkpoints; calls are serialized.
	Progress func(UploadProgress)
}

// UploadResult is one file's outcome.
type UploadResult struct {
	Object
	Src       string
	SHA256Hex string // of the content, checked at both ends
	BytesSent int64
	// ResumedParts were kept from an earlier attempt's upload.
	ResumedParts int
	// ResumeRejected: the checkpoint's upload was gone or did not fit the
	// source; the file was sent from the start.
	ResumeRejected bool
	// AlreadyThere: the newest version already held this content (its
	// lock extended when it was shorter).
	AlreadyThere bool
	// Replaced: the newest version held other content; this one is a new
	// version above it (the old one is untouched).
	Replaced bool
	// Adopted: without a checkpoint's upload, an upload of the object
	// left in progress (an attempt cut before it reported its upload id)
	// was continued; AbortedOwn are the older ones holding the source's
	// bytes, aborted. UnlistedUploads says why the uploads in progress
	// could not be listed (the credentials lack
	// s3:ListBucketMultipartUploads): the file went into a new upload.
	Adopted         bool
	AbortedOwn      int
	UnlistedUploads string
	Err             error
}

// UploadAll uploads jobs, opts.Files at a time; results are in job order,
// the error joins the failed files' errors. The first failure stops the
// others (their uploads stay resumable).
func (s *Store) UploadAll(ctx context.Context, src storage.Storage, jobs []UploadJob, opts UploadOptions) ([]UploadResult, error) {
	var mu sync.Mutex
	if p := opts.Progress; p != nil {
		opts.Progress = func(u UploadProgress) { mu.Lock(); defer mu.Unlock(); p(u) }
	}
	files := opts.Files
	if files <= 0 {
		files = 2
	}
	results := make([]UploadResult, len(jobs))
	for i, err := range storage.EachFile(ctx, len(jobs), files, func(ctx context.Context, i int) error {
		results[i] = s.Upload(ctx, src, jobs[i], opts)
		return results[i].Err
	}) {
		if results[i].Src == "" { // never started
			results[i] = UploadResult{Src: jobs[i].Src, Object: Object{Name: jobs[i].Name}, Err: err}
		}
	}
	var errs []error
	for _, r := range results {
		if r.Err != nil {
			errs = append(errs, fmt.Errorf("upload %s %q to %s %q: %w", src.Location(), r.Src, s.Location(), r.Name, r.Err))
		}
	}
	return results, errors.Join(errs...)
}

// Upload copies one file from src into the store: a single put up to the
// part size, a multipart upload above it, each part's SHA-256 checked by
// the server; then the object is read back and must hash as the source
// did, and carry its lock. A name that already holds the same content is
// not sent again.
func (s *Store) Upload(ctx context.Context, src storage.Storage, job UploadJob, opts UploadOptions) (res UploadResult) {
	res = UploadResult{Src: job.Src, Object: Object{Name: job.Name}}
	u := &upload{s: s, src: src, job: job, opts: opts}
	if u.job.Lock.IsZero() {
		u.job.Lock = s.cfg.Lock
	}
	if u.opts.InFlight <= 0 {
		u.opts.InFlight = DefaultInFlight
	}
	if u.opts.PartSize <= 0 {
		u.opts.PartSize = DefaultPartSize
	}
	u.opts.PartSize = max(u.opts.PartSize, MinPartSize)
	res.Err = u.run(ctx, &res)
	res.BytesSent = u.sent
	return res
}

type upload struct {
	s    *Store
	src  storage.Storage
	job  UploadJob
	opts UploadOptions

	size, mtime int64
	mu          sync.Mutex
	sent        int64
	// resumed: the multipart upload is an earlier attempt's, created with
	// that attempt's lock.
	resumed bool
}

func (u *upload) report(p UploadProgress) {
	if u.opts.Progress != nil {
		p.File, p.Size, p.SrcModTime = u.job.Name, u.size, u.mtime
		u.mu.Lock()
		p.BytesSent = u.sent
		u.mu.Unlock()
		u.opts.Progress(p)
	}
}

func (u *upload) run(ctx context.Context, res *UploadResult) error {
	if err := storage.CheckName("upload", u.s.Location(), u.job.Name); err != nil {
		return err
	}
	want, err := hex.DecodeString(u.job.SHA256)
	if err != nil || len(want) != sha256.Size {
		return &storage.Error{Op: "upload", Location: u.s.Location(), Name: u.job.Name, Kind: storage.ErrInvalidName,
			Err: fmt.Errorf("expected sha256 %q of %s is not 64 hex digits", u.job.SHA256, u.job.Src)}
	}
	fi, err := u.src.Stat(ctx, u.job.Src)
	if err != nil {
		return err
	}
	u.size, u.mtime = fi.Size, fi.ModTime.UnixNano()
	res.Size, res.SHA256Hex = u.size, u.job.SHA256
	if u.size > MaxParts*MaxPartSize {
		// Larger parts would not do either: refused before anything is sent.
		return &storage.Error{Op: "upload", Location: u.src.Location(), Name: u.job.Src, Kind: storage.ErrTooLarge,
			Err: fmt.Errorf("%d bytes is more than S3 takes in one object (%d parts of %d bytes): back the database up in more stripes", u.size, MaxParts, MaxPartSize)}
	}

	// The newest version may hold this content already (an attempt that
	// completed and then lost its worker): read it back instead of sending
	// the file again.
	if cur, err := u.s.Head(ctx, u.job.Name, ""); err == nil {
		same, err := u.holds(ctx, cur, want)
		if err != nil {
			return err
		}
		if same {
			res.Object, res.AlreadyThere = cur, true
			if err := u.extendLock(ctx, &res.Object); err != nil {
				return err
			}
			u.report(UploadProgress{VersionID: cur.VersionID, Done: true, Checked: u.size})
			return nil
		}
		res.Replaced = true
	} else if !errors.Is(err, storage.ErrNotFound) {
		return err
	}

	var obj Object
	var sum []byte
	if u.size <= u.opts.PartSize {
		if r := u.job.Resume; r != nil && r.UploadID != "" {
			u.abort(ctx, r.UploadID) // an upload of a larger part size: one put is all the file needs
		}
		obj, sum, err = u.single(ctx)
	} else {
		obj, sum, err = u.multipart(ctx, res)
	}
	if err != nil {
		return err
	}
	if !bytes.Equal(sum, want) {
		// Not reached for a multipart upload (it is not completed then).
		return u.sourceChanged(sum)
	}
	res.Object = obj
	// Read back what the server serves under that version.
	got, err := u.hashObject(ctx, obj.VersionID)
	if err != nil {
		return err
	}
	if !bytes.Equal(got, want) {
		return &storage.Error{Op: "verify", Location: u.s.Location(), Name: u.job.Name, Kind: storage.ErrCorrupt,
			Err: fmt.Errorf("version %s reads back with sha256 %x, the source's is %x; the next attempt writes a new version", obj.VersionID, got, want)}
	}
	lockErr := u.checkLock(ctx, &res.Object)
	if u.resumed && errors.Is(lockErr, ErrNotLocked) {
		// The upload took the lock of the attempt that created it, which
		// may end before this one's: extended (never shortened) to it.
		lockErr = u.extendLock(ctx, &res.Object)
	}
	if lockErr != nil {
		return lockErr
	}
	u.report(UploadProgress{VersionID: obj.VersionID, Done: true, Checked: u.size})
	return nil
}

func (u *upload) sourceChanged(sum []byte) error {
	return &storage.Error{Op: "upload", Location: u.src.Location(), Name: u.job.Src, Kind: storage.ErrCorrupt,
		Err: fmt.Errorf("the source hashes to %x, its manifest says %s: not uploaded", sum, u.job.SHA256)}
}

// holds reports whether object version cur has exactly the content of
// SHA-256 want, by reading it.
func (u *upload) holds(ctx context.Context, cur Object, want []byte) (bool, error) {
	if cur.Size != u.size {
		return false, nil
	}
	got, err := u.hashObject(ctx, cur.VersionID)
	if err != nil {
		return false, err
	}
	return bytes.Equal(got, want), nil
}

// checkLock checks that the server holds the version with the lock it was
// written with.
func (u *upload) checkLock(ctx context.Context, o *Object) error {
	if u.job.Lock.IsZero() {
		return nil
	}
	l, err := u.s.Retention(ctx, o.Name, o.VersionID)
	if err != nil {
		return err
	}
	if l.Mode != u.job.Lock.Mode || l.Until.Before(u.job.Lock.Until.Truncate(time.Second)) {
		return &storage.Error{Op: "verify", Location: u.s.Location(), Name: o.Name, Kind: storage.ErrPermission,
			Err: fmt.Errorf("%w: version %s has lock %q until %s, it was written with %s until %s", ErrNotLocked, o.VersionID,
				l.Mode, l.Until.Format(time.RFC3339), u.job.Lock.Mode, u.job.Lock.Until.Format(time.RFC3339))}
	}
	o.Lock = l
	return nil
}

// extendLock gives an existing version at least the job's lock: a lock may
// be extended, never shortened (PutObjectRetention).
func (u *upload) extendLock(ctx context.Context, o *Object) error {
	l := u.job.Lock
	if l.IsZero() {
		return nil
	}
	cur, err := u.s.Retention(ctx, o.Name, o.VersionID)
	if err != nil {
		return err
	}
	if cur.Mode == l.Mode && !cur.Until.Before(l.Until.Truncate(time.Second)) {
		o.Lock = cur
		return nil
	}
	until := l.Until.UTC()
	_, err = u.s.client.PutObjectRetention(ctx, &awss3.PutObjectRetentionInput{
		Bucket: &u.s.cfg.Bucket, Key: aws.String(u.s.Key(o.Name)), VersionId: aws.String(o.VersionID),
		Retention: &types.ObjectLockRetention{Mode: types.ObjectLockRetentionMode(l.Mode), RetainUntilDate: &until},
	})
	if err != nil {
		return u.s.err("extend the lock of", o.Name, err)
	}
	return u.checkLock(ctx, o)
}

// single puts a file of at most one part.
func (u *upload) single(ctx context.Context) (Object, []byte, error) {
	r, err := u.src.OpenRead(ctx, u.job.Src)
	if err != nil {
		return Object{}, nil, err
	}
	defer r.Close()
	buf := make([]byte, u.size)
	if n, err := r.ReadAt(buf, 0); n != len(buf) && err != nil {
		return Object{}, nil, err
	}
	sum := sha256.Sum256(buf)
	if hex.EncodeToString(sum[:]) != strings.ToLower(u.job.SHA256) {
		return Object{}, sum[:], u.sourceChanged(sum[:])
	}
	if err := u.wait(ctx, len(buf)); err != nil {
		return Object{}, nil, err
	}
	o, err := u.s.Put(ctx, u.job.Name, buf, u.job.Lock, false)
	if err == nil {
		u.addSent(int64(len(buf)))
	}
	return o, sum[:], err
}

func (u *upload) wait(ctx context.Context, n int) error {
	if u.opts.Limit == nil {
		return nil
	}
	return u.opts.Limit.Wait(ctx, n)
}

func (u *upload) addSent(n int64) {
	u.mu.Lock()
	u.sent += n
	u.mu.Unlock()
}

// part is one part of a multipart upload as the server holds it.
type part struct {
	etag   string
	sha256 string // base64
	size   int64
}

// partSize is the part size for the file: the option, raised (to whole
// MiB) so that the file fits in MaxParts; run refused files that no part
// size fits.
func (u *upload) partSize() int64 {
	ps := u.opts.PartSize
	if need := (u.size + MaxParts - 1) / MaxParts; need > ps {
		ps = (need + 1<<20 - 1) &^ (1<<20 - 1)
	}
	return min(ps, MaxPartSize)
}

// multipart sends the file as a multipart upload, resuming the
// checkpoint's when it still exists on the server, and completes it only
// when the whole source hashed as expected.
func (u *upload) multipart(ctx context.Context, res *UploadResult) (Object, []byte, error) {
	ps := u.partSize()
	have := map[int32]part{}
	uploadID := ""
	if r := u.job.Resume; r != nil && r.UploadID != "" {
		if r.File == u.job.Name && r.Size == u.size && r.SrcModTime == u.mtime && r.PartSize >= MinPartSize &&
			r.PartSize <= MaxPartSize && (u.size+r.PartSize-1)/r.PartSize <= MaxParts && !r.Done {
			parts, err := u.listParts(ctx, r.UploadID)
			switch {
			case err == nil:
				uploadID, ps, have = r.UploadID, r.PartSize, parts
				u.resumed = true
			case errors.Is(err, storage.ErrNotFound):
				res.ResumeRejected = true // completed or aborted meanwhile
			default:
				return Object{}, nil, err
			}
		} else {
			res.ResumeRejected = true
			u.abort(ctx, r.UploadID)
		}
	}
	if uploadID == "" {
		id, aps, parts, err := u.adopt(ctx, res)
		if err != nil {
			return Object{}, nil, err
		}
		if id != "" {
			uploadID, ps, have, u.resumed, res.Adopted = id, aps, parts, true, true
		}
	}
	if uploadID == "" {
		in := &awss3.CreateMultipartUploadInput{Bucket: &u.s.cfg.Bucket, Key: aws.String(u.s.Key(u.job.Name)),
			ChecksumAlgorithm: types.ChecksumAlgorithmSha256, ChecksumType: types.ChecksumTypeComposite}
		setLock(&in.ObjectLockMode, &in.ObjectLockRetainUntilDate, u.job.Lock)
		out, err := u.s.client.CreateMultipartUpload(ctx, in)
		if err != nil {
			return Object{}, nil, u.s.err("upload", u.job.Name, err)
		}
		uploadID = aws.ToString(out.UploadId)
	}
	n := int32((u.size + ps - 1) / ps)
	if u.size == 0 {
		n = 1
	}
	var mu sync.Mutex
	done := map[int32]part{}
	progress := func() {
		mu.Lock()
		nums := make([]int32, 0, len(done))
		for k := range done {
			nums = append(nums, k)
		}
		mu.Unlock()
		slices.Sort(nums)
		u.report(UploadProgress{UploadID: uploadID, PartSize: ps, Parts: nums})
	}
	progress()

	whole := sha256.New()
	err := u.pipeline(ctx, u.src, u.job.Src, ps, whole, func(num int32, buf []byte) error {
		sum := sha256.Sum256(buf)
		b64 := base64.StdEncoding.EncodeToString(sum[:])
		if p, ok := have[num]; ok && p.size == int64(len(buf)) && p.sha256 == b64 {
			mu.Lock()
			done[num] = p
			res.ResumedParts++
			mu.Unlock()
			progress()
			return nil
		}
		if err := u.wait(ctx, len(buf)); err != nil {
			return err
		}
		out, err := u.s.client.UploadPart(ctx, &awss3.UploadPartInput{
			Bucket: &u.s.cfg.Bucket, Key: aws.String(u.s.Key(u.job.Name)), UploadId: &uploadID, PartNumber: aws.Int32(num),
			Body: bytes.NewReader(buf), ContentLength: aws.Int64(int64(len(buf))),
			ChecksumAlgorithm: types.ChecksumAlgorithmSha256, ChecksumSHA256: &b64,
		})
		if err != nil {
			return u.s.err("upload part of", u.job.Name, err)
		}
		if got := aws.ToString(out.ChecksumSHA256); got != "" && got != b64 {
			return &storage.Error{Op: "upload", Location: u.s.Location(), Name: u.job.Name, Kind: storage.ErrCorrupt,
				Err: fmt.Errorf("part %d: the server recorded sha256 %s, the product sent %s", num, got, b64)}
		}
		u.addSent(int64(len(buf)))
		mu.Lock()
		done[num] = part{etag: aws.ToString(out.ETag), sha256: b64, size: int64(len(buf))}
		mu.Unlock()
		progress()
		return nil
	}, nil)
	if err != nil {
		return Object{}, nil, err
	}
	sum := whole.Sum(nil)
	if hex.EncodeToString(sum) != strings.ToLower(u.job.SHA256) {
		// The source changed under the upload: nothing of it is kept.
		u.abort(ctx, uploadID)
		return Object{}, sum, u.sourceChanged(sum)
	}
	parts := make([]types.CompletedPart, 0, n)
	comp := sha256.New()
	for i := int32(1); i <= n; i++ {
		p := done[i]
		raw, _ := base64.StdEncoding.DecodeString(p.sha256)
		comp.Write(raw)
		parts = append(parts, types.CompletedPart{PartNumber: aws.Int32(i), ETag: aws.String(p.etag), ChecksumSHA256: aws.String(p.sha256)})
	}
	composite := fmt.Sprintf("%s-%d", base64.StdEncoding.EncodeToString(comp.Sum(nil)), n)
	out, err := u.s.client.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{
		Bucket: &u.s.cfg.Bucket, Key: aws.String(u.s.Key(u.job.Name)), UploadId: &uploadID,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	})
	if err != nil {
		return Object{}, nil, u.s.err("complete the upload of", u.job.Name, err)
	}
	obj := Object{Name: u.job.Name, VersionID: aws.ToString(out.VersionId), Size: u.size, SHA256: aws.ToString(out.ChecksumSHA256), Lock: u.job.Lock}
	if obj.SHA256 != "" && obj.SHA256 != composite {
		return obj, nil, &storage.Error{Op: "upload", Location: u.s.Location(), Name: u.job.Name, Kind: storage.ErrCorrupt,
			Err: fmt.Errorf("the server completed it with checksum %s, the parts sent make %s", obj.SHA256, composite)}
	}
	return obj, sum, nil
}

// adopt looks for an upload of the object that an earlier attempt created
// and never reported (cut before its upload id reached a checkpoint): of
// the uploads in progress under the object's key, the newest whose parts
// all hash as the source's bytes there, with the part size they were cut
// at. The other uploads holding the source's bytes are that attempt's or
// an earlier one's, and are aborted; those holding other bytes, or none,
// may be anyone's and stay for the bucket's lifecycle rule. A refused
// listing (AccessDenied) is no error: res says why, and the file goes into
// a new upload as without a checkpoint.
func (u *upload) adopt(ctx context.Context, res *UploadResult) (string, int64, map[int32]part, error) {
	key := u.s.Key(u.job.Name)
	var found []types.MultipartUpload
	p := awss3.NewListMultipartUploadsPaginator(u.s.client, &awss3.ListMultipartUploadsInput{Bucket: &u.s.cfg.Bucket, Prefix: &key})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			err = u.s.err("list the uploads in progress of", u.job.Name, err)
			if refused(err) && refusal(err) == "AccessDenied" {
				res.UnlistedUploads = rootCause(err)
				return "", 0, nil, nil
			}
			return "", 0, nil, err
		}
		for _, up := range page.Uploads {
			if aws.ToString(up.Key) == key && up.UploadId != nil {
				found = append(found, up)
			}
		}
	}
	// Newest first: the latest attempt sent the most.
	slices.SortStableFunc(found, func(a, b types.MultipartUpload) int { return aws.ToTime(b.Initiated).Compare(aws.ToTime(a.Initiated)) })
	var chosen string
	var chosenPS int64
	var chosenParts map[int32]part
	for _, up := range found {
		id := aws.ToString(up.UploadId)
		parts, err := u.listParts(ctx, id)
		if errors.Is(err, storage.ErrNotFound) {
			continue // completed or aborted meanwhile
		}
		if err != nil {
			return "", 0, nil, err
		}
		ps, ok, err := u.ours(ctx, parts)
		if err != nil {
			return "", 0, nil, err
		}
		switch {
		case !ok:
		case chosen == "":
			chosen, chosenPS, chosenParts = id, ps, parts
		default:
			u.abort(ctx, id)
			res.AbortedOwn++
		}
	}
	return chosen, chosenPS, chosenParts, nil
}

// ours reports whether an upload's parts are the source's: at least one,
// SHA-256 checked by the server, cut at one part size that fits the file,
// and each hashing as the source's bytes at its place. It returns that
// part size.
func (u *upload) ours(ctx context.Context, parts map[int32]part) (int64, bool, error) {
	if len(parts) == 0 {
		return 0, false, nil
	}
	// Every part but the file's last has the part size.
	var ps int64
	for n, p := range parts {
		if int64(n)*p.size < u.size && p.size > ps {
			ps = p.size
		}
	}
	if ps == 0 { // only the last part: its own size says nothing of the others
		return 0, false, nil
	}
	if ps < MinPartSize || ps > MaxPartSize || (u.size+ps-1)/ps > MaxParts {
		return 0, false, nil
	}
	last := int32((u.size + ps - 1) / ps)
	for n, p := range parts {
		want := min(ps, u.size-int64(n-1)*ps)
		if n < 1 || n > last || p.size != want || p.sha256 == "" {
			return 0, false, nil
		}
	}
	r, err := u.src.OpenRead(ctx, u.job.Src)
	if err != nil {
		return 0, false, err
	}
	defer r.Close()
	// Hashed through a small buffer: the part size is whatever the
	// upload was cut at, up to 5 GiB.
	buf := make([]byte, 1<<20)
	for n, p := range parts {
		h := sha256.New()
		k, err := io.CopyBuffer(h, io.NewSectionReader(r, int64(n-1)*ps, p.size), buf)
		if err != nil {
			return 0, false, err
		}
		if k != p.size || base64.StdEncoding.EncodeToString(h.Sum(nil)) != p.sha256 {
			return 0, false, nil
		}
	}
	return ps, true, nil
}

// listParts lists what the server holds of an upload (NoSuchUpload:
// ErrNotFound).
func (u *upload) listParts(ctx context.Context, uploadID string) (map[int32]part, error) {
	out := map[int32]part{}
	p := awss3.NewListPartsPaginator(u.s.client, &awss3.ListPartsInput{
		Bucket: &u.s.cfg.Bucket, Key: aws.String(u.s.Key(u.job.Name)), UploadId: &uploadID,
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, u.s.err("list the parts of", u.job.Name, err)
		}
		for _, pt := range page.Parts {
			out[aws.ToInt32(pt.PartNumber)] = part{etag: aws.ToString(pt.ETag), sha256: aws.ToString(pt.ChecksumSHA256), size: aws.ToInt64(pt.Size)}
		}
	}
	return out, nil
}

// abort gives up an upload, best effort: s3:AbortMultipartUpload removes
// no object, and the bucket's lifecycle rule clears what stays behind.
func (u *upload) abort(ctx context.Context, uploadID string) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	_, _ = u.s.client.AbortMultipartUpload(actx, &awss3.AbortMultipartUploadInput{
		Bucket: &u.s.cfg.Bucket, Key: aws.String(u.s.Key(u.job.Name)), UploadId: &uploadID,
	})
}

// hashObject reads a version back and returns its SHA-256; it must have
// the source's size.
func (u *upload) hashObject(ctx context.Context, version string) ([]byte, error) {
	r, err := u.s.OpenVersion(ctx, u.job.Name, version)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if r.Size() != u.size {
		return nil, &storage.Error{Op: "verify", Location: u.s.Location(), Name: u.job.Name, Kind: storage.ErrCorrupt,
			Err: fmt.Errorf("version %s has %d bytes, the source %d", version, r.Size(), u.size)}
	}
	h := sha256.New()
	var checked int64
	err = u.pipelineReader(ctx, r, u.opts.PartSize, h, nil, func(k int) {
		checked += int64(k)
		u.report(UploadProgress{VersionID: version, Checked: checked})
	})
	if err != nil {
		return nil, err
	}
	return h.Sum(nil), nil
}

func (u *upload) pipeline(ctx context.Context, st storage.Storage, name string, ps int64, whole hash.Hash,
	each func(num int32, buf []byte) error, inOrder func(int)) error {
	r, err := st.OpenRead(ctx, name)
	if err != nil {
		return err
	}
	defer r.Close()
	if r.Size() != u.size {
		return &storage.Error{Op: "upload", Location: st.Location(), Name: name, Kind: storage.ErrCorrupt,
			Err: fmt.Errorf("size changed from %d to %d while uploading", u.size, r.Size())}
	}
	return u.pipelineReader(ctx, r, ps, whole, each, inOrder)
}

// pipelineReader reads the parts of r (ps bytes each, the last shorter)
// with InFlight workers, passes each to each (if not nil) in its worker,
// and hashes them into whole in order (then calls inOrder with its size).
func (u *upload) pipelineReader(ctx context.Context, r storage.Reader, ps int64, whole hash.Hash,
	each func(num int32, buf []byte) error, inOrder func(int)) error {
	var perPart func(off int64, b []byte) error
	if each != nil {
		perPart = func(off int64, b []byte) error { return each(int32(off/ps)+1, b) }
	}
	return copier.ReadInOrder(ctx, r, u.size, ps, u.opts.InFlight, perPart, func(_ int64, b []byte) {
		whole.Write(b)
		if inOrder != nil {
			inOrder(len(b))
		}
	})
}

// PutChecked writes a small object (a manifest) as Upload writes a file:
// not again when the newest version holds the same bytes (its lock
// extended when shorter), else as a new version, SHA-256 checked by the
// server, read back and its lock checked.
func (s *Store) PutChecked(ctx context.Context, name string, data []byte, lock Lock) UploadResult {
	sum := sha256.Sum256(data)
	res := UploadResult{Object: Object{Name: name, Size: int64(len(data))}, SHA256Hex: hex.EncodeToString(sum[:])}
	if lock.IsZero() {
		lock = s.cfg.Lock
	}
	u := &upload{s: s, job: UploadJob{Name: name, Lock: lock}, opts: UploadOptions{PartSize: DefaultPartSize, InFlight: 1}, size: int64(len(data))}
	res.Err = func() error {
		if cur, err := s.Head(ctx, name, ""); err == nil {
			same, err := u.holds(ctx, cur, sum[:])
			if err != nil {
				return err
			}
			if same {
				res.Object, res.AlreadyThere = cur, true
				return u.extendLock(ctx, &res.Object)
			}
			res.Replaced = true
		} else if !errors.Is(err, storage.ErrNotFound) {
			return err
		}
		o, err := s.Put(ctx, name, data, lock, false)
		if err != nil {
			return err
		}
		res.Object, res.BytesSent = o, int64(len(data))
		got, err := u.hashObject(ctx, o.VersionID)
		if err != nil {
			return err
		}
		if !bytes.Equal(got, sum[:]) {
			return &storage.Error{Op: "verify", Location: s.Location(), Name: name, Kind: storage.ErrCorrupt,
				Err: fmt.Errorf("version %s reads back with sha256 %x, %x was written", o.VersionID, got, sum)}
		}
		return u.checkLock(ctx, &res.Object)
	}()
	return res
}
