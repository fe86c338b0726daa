package tds

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// Encryption, as SQL Server does it (MS-TDS §2.2.6.5, §3.3.5.1; "TDS 8.0",
// https://learn.microsoft.com/en-us/sql/relational-databases/security/networking/tds-8):
//
//   - TDS 7.x: PRELOGIN travels in clear; when both sides agree to encrypt,
//     the TLS handshake runs inside TDS PRELOGIN packets, and then LOGIN7
//     and (with ENCRYPT_ON/REQ) every later packet travel as TLS records
//     straight on the socket. A server that requires encryption answers
//     ENCRYPT_REQ to a client that offered ENCRYPT_OFF, and ends the
//     connection of a client that cannot encrypt (ENCRYPT_NOT_SUP).
//     SQL Server offers TLS 1.2 here: TLS 1.3 needs TDS 8.0.
//   - TDS 8.0 (encrypt=strict): the TLS handshake comes first, with ALPN
//     "tds/8.0", and PRELOGIN, LOGIN7 and the rest run inside it.

// PRELOGIN ENCRYPTION values.
const (
	encryptOff    = 0x00
	encryptOn     = 0x01
	encryptReq    = 0x03
	encryptStrict = 0x04
)

// alpnTDS8 is the ALPN protocol of TDS 8.0.
const alpnTDS8 = "tds/8.0"

// errNoEncryption refuses a client that cannot encrypt on a server that
// requires it.
var errNoEncryption = errors.New("the client does not support encryption (PRELOGIN ENCRYPT_NOT_SUP) and the server requires it")

// tlsMode is how the server answers a connection's first bytes.
func (c *conn) tlsEnabled() bool { return c.s.opts.TLS != nil }

// peekTLS reads the first byte of the connection and reports whether the
// client starts with a TLS handshake record (TDS 8.0). The byte is replayed
// to whoever reads next.
func (c *conn) peekTLS() (bool, error) {
	var b [1]byte
	if _, err := io.ReadFull(c.nc, b[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = io.EOF
		}
		return false, err
	}
	pc := &prefixConn{Conn: c.nc, prefix: b[:]}
	c.pr = newPacketReader(pc, c.s.opts.MaxMessageSize)
	c.peeked = pc
	return b[0] == 0x16, nil // TLS record type handshake
}

// startStrict runs the TDS 8.0 TLS handshake on the raw socket; afterwards
// every packet travels inside TLS.
func (c *conn) startStrict() error {
	cfg := c.s.opts.TLS.Clone()
	cfg.NextProtos = []string{alpnTDS8}
	tc := tls.Server(c.peeked, cfg)
	if err := tc.Handshake(); err != nil {
		return fmt.Errorf("TDS 8.0 TLS handshake: %w", err)
	}
	if p := tc.ConnectionState().NegotiatedProtocol; p != alpnTDS8 {
		return fmt.Errorf("TDS 8.0 TLS handshake: ALPN %q, want %q", p, alpnTDS8)
	}
	c.useTransport(tc)
	return nil
}

// preloginEncryption decides the ENCRYPTION answer to the client's offer:
// with TLS configured, encryption is required (ENCRYPT_REQ to a client that
// offered OFF, ENCRYPT_ON to one that asked for it); without it, NOT_SUP.
func (c *conn) preloginEncryption(client []byte) (reply byte, encrypt bool, err error) {
	if !c.tlsEnabled() {
		return encryptNotSupported, false, nil
	}
	offer := byte(encryptOff)
	if len(client) > 0 {
		offer = client[0]
	}
	switch offer {
	case encryptNotSupported:
		return encryptReq, false, errNoEncryption
	case encryptOn, encryptReq:
		return encryptOn, true, nil
	}
	return encryptReq, true, nil
}

// startTLS7 runs the TDS 7.x TLS handshake inside PRELOGIN packets and
// switches the connection to TLS records on the socket.
func (c *conn) startTLS7() error {
	cfg := c.s.opts.TLS.Clone()
	cfg.MaxVersion = tls.VersionTLS12
	hc := &handshakeConn{Conn: c.nc, c: c, handshaking: true}
	if c.peeked != nil {
		hc.Conn = c.peeked
	}
	tc := tls.Server(hc, cfg)
	err := tc.Handshake()
	if err == nil {
		err = hc.finish() // the server's last flight (ChangeCipherSpec, Finished)
	}
	if err != nil {
		return fmt.Errorf("TLS handshake inside PRELOGIN: %w", err)
	}
	c.useTransport(tc)
	return nil
}

// useTransport makes every later read and write go through t (TLS); the
// socket itself (c.nc) is still what deadlines and close act on, so a
// dropped connection sends nothing, not even a TLS alert.
func (c *conn) useTransport(t io.ReadWriter) {
	c.pr = newPacketReader(t, c.s.opts.MaxMessageSize)
	c.pw = newPacketWriter(t, c.spid)
	c.encrypted = true
}

// prefixConn replays bytes already read from the socket.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (p *prefixConn) Read(b []byte) (int, error) {
	if len(p.prefix) > 0 {
		n := copy(b, p.prefix)
		p.prefix = p.prefix[n:]
		return n, nil
	}
	return p.Conn.Read(b)
}

// handshakeConn carries TLS handshake records in TDS PRELOGIN packets while
// handshaking, then passes bytes straight to the socket.
type handshakeConn struct {
	net.Conn
	c           *conn
	handshaking bool
	in          []byte
	pending     bool
}

func (h *handshakeConn) Read(b []byte) (int, error) {
	if !h.handshaking {
		return h.Conn.Read(b)
	}
	if err := h.flush(); err != nil {
		return 0, err
	}
	for len(h.in) == 0 {
		msg, err := h.c.pr.readMessage()
		if err != nil {
			return 0, err
		}
		if msg.typ != packetPrelogin {
			return 0, malformed("packet type 0x%02X during the TLS handshake, want PRELOGIN (0x12)", msg.typ)
		}
		h.in = msg.data
	}
	n := copy(b, h.in)
	h.in = h.in[n:]
	return n, nil
}

func (h *handshakeConn) Write(b []byte) (int, error) {
	if !h.handshaking {
		return h.Conn.Write(b)
	}
	h.pending = true
	return h.c.pw.Write(b)
}

// flush sends a pending handshake flight as one TDS message.
func (h *handshakeConn) flush() error {
	if !h.pending {
		return nil
	}
	h.pending = false
	return h.c.pw.endMessage()
}

func (h *handshakeConn) finish() error {
	err := h.flush()
	h.handshaking = false
	return err
}

func (h *handshakeConn) SetDeadline(t time.Time) error { return h.Conn.SetDeadline(t) }
