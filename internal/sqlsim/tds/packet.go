package tds

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
)

// Packet types (MS-TDS §2.2.3.1.1).
const (
	packetSQLBatch  byte = 0x01
	packetRPC       byte = 0x03
	packetReply     byte = 0x04
	packetAttention byte = 0x06
	packetTransMgr  byte = 0x0E
	packetLogin7    byte = 0x10
	packetSSPI      byte = 0x11 // an SSPI (NTLM) message after LOGIN7
	packetPrelogin  byte = 0x12
)

// Packet status bits. Only EOM decides where a message ends: the driver
// keeps RESETCONNECTION on every packet of a reset-flagged message.
const (
	statusEOM   byte = 0x01
	statusReset byte = 0x08
)

const (
	headerSize        = 8
	minPacketSize     = 512
	maxPacketSize     = 32767
	defaultPacketSize = 4096
	// defaultMaxMessage bounds one client message (a batch or an RPC with
	// its parameters) so a hostile length cannot exhaust memory.
	defaultMaxMessage = 64 << 20
)

// protocolError is malformed client input: the connection is closed and
// the reason logged.
type protocolError struct{ reason string }

func (e *protocolError) Error() string { return "tds: malformed input: " + e.reason }

func malformed(format string, args ...any) error {
	return &protocolError{reason: fmt.Sprintf(format, args...)}
}

// message is one reassembled client message.
type message struct {
	typ   byte
	reset bool // RESETCONNECTION was set
	data  []byte
}

// packetReader reassembles packets into messages.
type packetReader struct {
	r          io.Reader
	maxPacket  int // largest packet accepted (the negotiated size)
	maxMessage int
	// afterFirst, when set, runs after the first packet of a message has
	// arrived (the server arms its read deadline there).
	afterFirst func()
	hdr        [headerSize]byte
}

func newPacketReader(r io.Reader, maxMessage int) *packetReader {
	if maxMessage <= 0 {
		maxMessage = defaultMaxMessage
	}
	return &packetReader{r: r, maxPacket: maxPacketSize, maxMessage: maxMessage}
}

// readMessage returns the next whole message. io.EOF means the client
// closed the connection between messages; a *protocolError means the
// bytes were not TDS.
func (pr *packetReader) readMessage() (message, error) {
	var msg message
	for first := true; ; first = false {
		if _, err := io.ReadFull(pr.r, pr.hdr[:]); err != nil {
			if first && err == io.EOF {
				return msg, io.EOF
			}
			if err == io.ErrUnexpectedEOF || err == io.EOF {
				return msg, malformed("connection closed inside a packet header")
			}
			return msg, err
		}
		typ, status := pr.hdr[0], pr.hdr[1]
		size := int(binary.BigEndian.Uint16(pr.hdr[2:4]))
		if first && typ == 0x16 && status == 0x03 {
			return msg, malformed("TLS handshake instead of PRELOGIN (encrypt=strict, but the server was started without TLS: use encrypt=disable)")
		}
		if size < headerSize {
			return msg, malformed("packet length %d is shorter than its header", size)
		}
		if size > pr.maxPacket {
			return msg, malformed("packet length %d exceeds the negotiated packet size %d", size, pr.maxPacket)
		}
		if first {
			msg.typ = typ
		} else if typ != msg.typ {
			return msg, malformed("packet type 0x%02x inside a message of type 0x%02x", typ, msg.typ)
		}
		if status&statusReset != 0 {
			msg.reset = true
		}
		if len(msg.data)+size-headerSize > pr.maxMessage {
			return msg, malformed("message longer than %d bytes", pr.maxMessage)
		}
		start := len(msg.data)
		msg.data = slices.Grow(msg.data, size-headerSize)[:start+size-headerSize]
		if n, err := io.ReadFull(pr.r, msg.data[start:]); err != nil {
			if err == io.ErrUnexpectedEOF || err == io.EOF {
				return msg, malformed("connection closed inside a packet (%d of %d bytes)", headerSize+n, size)
			}
			return msg, err
		}
		if first && pr.afterFirst != nil {
			pr.afterFirst()
		}
		if status&statusEOM != 0 {
			return msg, nil
		}
	}
}

// decodeMessages reassembles every message in b, as the server would read
// it from a socket. It exists for the fuzz test and for tests that check
// captured traffic.
func decodeMessages(b []byte, maxPacket int) ([]message, error) {
	pr := newPacketReader(bytes.NewReader(b), defaultMaxMessage)
	pr.maxPacket = maxPacket
	var msgs []message
	for {
		m, err := pr.readMessage()
		if errors.Is(err, io.EOF) {
			return msgs, nil
		}
		if err != nil {
			return msgs, err
		}
		msgs = append(msgs, m)
	}
}

// packetWriter splits one reply message into packets of the negotiated
// size. A full packet is only sent once more data follows, so the last
// packet (status EOM) is never empty.
type packetWriter struct {
	w    io.Writer
	size int
	spid uint16
	buf  []byte // header space + payload of the packet being built
	id   byte
	err  error // sticky: the first write error
}

func newPacketWriter(w io.Writer, spid uint16) *packetWriter {
	pw := &packetWriter{w: w, size: minPacketSize, spid: spid, buf: make([]byte, headerSize, maxPacketSize)}
	pw.id = 1
	return pw
}

func (pw *packetWriter) setSize(n int) { pw.size = n }

// send writes the packet being built with the given status.
func (pw *packetWriter) send(status byte) error {
	if pw.err != nil {
		return pw.err
	}
	h := pw.buf[:headerSize]
	h[0] = packetReply
	h[1] = status
	binary.BigEndian.PutUint16(h[2:4], uint16(len(pw.buf)))
	binary.BigEndian.PutUint16(h[4:6], pw.spid)
	h[6] = pw.id
	h[7] = 0
	_, err := pw.w.Write(pw.buf)
	pw.buf = pw.buf[:headerSize]
	pw.id++
	if status&statusEOM != 0 {
		pw.id = 1
	}
	if err != nil {
		pw.err = err
	}
	return err
}

func (pw *packetWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		if len(pw.buf) == pw.size {
			if err := pw.send(0); err != nil {
				return n, err
			}
		}
		c := copy(pw.buf[len(pw.buf):pw.size], p)
		pw.buf = pw.buf[:len(pw.buf)+c]
		p = p[c:]
		n += c
	}
	return n, pw.err
}

// flush sends what is buffered as a non-final packet.
func (pw *packetWriter) flush() error {
	if len(pw.buf) == headerSize {
		return pw.err
	}
	return pw.send(0)
}

// endMessage sends the last packet of the message.
func (pw *packetWriter) endMessage() error { return pw.send(statusEOM) }

func (pw *packetWriter) byte1(b byte) { _, _ = pw.Write([]byte{b}) }

func (pw *packetWriter) u16(v uint16) {
	var b [2]byte
	binary.LittleEndian.PutUint16(b[:], v)
	_, _ = pw.Write(b[:])
}

func (pw *packetWriter) u32(v uint32) {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], v)
	_, _ = pw.Write(b[:])
}

func (pw *packetWriter) u64(v uint64) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	_, _ = pw.Write(b[:])
}
