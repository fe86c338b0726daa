// Package mssql talks to SQL Server through go-mssqldb: it opens connections
// from an instance's configuration, runs long statements (BACKUP, RESTORE,
// DBCC CHECKDB) while streaming their progress messages, finds statements
// still running in sys.dm_exec_requests, reads RESTORE HEADERONLY /
// FILELISTONLY by column name, and classifies SQL Server errors into the
// kinds the backup cycle acts on (Classify).
//
// T-SQL that carries names (BACKUP, RESTORE, DBCC, ...) is built by
// internal/tsql; this package only sends it, plus a few fixed catalog queries
// whose values travel as parameters.
package mssql

import (
	"context"
	"crypto/x509"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	mssqldb "github.com/microsoft/go-mssqldb"
	// Registers the "ntlm" authenticator on every platform (go-mssqldb
	// makes it the default only outside Windows).
	_ "github.com/microsoft/go-mssqldb/integratedauth/ntlm"
	"github.com/microsoft/go-mssqldb/msdsn"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// Target says how to reach one SQL Server instance. Password is the resolved
// secret: a Target lives only inside an activity and is never logged (String
// leaves the password out).
type Target struct {
	Instance string // configuration name, for messages
	Address  string // host:port
	// User is a SQL login, or DOMAIN\user for a Windows login (NTLM).
	User string
	// Password is never encoded (json "-") nor printed (String, GoString).
	Password string `json:"-"`
	Database string // initial database; "" = the login's default
	// Encrypt is go-mssqldb's encrypt setting: "strict" (TDS 8.0, TLS
	// before anything else), "mandatory" (the whole session), "optional"
	// (the login packet at least) or "disable"; "" is go-mssqldb's default.
	Encrypt                string
	TrustServerCertificate bool
	HostNameInCertificate  string
	// CAFile is a PEM file of the CA certificates the server's certificate
	// must chain to ("" = the system's roots).
	CAFile string
	// ConnectTimeout bounds dialing and login only: a BACKUP may stay
	// silent for minutes, so no read deadline is set on the connection.
	ConnectTimeout time.Duration
	AppName        string
}

// String names the instance for messages and logs, without the password.
func (t Target) String() string {
	if t.Instance == "" || t.Instance == t.Address {
		return t.Address
	}
	return fmt.Sprintf("%s (%s)", t.Instance, t.Address)
}

// GoString is String for %#v, which would otherwise print every field.
func (t Target) GoString() string { return "mssql.Target{" + t.String() + ", password hidden}" }

// TargetFor builds the Target of a configured instance, resolving its
// password reference now.
func TargetFor(inst config.SQLInstance, database string) (Target, error) {
	pw, err := config.ResolveSecret(inst.Password)
	if err != nil {
		return Target{}, fmt.Errorf("password of SQL instance %s: %w", inst.Name, err)
	}
	return Target{
		Instance: inst.Name, Address: inst.Address, User: inst.User, Password: pw, Database: database,
		Encrypt: inst.Encrypt, TrustServerCertificate: inst.TrustServerCertificate,
		HostNameInCertificate: inst.HostNameInCertificate, CAFile: inst.CAFile, ConnectTimeout: inst.ConnectTimeout,
	}, nil
}

// NTLM reports whether t logs in as a Windows user (DOMAIN\user), which
// go-mssqldb authenticates with NTLM instead of a SQL login.
func (t Target) NTLM() bool { return strings.Contains(t.User, `\`) }

// dsn is the go-mssqldb URL of t. It holds the password: never log it.
func (t Target) dsn() (string, error) {
	host, port, err := net.SplitHostPort(t.Address)
	if err != nil || host == "" || port == "" {
		return "", fmt.Errorf("SQL instance %s: address %q is not host:port (e.g. sql01:1433)", t.Instance, t.Address)
	}
	q := url.Values{}
	if t.Database != "" && !t.enterWithUse() {
		q.Set("database", t.Database)
	}
	if t.Encrypt != "" {
		q.Set("encrypt", t.Encrypt)
	}
	if t.TrustServerCertificate {
		q.Set("TrustServerCertificate", "true")
	}
	if t.HostNameInCertificate != "" {
		q.Set("hostNameInCertificate", t.HostNameInCertificate)
	}
	if t.NTLM() {
		// Explicit, so a failing NTLM setup is reported instead of
		// go-mssqldb silently falling back to SQL authentication.
		q.Set("authenticator", "ntlm")
	}
	ct := t.ConnectTimeout
	if ct <= 0 {
		ct = 30 * time.Second
	}
	// "dial timeout", never "connection timeout": the latter is a deadline
	// on every read and would cut a BACKUP that is quiet between messages.
	q.Set("dial timeout", strconv.Itoa(int(max(1, ct/time.Second))))
	// A host that dies without closing the socket is noticed by keepalives.
	q.Set("keepalive", "10")
	app := t.AppName
	if app == "" {
		app = "backupcycle"
	}
	q.Set("app name", app)
	u := url.URL{Scheme: "sqlserver", User: url.UserPassword(t.User, t.Password), Host: t.Address, RawQuery: q.Encode()}
	return u.String(), nil
}

// DB is a pool of connections to one instance.
type DB struct {
	*sql.DB
	Target Target
	login  time.Duration
	dsn    string // holds the password: never log it
}

// Open connects to t and checks the login with a ping. Errors are
// classified (LoginFailed, DatabaseNotFound, Unreachable, ...).
func Open(ctx context.Context, t Target) (*DB, error) {
	dsn, err := t.dsn()
	if err != nil {
		return nil, &Failure{Kind: ErrInvalidTarget, Target: t.String(), Err: err}
	}
	conn, err := t.connector(dsn)
	if err != nil {
		return nil, err
	}
	ct := t.ConnectTimeout
	if ct <= 0 {
		ct = 30 * time.Second
	}
	// go-mssqldb reads the server's replies during the login without a
	// deadline (its "connection timeout" would be one on every read): a
	// server that takes the connection and never answers would hold the
	// ping below past its context. The connections the ping dials get the
	// login's deadline, lifted once it is in.
	pctx, cancel := context.WithTimeout(ctx, ct)
	defer cancel()
	by, _ := pctx.Deadline()
	d := &watchDialer{loginBy: by}
	conn.Dialer = d
	db := &DB{DB: sql.OpenDB(conn), Target: t, dsn: dsn}
	db.login = ct
	err = db.PingContext(pctx)
	d.loggedIn()
	if err != nil {
		_ = db.Close()
		return nil, Classify(t, "connect", err)
	}
	return db, nil
}

// connector is go-mssqldb's connector for t's dsn. Every session it opens
// runs tsql.SetLanguageEnglish after login and after each session reset, so
// message texts (and the date format) are us_english whatever the login's
// default language. The CA file is read here, whenever a pool is opened, so
// a renewed CA is picked up without a restart; it goes to the TLS settings
// directly because go-mssqldb's own "certificate" parameter picks the
// format by file extension (.pem/.der only).
func (t Target) connector(dsn string) (*mssqldb.Connector, error) {
	cfg, err := msdsn.Parse(dsn)
	if err != nil {
		// The parser's message may quote the DSN: keep it out.
		return nil, &Failure{Kind: ErrInvalidTarget, Target: t.String(),
			Err: errors.New("connection settings rejected by go-mssqldb: check encrypt, address and user")}
	}
	if t.CAFile != "" && cfg.TLSConfig != nil {
		pool, err := loadCAFile(t.CAFile)
		if err != nil {
			return nil, &Failure{Kind: ErrInvalidTarget, Target: t.String(), Err: err}
		}
		cfg.TLSConfig = cfg.TLSConfig.Clone()
		cfg.TLSConfig.RootCAs = pool
	}
	conn := mssqldb.NewConnectorConfig(cfg)
	conn.SessionInitSQL = tsql.SetLanguageEnglish
	if t.enterWithUse() {
		use, err := tsql.UseDatabase(t.Database)
		if err != nil {
			return nil, &Failure{Kind: ErrInvalidTarget, Target: t.String(), Err: err}
		}
		conn.SessionInitSQL += "; " + use
	}
	return conn, nil
}

// enterWithUse reports a database entered with USE after the login (in
// master) instead of naming it in LOGIN7: go-mssqldb v1.11.2 sends the login
// database's length in characters, not UTF-16 code units, so a name with a
// character outside the BMP arrives cut short (4060). USE runs again after
// every session reset, like the language.
func (t Target) enterWithUse() bool { return !tsql.LoginSafe(t.Database) }

// loadCAFile reads a PEM file of CA certificates.
func loadCAFile(name string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("ca_file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("ca_file %s holds no PEM certificate (-----BEGIN CERTIFICATE-----)", name)
	}
	return pool, nil
}

// Conn pins one connection (a session) of the pool, e.g. to know the
// session id a long statement runs on.
func (db *DB) Conn(ctx context.Context) (*sql.Conn, error) {
	c, err := db.DB.Conn(ctx)
	if err != nil {
		return nil, Classify(db.Target, "connect", err)
	}
	return c, nil
}

// statementDB opens a one-connection pool for one long statement, whose
// connection closes dead when a read or write on it fails: the driver does
// not report a connection lost before the first reply packet to a caller
// waiting for messages.
func (db *DB) statementDB() (*sql.DB, <-chan struct{}, error) {
	conn, err := db.Target.connector(db.dsn)
	if err != nil {
		return nil, nil, err
	}
	d := &watchDialer{dead: make(chan struct{})}
	conn.Dialer = d
	s := sql.OpenDB(conn)
	s.SetMaxOpenConns(1)
	return s, d.dead, nil
}

// watchDialer dials TCP with keepalives; with dead set, it closes dead at
// the first failed read or write of any connection it made, and remembers
// the connections (Sent.Vanish closes them).
//
// With loginBy set, the connections it dials until loggedIn get that
// deadline (Open's login check).
type watchDialer struct {
	dead    chan struct{}
	once    sync.Once
	mu      sync.Mutex
	conns   []net.Conn
	loginBy time.Time
	login   []net.Conn
}

func (d *watchDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{KeepAlive: 10 * time.Second}).DialContext(ctx, network, addr)
	if err != nil {
		return c, err
	}
	d.mu.Lock()
	if !d.loginBy.IsZero() {
		if err := c.SetDeadline(d.loginBy); err != nil {
			d.mu.Unlock()
			_ = c.Close()
			return nil, err
		}
		d.login = append(d.login, c)
	}
	d.mu.Unlock()
	if d.dead == nil {
		return c, nil
	}
	d.remember(c)
	return &watchedConn{Conn: c, d: d}, nil
}

// loggedIn lifts the login deadline from the connections dialled for it
// (the pool keeps them for statements of any length) and from later ones.
func (d *watchDialer) loggedIn() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.login {
		_ = c.SetDeadline(time.Time{})
	}
	d.loginBy, d.login = time.Time{}, nil
}

type watchedConn struct {
	net.Conn
	d *watchDialer
}

func (c *watchedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil {
		c.d.once.Do(func() { close(c.d.dead) })
	}
	return n, err
}

func (c *watchedConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if err != nil {
		c.d.once.Do(func() { close(c.d.dead) })
	}
	return n, err
}

// OpenInstance connects to a configured instance with its configured
// credentials, to database, as app (the session's program_name).
func OpenInstance(ctx context.Context, inst *config.SQLInstance, database, app string) (*DB, error) {
	t, err := TargetFor(*inst, database)
	if err != nil {
		return nil, err
	}
	t.AppName = app
	return Open(ctx, t)
}
