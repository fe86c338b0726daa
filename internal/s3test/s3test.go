// Package s3test starts a real S3 server with Object Lock for tests and the
// demo:
// versitygw (Apache-2.0) on its posix backend, with versioning, on a free
// 127.0.0.1 port and a temp dir. Its binary is built from the separate
// module tools/versitygw (its dependencies stay out of the product's
// go.mod) into .cache/tools/ of the repository, once per version of that
// module: `make test` builds it (scripts/versitygw.sh), and a test run
// without it builds it first. BACKUPCYCLE_VERSITYGW names another binary.
//
// Start ties a server to a test; Run starts one without a testing.TB (the
// demo) and Close stops it.
package s3test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/storage/s3"
)

// Server is a running versitygw.
type Server struct {
	Endpoint   string // http://127.0.0.1:port
	Admin      string // the admin API's address
	RootAccess string
	RootSecret string
	Dir        string

	cmd  *exec.Cmd
	done chan struct{}
	log  *os.File
}

// Start runs a server for t, stopped before t's temp dirs are removed.
func Start(t testing.TB) *Server {
	t.Helper()
	dir := t.TempDir()
	s, err := Run(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Run starts a server with its state under dir (created if missing) and
// new root credentials.
func Run(dir string) (*Server, error) { return RunAs(dir, "root", randomSecret()) }

// RunAs starts a server with its state under dir (created if missing) and
// these root credentials: a later RunAs on the same dir with the same
// credentials serves the same buckets (the demo's object store).
func RunAs(dir, rootAccess, rootSecret string) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	for _, d := range []string{"data", "versions", "iam"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return nil, err
		}
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	s := &Server{Endpoint: "http://" + ports[0], Admin: "http://" + ports[1], RootAccess: rootAccess, RootSecret: rootSecret, Dir: dir,
		done: make(chan struct{})}
	s.log, err = os.Create(filepath.Join(dir, "versitygw.log"))
	if err != nil {
		return nil, err
	}
	// --versioning-dir turns on versioning in the posix backend, without
	// which no bucket can have Object Lock. The root credentials go in
	// the environment, not on a command line others can read.
	s.cmd = exec.Command(bin, "--port", ports[0], "--admin-port", ports[1], "--iam-dir", filepath.Join(dir, "iam"),
		"--health", "/health", "--quiet",
		"posix", "--versioning-dir", filepath.Join(dir, "versions"), filepath.Join(dir, "data"))
	s.cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+s.RootAccess, "ROOT_SECRET_ACCESS_KEY="+s.RootSecret)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		s.log.Close()
		return nil, fmt.Errorf("s3test: start %s: %w", bin, err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(s.Endpoint + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		select {
		case <-s.done:
			out, _ := os.ReadFile(s.log.Name())
			s.log.Close()
			return nil, fmt.Errorf("s3test: versitygw exited: %s", bytes.TrimSpace(out))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.Close()
			return nil, errors.New("s3test: versitygw not ready within 20s")
		}
	}
}

// Close stops the server (SIGTERM, then SIGKILL).
func (s *Server) Close() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	}
	s.log.Close()
}

// Kill ends the server with SIGKILL (its host gone) and waits for it; its
// state stays in Dir, where RunAs with the same credentials finds it.
func (s *Server) Kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.done
}

// Config is a store configuration for bucket with the root credentials.
func (s *Server) Config(bucket, prefix string) s3.Config {
	return s3.Config{Endpoint: s.Endpoint, Bucket: bucket, Prefix: prefix, PathStyle: true, Region: "us-east-1",
		AccessKeyID: s.RootAccess, SecretAccessKey: s.RootSecret}
}

// Client is an S3 client with the root credentials.
func (s *Server) Client() *awss3.Client {
	return Client(s.Endpoint, s.RootAccess, s.RootSecret)
}

// Client is an S3 client of endpoint with these credentials.
func Client(endpoint, access, secret string) *awss3.Client {
	return awss3.New(awss3.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(endpoint), UsePathStyle: true,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: access, SecretAccessKey: secret}, nil
		}),
	})
}

// CreateBucket creates a bucket, with Object Lock (and so versioning) when
// locked; one the root user has already is kept as it is.
func (s *Server) CreateBucket(ctx context.Context, name string, locked bool) error {
	in := &awss3.CreateBucketInput{Bucket: &name}
	if locked {
		in.ObjectLockEnabledForBucket = aws.Bool(true)
	}
	_, err := s.Client().CreateBucket(ctx, in)
	var owned *types.BucketAlreadyOwnedByYou
	if errors.As(err, &owned) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("s3test: create bucket %s: %w", name, err)
	}
	return nil
}

// CreateUser adds a user of role "user": it may do only what bucket
// policies grant it. A user of that access key already there is kept as it
// is (a server restarted on its state directory).
func (s *Server) CreateUser(ctx context.Context, access, secret string) error {
	bin, err := Binary()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, bin, "admin", "--access", s.RootAccess, "--secret", s.RootSecret, "--endpoint-url", s.Admin,
		"create-user", "--access", access, "--secret", secret, "--role", "user")
	if out, err := cmd.CombinedOutput(); err != nil && !strings.Contains(string(out), "XAdminUserExists") {
		return fmt.Errorf("s3test: create user %s: %v: %s", access, err, out)
	}
	return nil
}

// PutPolicy sets a bucket policy (principals are access key ids).
func (s *Server) PutPolicy(ctx context.Context, bucket, policy string) error {
	if _, err := s.Client().PutBucketPolicy(ctx, &awss3.PutBucketPolicyInput{Bucket: &bucket, Policy: &policy}); err != nil {
		return fmt.Errorf("s3test: bucket policy of %s: %w", bucket, err)
	}
	return nil
}

// WorkerBucket creates bucket with Object Lock and a user of role "user"
// (access, secret) that may do on it what WorkerPolicy allows.
func (s *Server) WorkerBucket(ctx context.Context, bucket, access, secret string) error {
	if err := s.CreateBucket(ctx, bucket, true); err != nil {
		return err
	}
	if err := s.CreateUser(ctx, access, secret); err != nil {
		return err
	}
	return s.PutPolicy(ctx, bucket, WorkerPolicy(bucket, access))
}

// WorkerPolicy is the bucket policy the README asks for: the worker may
// write, read and list, extend a lock and abort its own uploads, and may
// not delete a version, bypass governance mode or change the bucket's lock
// configuration.
func WorkerPolicy(bucket, principal string) string {
	return fmt.Sprintf(`{"Version":"2012-10-17","Statement":[
{"Effect":"Allow","Principal":{"AWS":["%[2]s"]},"Action":["s3:PutObject","s3:GetObject","s3:GetObjectVersion","s3:ListBucket",
 "s3:ListBucketVersions","s3:GetObjectRetention","s3:PutObjectRetention","s3:AbortMultipartUpload","s3:ListMultipartUploadParts",
 "s3:ListBucketMultipartUploads",
 "s3:GetBucketObjectLockConfiguration","s3:GetBucketVersioning","s3:DeleteObject"],
 "Resource":["arn:aws:s3:::%[1]s","arn:aws:s3:::%[1]s/*"]},
{"Effect":"Deny","Principal":{"AWS":["%[2]s"]},"Action":["s3:DeleteObjectVersion","s3:BypassGovernanceRetention",
 "s3:PutBucketObjectLockConfiguration","s3:PutBucketVersioning","s3:DeleteBucket","s3:PutBucketPolicy"],
 "Resource":["arn:aws:s3:::%[1]s","arn:aws:s3:::%[1]s/*"]}]}`, bucket, principal)
}

// WorkerPolicyWith is WorkerPolicy that also allows actions (and no
// longer denies them): a worker's user with more rights than it needs.
func WorkerPolicyWith(bucket, principal string, actions ...string) string {
	p := WorkerPolicy(bucket, principal)
	for _, a := range actions {
		p = strings.Replace(p, `"`+a+`",`, "", 1)
		p = strings.Replace(p, `"`+a+`"]`, "]", 1)
		p = strings.Replace(p, `"Action":["`, `"Action":["`+a+`","`, 1) // the first statement's: the Allow
	}
	return p
}

// Versions lists every version of key, newest first as the server gives
// them.
func (s *Server) Versions(ctx context.Context, bucket, key string) ([]types.ObjectVersion, error) {
	out, err := s.Client().ListObjectVersions(ctx, &awss3.ListObjectVersionsInput{Bucket: &bucket, Prefix: &key})
	if err != nil {
		return nil, err
	}
	var vs []types.ObjectVersion
	for _, v := range out.Versions {
		if aws.ToString(v.Key) == key {
			vs = append(vs, v)
		}
	}
	return vs, nil
}

// ReadAll reads a whole object (any storage.Storage file) for a test.
func ReadAll(t testing.TB, st storage.Storage, name string) []byte {
	t.Helper()
	r, err := st.OpenRead(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	buf := make([]byte, r.Size())
	if _, err := r.ReadAt(buf, 0); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	return buf
}

func randomSecret() string {
	var b [18]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func freePorts(n int) ([]string, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var out []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().String())
	}
	return out, nil
}

var (
	buildMu  sync.Mutex
	buildBin string
)

// Binary is the versitygw binary: BACKUPCYCLE_VERSITYGW, else the one built
// from tools/versitygw for its go.sum, built now if missing.
func Binary() (string, error) {
	if p := os.Getenv("BACKUPCYCLE_VERSITYGW"); p != "" {
		return p, nil
	}
	buildMu.Lock()
	defer buildMu.Unlock()
	if buildBin != "" {
		return buildBin, nil
	}
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	bin, err := BinaryPath(root)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(bin); err == nil {
		buildBin = bin
		return bin, nil
	}
	// The same script `make test-deps` runs: one build for every package
	// that asks at once (it takes a lock).
	cmd := exec.Command("bash", filepath.Join(root, "scripts", "versitygw.sh"))
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("s3test: building versitygw (scripts/versitygw.sh): %v: %s", err, out)
	}
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("s3test: scripts/versitygw.sh did not build %s", bin)
	}
	buildBin = bin
	return bin, nil
}

// BinaryPath is where scripts/versitygw.sh puts the binary for the
// repository at root: named by the SHA-256 of tools/versitygw/go.sum and
// the Go version, so a new version builds anew and an unchanged one never.
func BinaryPath(root string) (string, error) {
	sum, err := os.ReadFile(filepath.Join(root, "tools", "versitygw", "go.sum"))
	if err != nil {
		return "", fmt.Errorf("s3test: %w", err)
	}
	h := sha256.New()
	h.Write(sum)
	h.Write([]byte(runtime.Version()))
	return filepath.Join(root, ".cache", "tools", "versitygw-"+hex.EncodeToString(h.Sum(nil))[:16]), nil
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.HasPrefix(string(b), "module github.com/backupcycle/backupcycle\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("s3test: not inside the backupcycle repository (no go.mod of module github.com/backupcycle/backupcycle above the working directory)")
		}
		dir = parent
	}
}
