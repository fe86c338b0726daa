// Package smb is a storage.Storage on an SMB2/3 share, through
// github.com/cloudsoda/go-smb2 (the maintained fork of hirochachacha/go-smb2:
// it fixes writes against servers that require signing). This is the only
// package that imports it. It adds what the library lacks: a context on every
// call, redial and reopen after a dropped connection, several requests in
// flight per ReadAt/WriteAt, typed errors. It never uses the library's
// ReadFrom/WriteTo: between two files of one share they become a server-side
// copy that silently truncates.
package smb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	smb2 "github.com/cloudsoda/go-smb2"

	"github.com/backupcycle/backupcycle/internal/storage"
)

// Config locates a directory on a share. Credentials are separate (Open).
type Config struct {
	Host  string // name or IP of the server
	Port  int    // default 445
	Share string // share name
	Dir   string // directory inside the share, slash-separated; "" = share root
	// RequireSigning makes the client demand signed messages even when the
	// server does not require them. Signing the server requires is always
	// honoured; encryption the server (or share) requires is always used.
	RequireSigning bool
	// Conns is the number of connections kept to the server; file handles are
	// spread over them (one connection per stripe is the fastest way to copy
	// several stripes). Default 4.
	Conns int
	// FileConns is the number of those connections one open file's reads
	// and writes are spread over (capped at Conns). The library signs and
	// sends one request at a time per connection, so against a server that
	// requires SMB3 signing (AES-CMAC, computed in Go) one connection caps a
	// file at one core's signing rate; several let one stripe use several
	// cores. Default DefaultFileConns.
	FileConns int
	// MaxCredits bounds the data in flight per connection (credits x 64 KiB).
	// Default 512 (32 MiB); the library's own default (128) starves 4 stripes
	// x 4 chunks in flight.
	MaxCredits uint16
	// DialTimeout bounds one dial + session setup + tree connect. Default 15s.
	DialTimeout time.Duration
	// Dialect pins the SMB dialect: "" negotiates the best (3.1.1 first),
	// or "2.1", "3.0", "3.0.2", "3.1.1". Against a server that requires
	// signing but not encryption, "2.1" signs with HMAC-SHA256 (hardware
	// SHA) instead of SMB3's AES-CMAC (pure Go in the library): measured
	// twice as fast. It has no encryption.
	Dialect string
}

// DefaultFileConns is Config.FileConns when not set.
const DefaultFileConns = 1

var dialects = map[string]uint16{"2.1": 0x0210, "3.0": 0x0300, "3.0.2": 0x0302, "3.1.1": 0x0311}

// ParseURL parses
// smb://host[:port]/share[/dir...][?sign=required&conns=N&file_conns=N&dialect=2.1].
// A user or password in the URL is refused: credentials travel separately.
func ParseURL(raw string) (Config, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Config{}, fmt.Errorf("smb location %q: %w", redact(raw), err)
	}
	if u.Scheme != "smb" {
		return Config{}, fmt.Errorf("smb location %q: scheme must be smb://", redact(raw))
	}
	if u.User != nil {
		return Config{}, fmt.Errorf("smb location %q: remove the user/password from the URL; pass them as a credential reference", redact(raw))
	}
	c := Config{Host: u.Hostname(), Port: 445}
	if c.Host == "" {
		return Config{}, fmt.Errorf("smb location %q: no server name; want smb://server[:port]/share[/dir]", raw)
	}
	if p := u.Port(); p != "" {
		c.Port, err = strconv.Atoi(p)
		if err != nil || c.Port <= 0 || c.Port > 65535 {
			return Config{}, fmt.Errorf("smb location %q: bad port %q", raw, p)
		}
	}
	parts := strings.SplitN(strings.Trim(u.Path, "/"), "/", 2)
	c.Share = parts[0]
	if c.Share == "" {
		return Config{}, fmt.Errorf("smb location %q: no share name; want smb://server[:port]/share[/dir]", raw)
	}
	if len(parts) == 2 {
		c.Dir = strings.Trim(parts[1], "/")
		if err := storage.CheckName("parse", raw, c.Dir); err != nil {
			return Config{}, fmt.Errorf("smb location %q: bad directory: %w", raw, err)
		}
	}
	q := u.Query()
	for k := range q {
		switch k {
		case "sign", "conns", "file_conns", "dialect":
		default:
			return Config{}, fmt.Errorf("smb location %q: unknown option %q (known: sign=required, conns=N, file_conns=N, dialect=2.1|3.0|3.0.2|3.1.1)", raw, k)
		}
	}
	switch q.Get("sign") {
	case "":
	case "required":
		c.RequireSigning = true
	default:
		return Config{}, fmt.Errorf("smb location %q: sign=%q; the only value is sign=required", raw, q.Get("sign"))
	}
	if v := q.Get("dialect"); v != "" {
		if _, ok := dialects[v]; !ok {
			return Config{}, fmt.Errorf("smb location %q: dialect=%q, want 2.1, 3.0, 3.0.2 or 3.1.1", raw, v)
		}
		c.Dialect = v
	}
	if v := q.Get("conns"); v != "" {
		c.Conns, err = strconv.Atoi(v)
		if err != nil || c.Conns < 1 || c.Conns > 64 {
			return Config{}, fmt.Errorf("smb location %q: conns=%q, want 1..64", raw, v)
		}
	}
	if v := q.Get("file_conns"); v != "" {
		c.FileConns, err = strconv.Atoi(v)
		if err != nil || c.FileConns < 1 || c.FileConns > 64 {
			return Config{}, fmt.Errorf("smb location %q: file_conns=%q, want 1..64", raw, v)
		}
	}
	return c, nil
}

// redact hides a password someone put in a URL by mistake.
func redact(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.User != nil {
		u.User = url.User("xxxxx")
		return u.String()
	}
	return raw
}

// Storage is a directory on a share.
type Storage struct {
	cfg   Config
	creds storage.Credentials
	loc   string
	addr  string
	conns []*conn
	next  atomic.Uint64 // round robin over conns for metadata calls
	// nextFile spreads open files evenly (one connection per stripe), apart
	// from the metadata calls in between.
	nextFile atomic.Uint64
}

var _ storage.Storage = (*Storage)(nil)

// conn is a slot of the pool, holding its current link.
type conn struct {
	mu  sync.Mutex
	cur *link // nil after a drop: the next call redials
}

// link is one TCP connection + session + tree connect. It is logged off only
// when no call is using it: the library, logged off with requests in flight,
// hands them an empty response and panics.
type link struct {
	sess  *smb2.Session
	share *smb2.Share
	tcp   net.Conn // the session's connection, closed at once by abandon

	mu    sync.Mutex
	users int // calls in progress
	dead  bool
	// abandoned: its connection was closed by abandon; no logoff, which
	// would be another call on it.
	abandoned bool
}

// acquire counts a call in; false when the link is dead.
func (l *link) acquire() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dead {
		return false
	}
	l.users++
	return true
}

func (l *link) release() {
	l.mu.Lock()
	l.users--
	last := l.dead && !l.abandoned && l.users == 0
	l.mu.Unlock()
	if last {
		go l.logoff()
	}
}

// kill marks the link dead; the last call out logs it off.
func (l *link) kill() {
	l.mu.Lock()
	if l.dead {
		l.mu.Unlock()
		return
	}
	l.dead = true
	last := l.users == 0 && !l.abandoned
	l.mu.Unlock()
	if last {
		go l.logoff()
	}
}

// bind returns the context to hand the library for a call on conn i's link
// l, and a stop to call when the call is over. The library never sees a
// context that can end: it answers a cancelled call before its sender has
// finished writing the request, and the next call on that connection, from
// any goroutine and under any context, encodes into the buffer still being
// sent (go-smb2 conn.sendWith; the race detector caught it, and the peer
// smbd logged the garbled request as a duplicate message id). When ctx ends,
// the link is abandoned instead: its TCP connection is closed, every call on
// it fails with a transport error once the sender is done with its buffer,
// and the next call dials a new link.
func (s *Storage) bind(ctx context.Context, i int, l *link) (context.Context, func() bool) {
	stop := context.AfterFunc(ctx, func() { s.abandon(i, l) })
	return context.WithoutCancel(ctx), stop
}

// abandon drops conn i's link l after the context of a call on it ended
// (see bind), and closes its TCP connection at once, without a logoff (which
// would be another call on it). Calls still on it fail and redial (they are
// idempotent, see do).
func (s *Storage) abandon(i int, l *link) {
	s.unset(i, l)
	l.mu.Lock()
	l.dead, l.abandoned = true, true
	l.mu.Unlock()
	if l.tcp != nil {
		_ = l.tcp.Close()
	}
}

// logoff closes the connection (the library closes it whatever the server
// answers); it runs in its own goroutine so a frozen server delays no caller.
func (l *link) logoff() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = l.sess.WithContext(ctx).Logoff()
}

// Open connects to the share and checks that the directory exists, so a wrong
// password, share or directory fails here with its typed error.
func Open(ctx context.Context, cfg Config, creds storage.Credentials) (*Storage, error) {
	if cfg.Port == 0 {
		cfg.Port = 445
	}
	if cfg.Conns <= 0 {
		cfg.Conns = 4
	}
	if cfg.FileConns <= 0 {
		cfg.FileConns = DefaultFileConns
	}
	if cfg.MaxCredits == 0 {
		cfg.MaxCredits = 512
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 15 * time.Second
	}
	s := &Storage{cfg: cfg, creds: creds, addr: net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port))}
	u := url.URL{Scheme: "smb", Host: s.addr, Path: "/" + path.Join(cfg.Share, cfg.Dir)}
	s.loc = u.String()
	if creds.User == "" {
		return nil, &storage.Error{Op: "connect", Location: s.loc, Kind: storage.ErrAuth, Err: errors.New("no user given")}
	}
	for range cfg.Conns {
		s.conns = append(s.conns, &conn{})
	}
	err := s.do(ctx, "open", "", func(sh *smb2.Share) error {
		fi, err := sh.Stat(s.full(""))
		if err == nil && !fi.IsDir() {
			err = fmt.Errorf("not a directory: %w", fs.ErrNotExist)
		}
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("directory %q does not exist on share %q; create it or fix the location URL: %w", s.cfg.Dir, s.cfg.Share, fs.ErrNotExist)
		}
		if err != nil {
			return fmt.Errorf("directory %q on share %q: %w", s.cfg.Dir, s.cfg.Share, err)
		}
		return nil
	})
	if err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Location is smb://host:port/share/dir.
func (s *Storage) Location() string { return s.loc }

func (s *Storage) full(name string) string {
	p := path.Join(s.cfg.Dir, name)
	if p == "." {
		return ""
	}
	return p
}

// link returns conn i's link, acquired (release it after the call), dialling
// when needed.
func (s *Storage) link(ctx context.Context, i int) (l *link, fresh bool, err error) {
	c := s.conns[i]
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur != nil && c.cur.acquire() {
		return c.cur, false, nil
	}
	// A busy server may answer a new connection with "no memory" or
	// "insufficient resources" (seen from smbd on a loaded machine): wait a
	// little and dial again before giving up.
	for attempt := 1; ; attempt++ {
		sess, share, tcp, err := s.dial(ctx)
		if err == nil {
			c.cur = &link{sess: sess, share: share, tcp: tcp, users: 1}
			return c.cur, true, nil
		}
		var re *smb2.ResponseError
		busy := errors.As(err, &re) && (re.Code == statusNoMemory || re.Code == statusInsufficientResources)
		if !busy || attempt == 3 {
			return nil, true, err
		}
		select {
		case <-time.After(time.Duration(attempt) * 200 * time.Millisecond):
		case <-ctx.Done():
			return nil, true, err
		}
	}
}

// dial connects, authenticates and mounts the share.
func (s *Storage) dial(ctx context.Context) (*smb2.Session, *smb2.Share, net.Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, s.cfg.DialTimeout)
	defer cancel()
	d := &smb2.Dialer{
		MaxCreditBalance: s.cfg.MaxCredits,
		Negotiator:       smb2.Negotiator{RequireMessageSigning: s.cfg.RequireSigning, SpecifiedDialect: dialects[s.cfg.Dialect]},
		Initiator: &smb2.NTLMInitiator{
			User:     s.creds.User,
			Password: s.creds.Password,
			Domain:   s.creds.Domain,
		},
	}
	var nd net.Dialer
	tcp, err := nd.DialContext(dctx, "tcp", s.addr)
	if err != nil {
		return nil, nil, nil, s.dialErr(ctx, "connect", err)
	}
	sess, err := d.DialConn(dctx, tcp, s.addr)
	if err != nil {
		_ = tcp.Close()
		return nil, nil, nil, s.dialErr(ctx, "connect", err)
	}
	share, err := sess.WithContext(dctx).Mount(`\\` + s.cfg.Host + `\` + s.cfg.Share)
	if err != nil {
		_ = sess.WithContext(dctx).Logoff()
		return nil, nil, nil, s.dialErr(ctx, "mount share", err)
	}
	return sess, share, tcp, nil
}

func (s *Storage) dialErr(ctx context.Context, op string, err error) error {
	if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("no answer within %v: %w", s.cfg.DialTimeout, err)
		return &storage.Error{Op: op, Location: s.loc, Kind: storage.ErrConnection, Err: err}
	}
	return s.err(op, "", err)
}

// broken drops conn i's link l (if still current) so the next call redials.
func (s *Storage) broken(i int, l *link) {
	s.unset(i, l)
	l.kill()
}

// unset makes conn i forget link l (if still current): the next call dials.
func (s *Storage) unset(i int, l *link) {
	c := s.conns[i]
	c.mu.Lock()
	if c.cur == l {
		c.cur = nil
	}
	c.mu.Unlock()
}

// failed reports whether err means the link is unusable.
func failed(e, err error) bool {
	return errors.Is(e, storage.ErrConnection) || errors.Is(err, context.DeadlineExceeded)
}

// do runs fn on a connection's share bound to ctx and drops the connection
// when fn saw it fail. When that connection was not dialled just now (the
// server restarted since), it redials and runs fn once more: fn must be
// idempotent (see doOnce).
func (s *Storage) do(ctx context.Context, op, name string, fn func(sh *smb2.Share) error) error {
	return s.run(ctx, op, name, true, fn)
}

// doOnce is do for calls that must not run twice (rename, remove): the first
// may have succeeded before the answer was lost.
func (s *Storage) doOnce(ctx context.Context, op, name string, fn func(sh *smb2.Share) error) error {
	return s.run(ctx, op, name, false, fn)
}

func (s *Storage) run(ctx context.Context, op, name string, retry bool, fn func(sh *smb2.Share) error) error {
	for attempt := 0; ; attempt++ {
		i := int(s.next.Add(1) % uint64(len(s.conns)))
		l, fresh, err := s.link(ctx, i)
		if err != nil {
			return err
		}
		lctx, stop := s.bind(ctx, i, l)
		sh := l.share.WithContext(lctx)
		err = fn(sh)
		if err != nil && ctx.Err() == nil && name != "" {
			// (An op on the location itself, Open's, keeps its ErrNotFound.)
			err = s.dirGone(sh, op, name, err)
		}
		stop()
		l.release()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			// The link was abandoned; the call's own error is the
			// closed connection.
			s.abandon(i, l)
			return s.err(op, name, ctx.Err())
		}
		e := s.err(op, name, err)
		if failed(e, err) {
			s.broken(i, l)
			if retry && attempt == 0 && !fresh && ctx.Err() == nil {
				continue
			}
		}
		return e
	}
}

// dirGone is err, or, when err says a name is not there and the location's
// directory itself is gone from the share, a connection failure naming the
// directory. The library answers both STATUS_OBJECT_NAME_NOT_FOUND and
// STATUS_OBJECT_PATH_NOT_FOUND with fs.ErrNotExist, and a directory that
// vanished under an open storage is the share's volume unmounted or a DFS
// target without it: an outage, retried, never a file missing from a set
// (which the cycle takes for an incomplete set).
func (s *Storage) dirGone(sh *smb2.Share, op, name string, err error) error {
	if s.cfg.Dir == "" || errors.Is(err, storage.ErrConnection) || !errors.Is(Classify(err), storage.ErrNotFound) {
		return err
	}
	fi, serr := sh.Stat(s.full(""))
	if serr == nil && fi.IsDir() {
		return err
	}
	if serr == nil || errors.Is(serr, fs.ErrNotExist) {
		return &storage.Error{Op: op, Location: s.loc, Name: name, Kind: storage.ErrConnection, Err: fmt.Errorf(
			"directory %q is gone from share %q (its volume unmounted, or a DFS target without it): %v", s.cfg.Dir, s.cfg.Share, err)}
	}
	return err
}

// NTSTATUS codes we classify (MS-ERREF).
const (
	statusNoSuchFile             = 0xC000000F
	statusLogonFailure           = 0xC000006D
	statusAccountRestriction     = 0xC000006E
	statusPasswordExpired        = 0xC0000071
	statusAccountDisabled        = 0xC0000072
	statusAccountLockedOut       = 0xC0000234
	statusDiskFull               = 0xC000007F
	statusQuotaExceeded          = 0xC0000044
	statusBadNetworkName         = 0xC00000CC
	statusNetworkNameDeleted     = 0xC00000C9
	statusUserSessionDeleted     = 0xC0000203
	statusNetworkSessionExpired  = 0xC000035C
	statusFileIsADirectory       = 0xC00000BA
	statusNotADirectory          = 0xC0000103
	statusObjectPathSyntaxBad    = 0xC000003B
	statusObjectNameInvalid      = 0xC0000033
	statusInsufficientResources  = 0xC000009A
	statusNoMemory               = 0xC0000017
	statusConnectionDisconnected = 0xC000020C
	statusConnectionReset        = 0xC000020D
)

// Classify maps an error of the SMB library or the network to a storage
// kind (nil when it is none of them).
func Classify(err error) error {
	var re *smb2.ResponseError
	if errors.As(err, &re) {
		switch re.Code {
		case statusLogonFailure, statusAccountRestriction, statusPasswordExpired, statusAccountDisabled, statusAccountLockedOut:
			return storage.ErrAuth
		case statusBadNetworkName:
			return storage.ErrShareNotFound
		case statusDiskFull, statusQuotaExceeded:
			return storage.ErrNoSpace
		case statusNoSuchFile, statusNotADirectory:
			return storage.ErrNotFound
		case statusObjectNameInvalid, statusObjectPathSyntaxBad:
			return storage.ErrInvalidName
		case statusNetworkNameDeleted, statusUserSessionDeleted, statusNetworkSessionExpired,
			statusConnectionDisconnected, statusConnectionReset, statusInsufficientResources, statusNoMemory:
			return storage.ErrConnection
		}
		return nil
	}
	var te *smb2.TransportError
	var ne net.Error
	switch {
	case errors.Is(err, storage.ErrNotRegular):
		return storage.ErrNotRegular
	case errors.Is(err, fs.ErrNotExist):
		return storage.ErrNotFound
	case errors.Is(err, fs.ErrExist):
		return storage.ErrExists
	case errors.Is(err, fs.ErrPermission):
		return storage.ErrPermission
	case errors.As(err, &te), errors.As(err, &ne),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed), errors.Is(err, smb2.ErrRequestNotAccepted):
		return storage.ErrConnection
	case errors.Is(err, io.EOF):
		// A bare EOF outside ReadAt (which handles end of file itself) is the
		// server closing the connection.
		return storage.ErrConnection
	}
	return nil
}

func (s *Storage) err(op, name string, err error) error {
	var se *storage.Error
	if errors.As(err, &se) {
		return err
	}
	kind := Classify(err)
	// The library's PathError repeats op and name, which the storage.Error
	// already says.
	switch e := err.(type) {
	case *fs.PathError:
		err = e.Err
	case *os.LinkError:
		err = e.Err
	}
	if kind == storage.ErrShareNotFound {
		err = fmt.Errorf("share %q does not exist on %s: %w", s.cfg.Share, s.addr, err)
	}
	return &storage.Error{Op: op, Location: s.loc, Name: name, Kind: kind, Err: err}
}

func (s *Storage) check(op, name string) error { return storage.CheckName(op, s.loc, name) }

func (s *Storage) Stat(ctx context.Context, name string) (storage.FileInfo, error) {
	if err := s.check("stat", name); err != nil {
		return storage.FileInfo{}, err
	}
	var out storage.FileInfo
	err := s.do(ctx, "stat", name, func(sh *smb2.Share) error {
		fi, err := regular(sh, s.full(name))
		if err != nil {
			return err
		}
		out = storage.FileInfo{Name: name, Size: fi.Size(), ModTime: fi.ModTime()}
		return nil
	})
	return out, err
}

func (s *Storage) OpenRead(ctx context.Context, name string) (storage.Reader, error) {
	if err := s.check("open", name); err != nil {
		return nil, err
	}
	f, err := s.newFile(ctx, name, os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (s *Storage) Create(ctx context.Context, name string) (storage.Writer, error) {
	if err := s.check("create", name); err != nil {
		return nil, err
	}
	if err := s.mkdirParent(ctx, "create", name); err != nil {
		return nil, err
	}
	f, err := s.newFile(ctx, name, os.O_RDWR|os.O_CREATE|os.O_EXCL)
	if errors.Is(err, storage.ErrNotFound) {
		// Its directory exists (mkdirParent): Samba answers so for a name
		// held by a link it does not follow or show.
		return nil, &storage.Error{Op: "create", Location: s.loc, Name: name, Kind: storage.ErrNotRegular,
			Err: errors.New("the server refuses to create it in an existing directory: the name is held by an entry it does not show, such as a symbolic link (follow symlinks = no)")}
	}
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (s *Storage) mkdirParent(ctx context.Context, op, name string) error {
	dir := path.Dir(name)
	if dir == "." {
		return nil
	}
	return s.do(ctx, op, name, func(sh *smb2.Share) error {
		err := sh.MkdirAll(s.full(dir), 0o755)
		if errors.Is(err, fs.ErrExist) {
			return nil
		}
		return err
	})
}

func (s *Storage) OpenWrite(ctx context.Context, name string) (storage.Writer, error) {
	if err := s.check("open", name); err != nil {
		return nil, err
	}
	f, err := s.newFile(ctx, name, os.O_RDWR)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// List sends the server the pattern <base>*<suffix> (SMB2 QUERY_DIRECTORY
// carries one, through the library's Glob), so only matching names travel,
// then stats each match for its size and time, keeping regular files of
// exactly that name (see regular). The directory is opened first, which
// proves the right to list it: Glob itself treats a directory it cannot
// open as empty.
func (s *Storage) List(ctx context.Context, prefix, suffix string) ([]storage.FileInfo, error) {
	dir, base := path.Split(prefix)
	dir = strings.TrimSuffix(dir, "/")
	if dir != "" {
		if err := s.check("list", dir); err != nil {
			return nil, err
		}
	}
	if bs := base + suffix; bs != "" {
		if err := s.check("list", bs); err != nil || strings.Contains(suffix, "/") {
			return nil, &storage.Error{Op: "list", Location: s.loc, Name: prefix + "*" + suffix, Kind: storage.ErrInvalidName,
				Err: errors.New("not a file name pattern")}
		}
	}
	var out []storage.FileInfo
	err := s.do(ctx, "list", prefix, func(sh *smb2.Share) error {
		var err error
		out, err = s.list(sh, dir, base, suffix)
		return err
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (s *Storage) list(sh *smb2.Share, dir, base, suffix string) ([]storage.FileInfo, error) {
	full := s.full(dir)
	d, err := sh.Open(full)
	if errors.Is(err, fs.ErrNotExist) {
		// A subdirectory not made yet holds nothing; the location's own
		// directory gone is an outage (dirGone).
		if gone := s.dirGone(sh, "list", path.Join(dir, base+"*"+suffix), err); gone != err {
			return nil, gone
		}
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer d.Close()
	if fi, err := d.Stat(); err != nil || !fi.IsDir() {
		return nil, err
	}
	// '[' and ']' make a character class for the library's matching; '?'
	// stands for them on both sides, and the names are compared exactly
	// below. (Names have no '*' or '?', CheckName.)
	wild := strings.NewReplacer("[", "?", "]", "?")
	pattern := wild.Replace(base) + "*" + wild.Replace(suffix)
	if full != "" {
		pattern = wild.Replace(full) + "/" + pattern
	}
	matches, err := sh.Glob(pattern)
	if err != nil {
		return nil, err
	}
	// The handle still answers: the connection held through the Glob.
	if _, err := d.Stat(); err != nil {
		return nil, err
	}
	want := strings.ReplaceAll(full, "/", `\`)
	var names []string
	for _, m := range matches {
		i := strings.LastIndexByte(m, '\\')
		mdir, name := "", m
		if i >= 0 {
			mdir, name = m[:i], m[i+1:]
		}
		if mdir == want && len(name) >= len(base)+len(suffix) && strings.HasPrefix(name, base) && strings.HasSuffix(name, suffix) {
			names = append(names, name)
		}
	}
	// The stats go out together (the connection carries several requests
	// at once): a listing costs a few round trips, not two per file, on a
	// link to a remote site too.
	infos := make([]fs.FileInfo, len(names))
	errs := make([]error, len(names))
	sem := make(chan struct{}, statsInFlight)
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			infos[i], errs[i] = regular(sh, path.Join(full, name))
		}()
	}
	wg.Wait()
	var out []storage.FileInfo
	for i, name := range names {
		if errors.Is(errs[i], fs.ErrNotExist) || errors.Is(errs[i], storage.ErrNotRegular) {
			continue // removed since, or no regular file
		}
		if errs[i] != nil {
			return nil, errs[i]
		}
		out = append(out, storage.FileInfo{Name: path.Join(dir, name), Size: infos[i].Size(), ModTime: infos[i].ModTime()})
	}
	return out, nil
}

// statsInFlight bounds the stats one listing has in flight.
const statsInFlight = 16

// notRegular is why regular refused a name; it is a storage.ErrNotRegular.
type notRegular string

func (e notRegular) Error() string      { return string(e) }
func (notRegular) Is(target error) bool { return target == storage.ErrNotRegular }

// regular stats full as the server presents it and refuses what is not a
// regular file of that name: a directory (a junction is one), or a symbolic
// link the server reports instead of following it (Windows answers
// STATUS_STOPPED_ON_SYMLINK; the library then opens the target, whose name
// its answer carries). Samba follows or hides links itself, by its
// settings; a FIFO or device it shows as an empty file, or hides ("hide
// special files").
func regular(sh *smb2.Share, full string) (fs.FileInfo, error) {
	fi, err := sh.Stat(full)
	if err != nil {
		return nil, err
	}
	if err := checkRegular(fi, full); err != nil {
		return nil, err
	}
	return fi, nil
}

// checkRegular is regular's test of what the server answered for full.
func checkRegular(fi fs.FileInfo, full string) error {
	switch {
	case fi.IsDir():
		return notRegular("it is a directory")
	case fi.Name() != path.Base(full):
		return notRegular(fmt.Sprintf("it is a symbolic link (to %q)", fi.Name()))
	}
	return nil
}

// Rename checks that newName is free, then renames (the library always asks
// the server to replace; see storage.Storage.Rename for the window).
func (s *Storage) Rename(ctx context.Context, oldName, newName string) error {
	if err := s.check("rename", oldName); err != nil {
		return err
	}
	if err := s.check("rename", newName); err != nil {
		return err
	}
	if _, err := s.Stat(ctx, oldName); err != nil {
		return err
	}
	_, err := s.Stat(ctx, newName)
	switch {
	case err == nil:
		return &storage.Error{Op: "rename", Location: s.loc, Name: newName, Kind: storage.ErrExists,
			Err: fmt.Errorf("not replacing it with %q", oldName)}
	case !errors.Is(err, storage.ErrNotFound):
		return err
	}
	if err := s.mkdirParent(ctx, "rename", newName); err != nil {
		return err
	}
	return s.hiddenTarget(ctx, "rename", oldName, newName, s.doOnce(ctx, "rename", oldName, func(sh *smb2.Share) error {
		return sh.Rename(s.full(oldName), s.full(newName))
	}))
}

// hiddenTarget is err of a rename of oldName to newName, except that a
// "not found" while oldName is still there is newName's: Samba answers so
// for a name held by a link it does not follow or show (follow symlinks =
// no), as it does for a Create. A caller must not read it as a file of the
// set missing (the copier renames the .partial file it just wrote).
func (s *Storage) hiddenTarget(ctx context.Context, op, oldName, newName string, err error) error {
	if !errors.Is(err, storage.ErrNotFound) {
		return err
	}
	if _, serr := s.Stat(ctx, oldName); serr != nil {
		return err
	}
	return &storage.Error{Op: op, Location: s.loc, Name: newName, Kind: storage.ErrNotRegular,
		Err: fmt.Errorf("the server refuses to give %q this name, which is held by an entry it does not show, such as a symbolic link (follow symlinks = no)", oldName)}
}

// Replace is one SMB2 SET_INFO FileRenameInformation with ReplaceIfExists,
// which the server applies atomically.
func (s *Storage) Replace(ctx context.Context, oldName, newName string) error {
	if err := s.check("replace", oldName); err != nil {
		return err
	}
	if err := s.check("replace", newName); err != nil {
		return err
	}
	if err := s.mkdirParent(ctx, "replace", newName); err != nil {
		return err
	}
	return s.hiddenTarget(ctx, "replace", oldName, newName, s.doOnce(ctx, "replace", oldName, func(sh *smb2.Share) error {
		return sh.Rename(s.full(oldName), s.full(newName))
	}))
}

func (s *Storage) Remove(ctx context.Context, name string) error {
	if err := s.check("remove", name); err != nil {
		return err
	}
	return s.doOnce(ctx, "remove", name, func(sh *smb2.Share) error {
		// Lstat and Remove open the entry itself (a link, not its target).
		fi, err := sh.Lstat(s.full(name))
		if err != nil {
			return err
		}
		if fi.IsDir() {
			return notRegular("it is a directory")
		}
		return sh.Remove(s.full(name))
	})
}

func (s *Storage) FreeSpace(ctx context.Context) (int64, bool, error) {
	var free int64
	err := s.do(ctx, "statfs", "", func(sh *smb2.Share) error {
		fi, err := sh.Statfs(s.full(""))
		if err != nil {
			return err
		}
		free = int64(fi.AvailableBlockCount() * fi.BlockSize())
		return nil
	})
	if err != nil {
		return 0, false, err
	}
	return free, true, nil
}

// Close logs off every connection (once the calls in progress are done).
func (s *Storage) Close() error {
	for _, c := range s.conns {
		c.mu.Lock()
		l := c.cur
		c.cur = nil
		c.mu.Unlock()
		if l != nil {
			l.kill()
		}
	}
	return nil
}
