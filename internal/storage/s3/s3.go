// Package s3 is the object-storage backup target: a bucket of an S3 server
// (AWS S3 or any server speaking its API) whose Object Lock keeps what the
// product wrote from being deleted or overwritten for a set time, even by
// the product's own credentials.
//
// Store implements storage.Storage where an object store can:
//
//   - Stat, OpenRead (ranged GETs pinned to the version seen at open), List
//     (ListObjectsV2 with "/" as delimiter: one directory level, as a share
//     lists) and Location map directly.
//   - Create gives a Writer that holds the object in memory and puts it whole
//     on Close (PutObject, SHA-256 checked by the server, If-None-Match so
//     an existing object is never replaced, the store's lock applied): an
//     object exists completely or not at all, so there is no partial file
//     to sync, rename into place or resume. It takes objects up to
//     MaxPutSize (manifests and records); backup stripes go through Upload,
//     a multipart upload that resumes from its upload id.
//   - OpenWrite, Rename, Replace and Remove are storage.ErrUnsupported: an
//     object is never modified in place, and under Object Lock it cannot be
//     moved or removed until its lock expires (the bucket's lifecycle rule
//     removes it then). The product needs no delete permission there.
//
// Probe checks that the bucket really keeps a locked object: it writes one
// and tries to delete and overwrite it with the worker's own credentials.
package s3

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/backupcycle/backupcycle/internal/storage"
)

// Config is how to reach a bucket. Credentials are resolved by the caller
// from their references; they never appear in Location or an error.
type Config struct {
	// Endpoint is the S3 server's URL (https://s3.example.net:9000); ""
	// is AWS S3 in Region.
	Endpoint string
	Region   string // "" = us-east-1
	Bucket   string
	// Prefix is put before every name ("backupcycle/"); "" or ending in "/".
	Prefix string
	// PathStyle addresses the bucket in the path (https://host/bucket/key)
	// instead of the host name (https://bucket.host/key); most S3 servers
	// other than AWS need it.
	PathStyle       bool
	AccessKeyID     string
	SecretAccessKey string
	// CAFile is a PEM file of the CA certificates the endpoint's
	// certificate chains to; "" = the system's roots.
	CAFile string
	// Lock is applied to every object Create and Upload write, unless an
	// Upload says otherwise; the zero Lock writes objects without one.
	Lock Lock
}

// Lock is an Object Lock retention: Mode ModeCompliance or ModeGovernance
// until Until. The zero Lock is none.
type Lock struct {
	Mode  string    `json:"mode"`
	Until time.Time `json:"until"`
}

// Object Lock modes. In COMPLIANCE mode nobody, the bucket's owner
// included, can delete a locked version or shorten its lock; in GOVERNANCE
// mode a user granted s3:BypassGovernanceRetention can ("Locking objects
// with Object Lock", https://docs.aws.amazon.com/AmazonS3/latest/userguide/object-lock.html).
const (
	ModeCompliance = "COMPLIANCE"
	ModeGovernance = "GOVERNANCE"
)

// IsZero reports whether l is no lock.
func (l Lock) IsZero() bool { return l.Mode == "" && l.Until.IsZero() }

// MaxPutSize is the most a Create writer holds before Close puts it.
const MaxPutSize = 64 << 20

// Store is one bucket and prefix. It is safe for concurrent use.
type Store struct {
	cfg    Config
	client *awss3.Client
	http   *http.Client
	loc    string
}

// Open connects to the bucket and checks that it exists and the
// credentials may use it (HeadBucket).
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Bucket == "" {
		return nil, &storage.Error{Op: "open", Location: "s3://", Kind: storage.ErrInvalidName, Err: errors.New("no bucket given")}
	}
	if cfg.Prefix != "" && !strings.HasSuffix(cfg.Prefix, "/") {
		cfg.Prefix += "/"
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	s := &Store{cfg: cfg, loc: location(cfg)}
	tr := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout: 30 * time.Second,
		MaxIdleConnsPerHost: 32,
		IdleConnTimeout:     90 * time.Second,
		// A server that accepts a request and never answers must not hold
		// a copy forever; the body itself may take long.
		ResponseHeaderTimeout: 2 * time.Minute,
		TLSClientConfig:       &tls.Config{MinVersion: tls.VersionTLS12},
	}
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, &storage.Error{Op: "open", Location: s.loc, Kind: storage.ErrInvalidName, Err: fmt.Errorf("ca_file: %w", err)}
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, &storage.Error{Op: "open", Location: s.loc, Kind: storage.ErrInvalidName,
				Err: fmt.Errorf("ca_file %s holds no PEM certificate", cfg.CAFile)}
		}
		tr.TLSClientConfig.RootCAs = pool
	}
	s.http = &http.Client{Transport: tr}
	ak, sk := cfg.AccessKeyID, cfg.SecretAccessKey
	opts := awss3.Options{
		Region:     cfg.Region,
		HTTPClient: s.http,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: ak, SecretAccessKey: sk, Source: "backupcycle configuration"}, nil
		}),
		UsePathStyle: cfg.PathStyle,
		// Every checksum the product relies on it computes and sends
		// itself (SHA-256), and it hashes what it reads back: the SDK's own
		// CRC32 on top would only be a second, weaker check.
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	}
	if cfg.Endpoint != "" {
		opts.BaseEndpoint = aws.String(cfg.Endpoint)
	}
	s.client = awss3.New(opts)
	if _, err := s.client.HeadBucket(ctx, &awss3.HeadBucketInput{Bucket: &cfg.Bucket}); err != nil {
		err = s.err("open", "", err)
		if se := (*storage.Error)(nil); errors.As(err, &se) && se.Kind == storage.ErrNotFound {
			// HEAD has no body to say NoSuchBucket: a 404 is the bucket.
			se.Kind, se.Err = storage.ErrShareNotFound, fmt.Errorf("bucket %q does not exist", cfg.Bucket)
		}
		return nil, err
	}
	return s, nil
}

// location is s3://host[:port]/bucket/prefix, without credentials.
func location(cfg Config) string {
	host := "s3." + cfg.Region + ".amazonaws.com"
	if cfg.Region == "" {
		host = "s3.amazonaws.com"
	}
	if cfg.Endpoint != "" {
		if u, err := url.Parse(cfg.Endpoint); err == nil && u.Host != "" {
			host = u.Host
		}
	}
	return "s3://" + host + "/" + cfg.Bucket + "/" + strings.TrimSuffix(cfg.Prefix, "/")
}

// Client is the S3 client, for the checks a test or the probe makes beside
// the Storage interface.
func (s *Store) Client() *awss3.Client { return s.client }

// Bucket is the configured bucket.
func (s *Store) Bucket() string { return s.cfg.Bucket }

// Key is the object key of name.
func (s *Store) Key(name string) string { return s.cfg.Prefix + name }

// Location implements storage.Storage.
func (s *Store) Location() string { return strings.TrimSuffix(s.loc, "/") }

// Close implements storage.Storage.
func (s *Store) Close() error {
	s.http.CloseIdleConnections()
	return nil
}

// FreeSpace implements storage.Storage: a bucket reports none.
func (s *Store) FreeSpace(context.Context) (int64, bool, error) { return 0, false, nil }

// Object is a version of an object as the server stored it.
type Object struct {
	Name      string
	VersionID string
	Size      int64
	// SHA256 is the checksum the server holds: base64 of the object's
	// SHA-256 for a single put, the composite "base64-N" for a multipart
	// upload of N parts.
	SHA256 string
	Lock   Lock
}

// Stat implements storage.Storage.
func (s *Store) Stat(ctx context.Context, name string) (storage.FileInfo, error) {
	if err := storage.CheckName("stat", s.Location(), name); err != nil {
		return storage.FileInfo{}, err
	}
	h, err := s.head(ctx, name, "")
	if err != nil {
		return storage.FileInfo{}, s.err("stat", name, err)
	}
	return storage.FileInfo{Name: name, Size: aws.ToInt64(h.ContentLength), ModTime: aws.ToTime(h.LastModified)}, nil
}

func (s *Store) head(ctx context.Context, name, version string) (*awss3.HeadObjectOutput, error) {
	in := &awss3.HeadObjectInput{Bucket: &s.cfg.Bucket, Key: aws.String(s.Key(name)), ChecksumMode: types.ChecksumModeEnabled}
	if version != "" {
		in.VersionId = &version
	}
	return s.client.HeadObject(ctx, in)
}

// Head returns what the server holds for a version of name (the newest
// when version is ""): size, checksum, lock.
func (s *Store) Head(ctx context.Context, name, version string) (Object, error) {
	if err := storage.CheckName("stat", s.Location(), name); err != nil {
		return Object{}, err
	}
	h, err := s.head(ctx, name, version)
	if err != nil {
		return Object{}, s.err("stat", name, err)
	}
	o := Object{Name: name, VersionID: aws.ToString(h.VersionId), Size: aws.ToInt64(h.ContentLength), SHA256: aws.ToString(h.ChecksumSHA256)}
	o.Lock = Lock{Mode: string(h.ObjectLockMode), Until: aws.ToTime(h.ObjectLockRetainUntilDate)}
	return o, nil
}

// Retention is the lock a version of name holds (the zero Lock: none), as
// GetObjectRetention reports it: some servers leave the lock out of HEAD
// for a version that is no longer the newest.
func (s *Store) Retention(ctx context.Context, name, version string) (Lock, error) {
	in := &awss3.GetObjectRetentionInput{Bucket: &s.cfg.Bucket, Key: aws.String(s.Key(name))}
	if version != "" {
		in.VersionId = &version
	}
	out, err := s.client.GetObjectRetention(ctx, in)
	if err != nil {
		if c := APICode(err); c == "NoSuchObjectLockConfiguration" || c == "ObjectLockConfigurationNotFoundError" {
			return Lock{}, nil
		}
		return Lock{}, s.err("read the lock of", name, err)
	}
	if out.Retention == nil {
		return Lock{}, nil
	}
	return Lock{Mode: string(out.Retention.Mode), Until: aws.ToTime(out.Retention.RetainUntilDate)}, nil
}

// OpenRead implements storage.Storage. Every ReadAt reads the version the
// name had when it was opened.
func (s *Store) OpenRead(ctx context.Context, name string) (storage.Reader, error) {
	if err := storage.CheckName("open", s.Location(), name); err != nil {
		return nil, err
	}
	h, err := s.head(ctx, name, "")
	if err != nil {
		return nil, s.err("open", name, err)
	}
	return &reader{s: s, ctx: ctx, name: name, version: aws.ToString(h.VersionId), size: aws.ToInt64(h.ContentLength)}, nil
}

// OpenVersion opens one version of name for reading.
func (s *Store) OpenVersion(ctx context.Context, name, version string) (storage.Reader, error) {
	if err := storage.CheckName("open", s.Location(), name); err != nil {
		return nil, err
	}
	h, err := s.head(ctx, name, version)
	if err != nil {
		return nil, s.err("open", name, err)
	}
	return &reader{s: s, ctx: ctx, name: name, version: version, size: aws.ToInt64(h.ContentLength)}, nil
}

type reader struct {
	s       *Store
	ctx     context.Context
	name    string
	version string
	size    int64
}

func (r *reader) Size() int64  { return r.size }
func (r *reader) Close() error { return nil }

// ReadAt reads with one ranged GET.
func (r *reader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, &storage.Error{Op: "read", Location: r.s.Location(), Name: r.name, Kind: storage.ErrInvalidName, Err: errors.New("negative offset")}
	}
	if off >= r.size || len(p) == 0 {
		if off >= r.size {
			return 0, io.EOF
		}
		return 0, nil
	}
	want := int(min(int64(len(p)), r.size-off))
	in := &awss3.GetObjectInput{Bucket: &r.s.cfg.Bucket, Key: aws.String(r.s.Key(r.name)),
		Range: aws.String(fmt.Sprintf("bytes=%d-%d", off, off+int64(want)-1))}
	if r.version != "" {
		in.VersionId = &r.version
	}
	out, err := r.s.client.GetObject(r.ctx, in)
	if err != nil {
		return 0, r.s.err("read", r.name, err)
	}
	defer out.Body.Close()
	n, err := io.ReadFull(out.Body, p[:want])
	if err != nil {
		return n, &storage.Error{Op: "read", Location: r.s.Location(), Name: r.name, Kind: storage.ErrConnection, Err: err}
	}
	if want < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// List implements storage.Storage: the objects directly under prefix's
// directory (delimiter "/"), never "directory" placeholders (keys ending
// in "/") nor deeper keys.
func (s *Store) List(ctx context.Context, prefix, suffix string) ([]storage.FileInfo, error) {
	if dir := prefix[:strings.LastIndex(prefix, "/")+1]; dir != "" {
		if err := storage.CheckName("list", s.Location(), strings.TrimSuffix(dir, "/")); err != nil {
			return nil, err
		}
	}
	var out []storage.FileInfo
	p := awss3.NewListObjectsV2Paginator(s.client, &awss3.ListObjectsV2Input{
		Bucket: &s.cfg.Bucket, Prefix: aws.String(s.Key(prefix)), Delimiter: aws.String("/"),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, s.err("list", prefix, err)
		}
		for _, o := range page.Contents {
			name := strings.TrimPrefix(aws.ToString(o.Key), s.cfg.Prefix)
			if strings.HasSuffix(name, "/") || !strings.HasPrefix(name, prefix) || !strings.HasSuffix(name, suffix) ||
				len(name) < len(prefix)+len(suffix) {
				continue
			}
			out = append(out, storage.FileInfo{Name: name, Size: aws.ToInt64(o.Size), ModTime: aws.ToTime(o.LastModified)})
		}
	}
	slices.SortFunc(out, func(a, b storage.FileInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Create implements storage.Storage: the object is put whole, with the
// store's lock, when the Writer is closed.
func (s *Store) Create(ctx context.Context, name string) (storage.Writer, error) {
	if err := storage.CheckName("create", s.Location(), name); err != nil {
		return nil, err
	}
	if _, err := s.head(ctx, name, ""); err == nil {
		return nil, &storage.Error{Op: "create", Location: s.Location(), Name: name, Kind: storage.ErrExists}
	} else if e := s.err("create", name, err); !errors.Is(e, storage.ErrNotFound) {
		return nil, e
	}
	return &writer{s: s, ctx: ctx, name: name}, nil
}

// writer holds an object until Close puts it.
type writer struct {
	s    *Store
	ctx  context.Context
	name string
	mu   sync.Mutex
	buf  []byte
	done bool
}

func (w *writer) WriteAt(p []byte, off int64) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return 0, &storage.Error{Op: "write", Location: w.s.Location(), Name: w.name, Err: errors.New("writer closed")}
	}
	end := off + int64(len(p))
	if off < 0 || end > MaxPutSize {
		return 0, &storage.Error{Op: "write", Location: w.s.Location(), Name: w.name, Kind: storage.ErrTooLarge,
			Err: fmt.Errorf("a single put holds at most %d bytes; large files go through Upload", MaxPutSize)}
	}
	if end > int64(len(w.buf)) {
		w.buf = append(w.buf, make([]byte, end-int64(len(w.buf)))...)
	}
	copy(w.buf[off:], p)
	return len(p), nil
}

func (w *writer) Truncate(size int64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if size < 0 || size > MaxPutSize {
		return &storage.Error{Op: "truncate", Location: w.s.Location(), Name: w.name, Kind: storage.ErrTooLarge}
	}
	if size <= int64(len(w.buf)) {
		w.buf = w.buf[:size]
	} else {
		w.buf = append(w.buf, make([]byte, size-int64(len(w.buf)))...)
	}
	return nil
}

// Sync has nothing to flush: the object reaches the server whole on Close.
func (w *writer) Sync() error { return nil }

func (w *writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return nil
	}
	w.done = true
	_, err := w.s.Put(w.ctx, w.name, w.buf, w.s.cfg.Lock, true)
	if errors.Is(err, storage.ErrExists) {
		// Some servers refuse If-None-Match over a delete marker, which
		// AWS S3 takes for no object: an object is there only when HEAD
		// finds it.
		if _, herr := w.s.head(w.ctx, w.name, ""); herr != nil && errors.Is(w.s.err("create", w.name, herr), storage.ErrNotFound) {
			_, err = w.s.Put(w.ctx, w.name, w.buf, w.s.cfg.Lock, false)
		}
	}
	return err
}

// Put writes data as a new version of name in one request, with its
// SHA-256 for the server to check and lock (the zero Lock: none). With
// ifNew, an existing object is never replaced (ErrExists).
func (s *Store) Put(ctx context.Context, name string, data []byte, lock Lock, ifNew bool) (Object, error) {
	if err := storage.CheckName("put", s.Location(), name); err != nil {
		return Object{}, err
	}
	sum := sha256.Sum256(data)
	in := &awss3.PutObjectInput{
		Bucket: &s.cfg.Bucket, Key: aws.String(s.Key(name)), Body: bytes.NewReader(data),
		ContentLength:     aws.Int64(int64(len(data))),
		ChecksumAlgorithm: types.ChecksumAlgorithmSha256,
		ChecksumSHA256:    aws.String(base64.StdEncoding.EncodeToString(sum[:])),
	}
	if ifNew {
		in.IfNoneMatch = aws.String("*")
	}
	setLock(&in.ObjectLockMode, &in.ObjectLockRetainUntilDate, lock)
	out, err := s.client.PutObject(ctx, in)
	if err != nil {
		return Object{}, s.err("put", name, err)
	}
	o := Object{Name: name, VersionID: aws.ToString(out.VersionId), Size: int64(len(data)), SHA256: aws.ToString(out.ChecksumSHA256), Lock: lock}
	if o.SHA256 != "" && o.SHA256 != *in.ChecksumSHA256 {
		return o, &storage.Error{Op: "put", Location: s.Location(), Name: name, Kind: storage.ErrCorrupt,
			Err: fmt.Errorf("the server stored sha256 %s, the product sent %s", o.SHA256, *in.ChecksumSHA256)}
	}
	return o, nil
}

func setLock(mode *types.ObjectLockMode, until **time.Time, l Lock) {
	if l.IsZero() {
		return
	}
	*mode = types.ObjectLockMode(l.Mode)
	t := l.Until.UTC()
	*until = &t
}

func (s *Store) unsupported(op, name string) error {
	return &storage.Error{Op: op, Location: s.Location(), Name: name, Kind: storage.ErrUnsupported}
}

// OpenWrite implements storage.Storage: objects are never modified.
func (s *Store) OpenWrite(_ context.Context, name string) (storage.Writer, error) {
	if err := storage.CheckName("open", s.Location(), name); err != nil {
		return nil, err
	}
	return nil, s.unsupported("open for writing", name)
}

// Rename implements storage.Storage: objects are never moved.
func (s *Store) Rename(_ context.Context, oldName, newName string) error {
	for _, n := range []string{oldName, newName} {
		if err := storage.CheckName("rename", s.Location(), n); err != nil {
			return err
		}
	}
	return s.unsupported("rename", oldName)
}

// Replace implements storage.Storage: objects are never replaced.
func (s *Store) Replace(_ context.Context, oldName, newName string) error {
	for _, n := range []string{oldName, newName} {
		if err := storage.CheckName("replace", s.Location(), n); err != nil {
			return err
		}
	}
	return s.unsupported("replace", newName)
}

// Remove implements storage.Storage: objects expire with their lock.
func (s *Store) Remove(_ context.Context, name string) error {
	if err := storage.CheckName("remove", s.Location(), name); err != nil {
		return err
	}
	return s.unsupported("remove", name)
}

// err classifies an S3 error as a storage error kind.
func (s *Store) err(op, name string, err error) error {
	if err == nil {
		return nil
	}
	var se *storage.Error
	if errors.As(err, &se) {
		return err
	}
	e := &storage.Error{Op: op, Location: s.Location(), Name: name, Err: err}
	var nk *types.NoSuchKey
	var nf *types.NotFound
	var nb *types.NoSuchBucket
	var ae smithy.APIError
	status := 0
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	code := ""
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
		// The server's own words; the request id and host add nothing a
		// user acts on, and the message never holds a credential.
		e.Err = &apiError{msg: fmt.Sprintf("%s: %s (HTTP %d)", code, ae.ErrorMessage(), status), err: err}
	}
	switch {
	case errors.As(err, &nb) || code == "NoSuchBucket":
		e.Kind = storage.ErrShareNotFound
		e.Err = fmt.Errorf("bucket %q does not exist: %w", s.cfg.Bucket, e.Err)
	case errors.As(err, &nk) || errors.As(err, &nf) || code == "NoSuchVersion" || status == http.StatusNotFound:
		e.Kind = storage.ErrNotFound
	case code == "PreconditionFailed" || status == http.StatusPreconditionFailed || code == "ConditionalRequestConflict":
		e.Kind = storage.ErrExists
	case code == "InvalidAccessKeyId" || code == "SignatureDoesNotMatch" || code == "ExpiredToken" || code == "InvalidToken":
		e.Kind = storage.ErrAuth
	case code == "AccessDenied" || status == http.StatusForbidden:
		e.Kind = storage.ErrPermission
	case code == "BadDigest" || code == "InvalidDigest" || strings.HasPrefix(code, "XAmzContentSHA256Mismatch"):
		e.Kind = storage.ErrCorrupt
	case code == "EntityTooLarge" || code == "QuotaExceeded":
		e.Kind = storage.ErrNoSpace
	case errors.Is(err, context.Canceled):
	case status >= 500 || status == 0 || status == http.StatusRequestTimeout || status == http.StatusTooManyRequests ||
		code == "SlowDown" || code == "RequestTimeout":
		e.Kind = storage.ErrConnection
	}
	return e
}

// apiError says what the server answered in a line, and unwraps to the
// SDK's error.
type apiError struct {
	msg string
	err error
}

func (e *apiError) Error() string { return e.msg }
func (e *apiError) Unwrap() error { return e.err }

// Refused reports whether err is the server's considered answer to a
// request (an S3 error with a 4xx status other than a timeout or
// throttling): the same request gets the same answer.
func Refused(err error) bool {
	var re *awshttp.ResponseError
	if APICode(err) == "" || !errors.As(err, &re) {
		return false
	}
	st := re.HTTPStatusCode()
	return st >= 400 && st < 500 && st != http.StatusRequestTimeout && st != http.StatusTooManyRequests
}

// APICode is the S3 error code err carries ("AccessDenied"), or "".
func APICode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}
