package tds

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
)

// handshakeTimeout bounds PRELOGIN + LOGIN7, so a client that connects and
// says nothing does not hold a connection forever.
const handshakeTimeout = 30 * time.Second

// firstSPID is the first session id handed out; SQL Server reserves the
// ones below 51 for system sessions.
const firstSPID = 51

// Server accepts TDS connections and hands their requests to a Handler.
type Server struct {
	h    Handler
	opts Options
	log  *zap.Logger

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	spids     map[uint16]bool
	nextSPID  uint16
	closed    bool
	wg        sync.WaitGroup // connection goroutines
}

// NewServer returns a server for h. Zero Options fields get SQL Server
// 2022's version (16.0.4135) and the server name "sqlsim"; a nil logger
// logs nothing.
func NewServer(h Handler, opts Options, log *zap.Logger) *Server {
	if opts.ServerName == "" {
		opts.ServerName = "sqlsim"
	}
	if opts.Major == 0 {
		opts.Major, opts.Minor, opts.Build = 16, 0, 4135
	}
	if log == nil {
		log = zap.NewNop()
	}
	return &Server{
		h: h, opts: opts, log: log,
		listeners: map[net.Listener]struct{}{},
		conns:     map[*conn]struct{}{},
		spids:     map[uint16]bool{},
		nextSPID:  firstSPID,
	}
}

// Serve accepts connections on l until Close. It returns nil after Close
// and an error if accepting fails for another reason.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = l.Close()
		return nil
	}
	s.listeners[l] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, l)
		s.mu.Unlock()
	}()

	var backoff time.Duration
	for {
		nc, err := l.Accept()
		if err != nil {
			if s.isClosed() {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			return fmt.Errorf("tds: accept on %s: %w", l.Addr(), err)
		}
		backoff = 0
		s.startConn(nc)
	}
}

// Addr is the address of one listener being served, or nil.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	for l := range s.listeners {
		return l.Addr()
	}
	return nil
}

// SPIDs lists the session ids of the open connections, sorted.
func (s *Server) SPIDs() []uint16 {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]uint16, 0, len(s.spids))
	for id := range s.spids {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// DropConnections drops every open connection at once, without a reply,
// and keeps accepting new ones: what clients see when the host crashes
// and comes back. It does not wait for the handlers to return, so it may
// be called from inside a handler.
func (s *Server) DropConnections() {
	s.mu.Lock()
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.close("connection dropped by the server (DropConnections)", false)
	}
}

// DropConnection drops the connection of session spid at once, without a
// reply, as a network failure would; the server keeps running. The request
// in progress on it sees its ctx cancelled. It reports whether such a
// connection was open, and may be called from inside a handler.
func (s *Server) DropConnection(spid uint16) bool {
	s.mu.Lock()
	var victim *conn
	for c := range s.conns {
		if c.spid == spid {
			victim = c
			break
		}
	}
	s.mu.Unlock()
	if victim == nil {
		return false
	}
	victim.close("connection dropped by the server (DropConnection)", false)
	return true
}

// Close stops accepting, drops every connection and waits for their
// goroutines (and so for the handlers) to return. It must not be called
// from inside a handler.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	var errs []error
	for l := range s.listeners {
		if err := l.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	s.mu.Unlock()
	s.DropConnections()
	s.wg.Wait()
	return errors.Join(errs...)
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

func (s *Server) startConn(nc net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		_ = nc.Close()
		return
	}
	spid := s.nextSPID
	for s.spids[spid] {
		spid++
		if spid > 32767 {
			spid = firstSPID
		}
	}
	s.nextSPID = spid + 1
	if s.nextSPID > 32767 {
		s.nextSPID = firstSPID
	}
	s.spids[spid] = true
	c := newConn(s, nc, spid)
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	go c.serve()
}

func (s *Server) removeConn(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
	delete(s.spids, c.spid)
}

// conn is one client connection. Its main goroutine logs in and then
// serves requests one at a time and is the only writer; a reader goroutine
// reads the socket all along, so an attention (cancel) is seen while a
// statement runs or while a write is blocked on a slow client.
type conn struct {
	s    *Server
	nc   net.Conn
	spid uint16
	log  *zap.Logger
	pr   *packetReader
	pw   *packetWriter
	sess Session
	ver  uint32 // the TDS version acknowledged at login (negotiateVersion)

	ctx    context.Context // cancelled when the connection ends
	cancel context.CancelFunc

	requests chan *pending // reader -> main goroutine
	tranID   uint64

	mu  sync.Mutex
	cur *pending // request in progress, for attention

	// peeked replays the first byte read to detect TDS 8.0 (Options.TLS);
	// encrypted is set once pr and pw run over TLS.
	peeked    *prefixConn
	encrypted bool

	closeOnce sync.Once
}

// pending is one request handed from the reader to the main goroutine.
type pending struct {
	kind  byte // packetSQLBatch, packetRPC, packetTransMgr or packetAttention
	reset bool
	req   Request
	call  rpcCall
	tm    uint16

	ctx    context.Context
	cancel context.CancelFunc
	// attention cancels ctx with the cause ErrAttention.
	attention context.CancelFunc
	attn      bool // attention received while in progress; guarded by conn.mu
}

func newConn(s *Server, nc net.Conn, spid uint16) *conn {
	c := &conn{
		s: s, nc: nc, spid: spid,
		log:      s.log.With(zap.String("remote", nc.RemoteAddr().String()), zap.Uint16("spid", spid)),
		pr:       newPacketReader(nc, s.opts.MaxMessageSize),
		pw:       newPacketWriter(nc, spid),
		requests: make(chan *pending),
		ver:      tds74, // until LOGIN7 says otherwise
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	c.ctx, c.cancel = ctx, func() { cancel(ErrConnectionClosed) }
	return c
}

// close ends the connection once; the first reason is logged.
func (c *conn) close(reason string, bad bool) {
	c.closeOnce.Do(func() {
		switch {
		case bad:
			c.log.Warn("closing connection", zap.String("reason", reason))
		case reason != "":
			c.log.Debug("closing connection", zap.String("reason", reason))
		}
		c.cancel()
		_ = c.nc.Close()
	})
}

func (c *conn) serve() {
	readerDone := make(chan struct{})
	started := false
	defer func() {
		if r := recover(); r != nil {
			c.close(fmt.Sprintf("panic: %v\n%s", r, debug.Stack()), true)
		}
		c.close("", false)
		if started {
			<-readerDone
		}
		if c.sess != nil {
			c.sess.Close()
		}
		c.s.removeConn(c)
		c.s.wg.Done()
	}()

	if !c.login() {
		return
	}
	started = true
	go c.readLoop(readerDone)
	for p := range c.requests {
		if !c.handle(p) {
			return
		}
	}
}

// readFailed closes the connection after a failed read, with the reason.
func (c *conn) readFailed(err error) {
	var pe *protocolError
	var ne net.Error
	switch {
	case errors.As(err, &pe):
		c.close(pe.reason, true)
	case errors.Is(err, io.EOF):
		c.close("client closed the connection", false)
	case errors.As(err, &ne) && ne.Timeout():
		c.close("read timeout: the client sent part of a message and stopped", true)
	default:
		c.close("read: "+err.Error(), false)
	}
}

// login runs PRELOGIN and LOGIN7. It reports whether the session is open.
func (c *conn) login() bool {
	_ = c.nc.SetDeadline(time.Now().Add(handshakeTimeout))
	if c.tlsEnabled() {
		strict, err := c.peekTLS()
		switch {
		case err != nil:
			c.readFailed(err)
			return false
		case strict:
			if err := c.startStrict(); err != nil {
				c.close(err.Error(), true)
				return false
			}
		case c.s.opts.TLSStrict:
			c.close("the client sent PRELOGIN in clear; the server requires TDS 8.0 (encrypt=strict)", true)
			return false
		}
	}
	msg, err := c.pr.readMessage()
	if err != nil {
		c.readFailed(err)
		return false
	}
	if msg.typ != packetPrelogin {
		c.close(fmt.Sprintf("expected PRELOGIN, got packet type 0x%02X", msg.typ), true)
		return false
	}
	opts, err := decodePrelogin(msg.data)
	if err != nil {
		c.readFailed(err)
		return false
	}
	encryption, startTLS, refuse := byte(encryptOn), false, error(nil)
	if !c.encrypted {
		encryption, startTLS, refuse = c.preloginEncryption(opts[preloginEncryption])
	}
	_, _ = c.pw.Write(preloginReply(c.s.opts, encryption))
	if err := c.pw.endMessage(); err != nil {
		c.close("write PRELOGIN reply: "+err.Error(), false)
		return false
	}
	if refuse != nil {
		c.close(refuse.Error(), false)
		return false
	}
	if startTLS {
		if err := c.startTLS7(); err != nil {
			c.close(err.Error(), true)
			return false
		}
	}

	msg, err = c.pr.readMessage()
	if err != nil {
		c.readFailed(err)
		return false
	}
	if msg.typ != packetLogin7 {
		c.close(fmt.Sprintf("expected LOGIN7, got packet type 0x%02X (a TLS handshake? the server was started without TLS: use encrypt=disable)", msg.typ), true)
		return false
	}
	l7, err := decodeLogin7(msg.data)
	if err == nil {
		c.ver, err = negotiateVersion(l7.TDSVersion)
	}
	if err != nil {
		c.readFailed(err)
		return false
	}
	size := negotiatePacketSize(l7.PacketSize)
	c.pw.setSize(size)
	c.pr.maxPacket = size

	var sess Session
	login := Login{
		User: l7.User, Password: l7.Password, Database: l7.Database, Language: l7.Language, AppName: l7.AppName,
		HostName: l7.HostName, PacketSize: size, SPID: c.spid, RemoteAddr: c.nc.RemoteAddr(),
		LocalAddr: c.nc.LocalAddr(), Encrypted: c.encrypted, TDSVersion: c.ver,
	}
	if l7.SSPI {
		var ok bool
		login.User, login.Password, login.Windows = "", "", true
		if login.User, ok = c.windowsLogin(l7.SSPIData); !ok {
			return false
		}
		if login.User == "" {
			err = &Error{Number: 18452, State: 1, Class: 14,
				Message: "Login failed. The login is from an untrusted domain and cannot be used with Integrated authentication."}
		}
	}
	if err == nil {
		sess, err = c.s.h.Login(c.ctx, login)
	}
	if err != nil {
		if errors.Is(err, ErrKillConnection) {
			c.close("login: handler killed the connection", false)
			return false
		}
		var b []byte
		for _, e := range c.toErrors(err) {
			b = appendMessage(b, true, e, c.s.opts.ServerName, c.ver)
		}
		b = c.appendDone(b, tokenDone, doneError, 0, 0)
		_, _ = c.pw.Write(b)
		_ = c.pw.endMessage()
		c.close("login failed: "+err.Error(), false)
		return false
	}
	c.sess = sess
	_, _ = c.pw.Write(c.loginReply(sess.Database(), size))
	if err := c.pw.endMessage(); err != nil {
		c.close("write login reply: "+err.Error(), false)
		return false
	}
	_ = c.nc.SetDeadline(time.Time{})
	c.log.Debug("login", zap.String("user", l7.User), zap.String("db", sess.Database()), zap.Int("packet_size", size))
	return true
}

// windowsLogin runs the NTLM exchange of an integrated-security LOGIN7:
// the CHALLENGE_MESSAGE in an SSPI token, the client's AUTHENTICATE_MESSAGE
// in an SSPI packet. It returns DOMAIN\user when the response proves the
// account's password, "" when it does not (or the handler takes no
// Windows logins); ok is false when the connection was closed.
func (c *conn) windowsLogin(negotiate []byte) (login string, ok bool) {
	accounts, can := c.s.h.(WindowsAccounts)
	if !can {
		return "", true
	}
	x, challenge, err := newNTLMExchange(negotiate, accounts.WindowsDomain(), c.s.opts.ServerName)
	if err != nil {
		return "", true
	}
	const tokenSSPI = 0xED
	_, _ = c.pw.Write(append([]byte{tokenSSPI, byte(len(challenge)), byte(len(challenge) >> 8)}, challenge...))
	if err := c.pw.endMessage(); err != nil {
		c.close("write SSPI challenge: "+err.Error(), false)
		return "", false
	}
	msg, err := c.pr.readMessage()
	if err != nil {
		c.readFailed(err)
		return "", false
	}
	if msg.typ != packetSSPI {
		c.close(fmt.Sprintf("expected an SSPI message after the NTLM challenge, got packet type 0x%02X", msg.typ), true)
		return "", false
	}
	user, err := x.verify(msg.data, accounts.WindowsPassword)
	if err != nil {
		c.log.Info("NTLM login refused", zap.String("user", user))
		return "", true
	}
	return user, true
}

// readLoop reads messages until the connection ends: requests go to the
// main goroutine, attentions cancel the request in progress.
func (c *conn) readLoop(done chan<- struct{}) {
	defer close(done)
	defer close(c.requests)
	defer func() {
		if r := recover(); r != nil {
			c.close(fmt.Sprintf("panic in reader: %v\n%s", r, debug.Stack()), true)
		}
	}()
	if t := c.s.opts.ReadTimeout; t > 0 {
		c.pr.afterFirst = func() { _ = c.nc.SetReadDeadline(time.Now().Add(t)) }
	}
	for {
		msg, err := c.pr.readMessage()
		if err != nil {
			c.readFailed(err)
			return
		}
		if c.pr.afterFirst != nil {
			_ = c.nc.SetReadDeadline(time.Time{})
		}
		p, err := decodeRequest(msg, c.ver >= tds72)
		if err != nil {
			c.readFailed(err)
			return
		}
		if p.kind == packetAttention {
			c.mu.Lock()
			cur := c.cur
			if cur != nil {
				cur.attn = true
			}
			c.mu.Unlock()
			if cur != nil {
				cur.attention()
				continue
			}
			// Idle: the response already ended; the main goroutine sends a
			// message with only DONE(ATTN).
		} else {
			ctx, cancel := context.WithCancelCause(c.ctx)
			p.ctx, p.cancel, p.attention = ctx, func() { cancel(nil) }, func() { cancel(ErrAttention) }
			c.mu.Lock()
			c.cur = p
			c.mu.Unlock()
		}
		select {
		case c.requests <- p:
		case <-c.ctx.Done():
			return
		}
	}
}

// decodeRequest decodes a message received after login. Requests start
// with ALL_HEADERS from TDS 7.2 on (§2.2.5.3); a 7.1 client sends none.
func decodeRequest(msg message, headers bool) (*pending, error) {
	p := &pending{kind: msg.typ, reset: msg.reset}
	var err error
	switch msg.typ {
	case packetAttention:
	case packetSQLBatch:
		p.req.SQL, err = decodeSQLBatch(msg.data, headers)
	case packetRPC:
		p.call, err = decodeRPC(msg.data, headers)
	case packetTransMgr:
		p.tm, err = decodeTransMgr(msg.data, headers)
	default:
		err = malformed("unexpected packet type 0x%02X after login", msg.typ)
	}
	return p, err
}

// toErrors turns a handler error into the ERROR tokens to send.
func (c *conn) toErrors(err error) Errors {
	var es Errors
	if errors.As(err, &es) && len(es) > 0 {
		return es
	}
	var e *Error
	if errors.As(err, &e) {
		return Errors{e}
	}
	c.log.Error("request failed with a non-SQL error", zap.Error(err))
	return Errors{{Number: 50000, State: 1, Class: 16, Message: err.Error()}}
}

// handle serves one request; false means the connection is finished.
func (c *conn) handle(p *pending) bool {
	if p.kind == packetAttention {
		_, _ = c.pw.Write(c.appendDone(nil, tokenDone, doneAttn, 0, 0))
		return c.pw.endMessage() == nil
	}
	defer p.cancel()
	rw := &resultWriter{c: c, p: p, rpc: p.kind == packetRPC, langBefore: sessionLanguage(c.sess)}
	if p.reset {
		before := c.sess.Database()
		c.sess.Reset()
		rw.pre = envChangeString(rw.pre, envResetConnAck, "", "")
		if db := c.sess.Database(); db != before {
			rw.pre = envChangeString(rw.pre, envDatabase, db, before)
		}
	}
	dbBefore := c.sess.Database()

	var err error
	switch {
	case p.kind == packetTransMgr:
		return c.transaction(p, rw)
	case p.kind == packetRPC && p.call.Unsupported != nil:
		err = p.call.Unsupported
	case p.kind == packetRPC && !p.call.isExecuteSQL():
		err = &Error{Number: 2812, State: 62, Class: 16,
			Message: fmt.Sprintf("Could not find stored procedure '%s'.", p.call.procName())}
	case p.kind == packetRPC:
		p.req, err = p.call.request()
		if err != nil {
			err = &Error{Number: 214, State: 2, Class: 16,
				Message: "Procedure expects parameter '@statement' of type 'ntext/nchar/nvarchar'. (" + err.Error() + ")"}
		} else {
			err = c.sess.Exec(p.ctx, p.req, rw)
		}
	default:
		err = c.sess.Exec(p.ctx, p.req, rw)
	}
	if errors.Is(err, ErrKillConnection) {
		c.close("handler killed the connection", false)
		return false
	}
	rw.finish(err, dbBefore)
	if rw.fatal || isFatal(err) {
		// SQL Server ends the session after a fatal error: the client has
		// the error tokens, then the connection closes.
		c.close("error of severity 20 or more: the session ends", false)
		return false
	}
	if c.pw.err != nil {
		c.close("write: "+c.pw.err.Error(), false)
		return false
	}
	return true
}

// transaction answers BEGIN/COMMIT/ROLLBACK requests from database/sql's
// BeginTx. The emulator has no transactions: it only keeps the protocol
// moving with the descriptors the driver expects.
func (c *conn) transaction(p *pending, rw *resultWriter) bool {
	c.endRequest(p)
	b := rw.pre
	id := func() []byte { return appendU32(appendU32(nil, uint32(c.tranID)), uint32(c.tranID>>32)) }
	switch p.tm {
	case tmBegin:
		c.tranID++
		b = envChangeBytes(b, envBeginTran, id(), nil)
		b = c.appendDone(b, tokenDone, 0, 0, 0)
	case tmCommit:
		b = envChangeBytes(b, envCommitTran, nil, id())
		b = c.appendDone(b, tokenDone, 0, 0, 0)
	case tmRollback:
		b = envChangeBytes(b, envRollbackTran, nil, id())
		b = c.appendDone(b, tokenDone, 0, 0, 0)
	default:
		b = c.appendMsg(b, true, &Error{Number: 40515, State: 1, Class: 16,
			Message: fmt.Sprintf("Transaction manager request %d is not supported by the emulator.", p.tm)})
		b = c.appendDone(b, tokenDone, doneError, 0, 0)
	}
	_, _ = c.pw.Write(b)
	return c.pw.endMessage() == nil
}

// endRequest marks p finished and reports whether an attention arrived
// while it ran. After this, an attention is answered as idle.
func (c *conn) endRequest(p *pending) (attn bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == p {
		c.cur = nil
	}
	return p.attn
}
