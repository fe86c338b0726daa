// Package location opens a storage.Storage from its URL: file:///srv/bak01,
// a plain absolute path, or smb://server[:port]/share/dir.
package location

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/storage/local"
	"github.com/backupcycle/backupcycle/internal/storage/s3"
	"github.com/backupcycle/backupcycle/internal/storage/smb"
)

// Check validates a location URL without connecting (for config validation).
func Check(raw string) error {
	_, _, err := parse(raw)
	return err
}

// parse returns the scheme ("file" or "smb") and the local directory for file.
func parse(raw string) (scheme, dir string, err error) {
	switch {
	case raw == "":
		return "", "", fmt.Errorf("empty storage location; want file:///dir, /dir or smb://server/share/dir")
	// An absolute path of the platform: on Windows also D:\dir and
	// \\server\share\dir, which the config resolves a location to.
	case strings.HasPrefix(raw, "/") || filepath.IsAbs(raw):
		return "file", raw, nil
	case strings.HasPrefix(raw, "smb://"):
		if _, err := smb.ParseURL(raw); err != nil {
			return "", "", err
		}
		return "smb", "", nil
	case strings.HasPrefix(raw, "file://"):
		u, err := url.Parse(raw)
		if err != nil {
			return "", "", fmt.Errorf("storage location %q: %w", raw, err)
		}
		if u.Host != "" && u.Host != "localhost" {
			return "", "", fmt.Errorf("storage location %q: file URLs name a local directory (file:///dir); use smb://%s/share for a server", raw, u.Host)
		}
		if u.Path == "" || u.RawQuery != "" {
			return "", "", fmt.Errorf("storage location %q: want file:///absolute/dir", raw)
		}
		return "file", u.Path, nil
	}
	return "", "", fmt.Errorf("storage location %q: unknown kind; want file:///dir, /dir or smb://server[:port]/share/dir", raw)
}

// Open opens the Storage at raw. creds are used for smb:// (resolved by the
// caller from a reference; never put them in the URL) and ignored for local
// directories.
func Open(ctx context.Context, raw string, creds storage.Credentials) (storage.Storage, error) {
	scheme, dir, err := parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", storage.ErrInvalidName, err)
	}
	if scheme == "file" {
		return local.Open(ctx, dir)
	}
	cfg, err := smb.ParseURL(raw)
	if err != nil {
		return nil, err
	}
	return smb.Open(ctx, cfg, creds)
}

// OpenServer opens a configured backup server's location as the worker
// reaches it: its SMB password reference resolved now (an error wrapping
// config.ErrSecretUnavailable when it cannot be), its smb: settings
// applied (require_signing), a relative local path as Parse resolved it
// against the configuration's directory.
func OpenServer(ctx context.Context, srv *config.BackupServer) (storage.Storage, error) {
	if srv.IsObjectStore() {
		return nil, &storage.Error{Op: "open", Location: "s3://" + srv.Name, Kind: storage.ErrInvalidName,
			Err: fmt.Errorf("backup server %s is an object store (kind: s3): it only takes immutable copies", srv.Name)}
	}
	creds, err := srv.Credentials()
	if err != nil {
		return nil, err
	}
	if srv.Loc.Scheme == "file" && srv.Loc.Path != "" {
		return Open(ctx, srv.Loc.Path, creds)
	}
	if srv.SMB == nil || !strings.HasPrefix(srv.Location, "smb://") {
		return Open(ctx, srv.Location, creds)
	}
	cfg, err := smb.ParseURL(srv.Location)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", storage.ErrInvalidName, err)
	}
	// ?sign=required in the location asks for signing too.
	cfg.RequireSigning = cfg.RequireSigning || srv.SMB.RequireSigning
	return smb.Open(ctx, cfg, creds)
}

// OpenObjectStore opens a kind: s3 backup server's bucket as the worker
// reaches it: its secret access key resolved now (an error wrapping
// config.ErrSecretUnavailable when it cannot be), every object it writes
// locked with lock (the zero Lock: none).
func OpenObjectStore(ctx context.Context, srv *config.BackupServer, lock s3.Lock) (*s3.Store, error) {
	if !srv.IsObjectStore() || srv.S3 == nil {
		return nil, fmt.Errorf("%w: backup server %s is not of kind s3", storage.ErrInvalidName, srv.Name)
	}
	secret, err := srv.SecretAccessKey()
	if err != nil {
		return nil, err
	}
	c := srv.S3
	return s3.Open(ctx, s3.Config{Endpoint: c.Endpoint, Region: c.Region, Bucket: c.Bucket, Prefix: c.Prefix, PathStyle: c.PathStyle,
		AccessKeyID: c.AccessKeyID, SecretAccessKey: secret, CAFile: c.CAFile, Lock: lock})
}
