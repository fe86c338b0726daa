package tds

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// buildLogin7 builds a LOGIN7 record the way go-mssqldb does.
func buildLogin7(user, password, database string, packetSize uint32) []byte {
	return buildLogin7Version(tds74, user, password, database, packetSize)
}

// buildLogin7Version builds a LOGIN7 record of TDS version ver, with the
// shorter fixed part before 7.2.
func buildLogin7Version(ver uint32, user, password, database string, packetSize uint32) []byte {
	mangled := appendUCS2(nil, password)
	for i, c := range mangled {
		mangled[i] = (c<<4 | c>>4) ^ 0xA5
	}
	fields := []struct {
		at   int
		data []byte
	}{
		{36, appendUCS2(nil, "host")}, {40, appendUCS2(nil, user)}, {44, mangled},
		{48, appendUCS2(nil, "app")}, {68, appendUCS2(nil, database)},
	}
	fixed := login7FixedSize
	if ver < tds72 {
		fixed = login7FixedSize71
	}
	b := make([]byte, fixed)
	binary.LittleEndian.PutUint32(b[4:], ver)
	binary.LittleEndian.PutUint32(b[8:], packetSize)
	for _, f := range fields {
		binary.LittleEndian.PutUint16(b[f.at:], uint16(len(b)))
		binary.LittleEndian.PutUint16(b[f.at+2:], uint16(len(f.data)/2))
		b = append(b, f.data...)
	}
	binary.LittleEndian.PutUint32(b[0:], uint32(len(b)))
	return b
}

// packet frames payload as one client packet.
func packet(typ, status byte, payload []byte) []byte {
	b := []byte{typ, status, 0, 0, 0, 0, 1, 0}
	binary.BigEndian.PutUint16(b[2:], uint16(headerSize+len(payload)))
	return append(b, payload...)
}

// rawLogin logs in over a bare socket and returns it.
func rawLogin(t testing.TB, addr string, packetSize uint32) net.Conn {
	t.Helper()
	c, _ := rawLoginVersion(t, addr, tds74, packetSize)
	return c
}

// rawLoginVersion logs in as a client of TDS version ver and returns the
// socket and the login reply.
func rawLoginVersion(t testing.TB, addr string, ver, packetSize uint32) (net.Conn, []byte) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(packet(packetPrelogin, statusEOM, []byte{preloginTerminator})); err != nil {
		t.Fatal(err)
	}
	readReply(t, c)
	if _, err := c.Write(packet(packetLogin7, statusEOM, buildLogin7Version(ver, "sa", "p@ss wörd", "master", packetSize))); err != nil {
		t.Fatal(err)
	}
	reply := readReply(t, c)
	done := 13 // DONE: token, status, command, row count of 8 bytes (4 before 7.2)
	if ver < tds72 {
		done = 9
	}
	if len(reply) < done || reply[len(reply)-done] != tokenDone || binary.LittleEndian.Uint16(reply[len(reply)-done+1:]) != 0 {
		t.Fatalf("login reply does not end with a %d-byte DONE(0): % x", done, reply)
	}
	return c, reply
}

// readReply reads one server message and checks its packets.
func readReply(t testing.TB, c net.Conn) []byte {
	t.Helper()
	var data []byte
	for {
		var h [headerSize]byte
		if _, err := io.ReadFull(c, h[:]); err != nil {
			t.Fatalf("read reply: %v", err)
		}
		if h[0] != packetReply {
			t.Fatalf("reply packet type 0x%02x", h[0])
		}
		n := int(binary.BigEndian.Uint16(h[2:]))
		if n <= headerSize {
			t.Fatalf("empty reply packet (length %d)", n)
		}
		p := make([]byte, n-headerSize)
		if _, err := io.ReadFull(c, p); err != nil {
			t.Fatal(err)
		}
		data = append(data, p...)
		switch h[1] {
		case statusEOM:
			return data
		case 0:
		default:
			t.Fatalf("reply packet status 0x%02x, want 0x00 or 0x01", h[1])
		}
	}
}

// expectClosed asserts the server closes c without answering.
func expectClosed(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := c.Read(make([]byte, 64))
	var ne net.Error
	if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Fatalf("connection still open: %v", err)
	}
}

func TestLogin7Decoding(t *testing.T) {
	l, err := decodeLogin7(buildLogin7("sa", "p@ss wörd 𝄞", "Sales", 8192))
	if err != nil {
		t.Fatal(err)
	}
	if l.User != "sa" || l.Password != "p@ss wörd 𝄞" || l.Database != "Sales" || l.PacketSize != 8192 || l.HostName != "host" {
		t.Fatalf("decoded %+v", l)
	}
	for _, n := range []int{0, 1, 93} {
		if _, err := decodeLogin7(make([]byte, n)); err == nil {
			t.Errorf("%d-byte LOGIN7 decoded without error", n)
		}
	}
	bad := buildLogin7("sa", "x", "master", 4096)
	binary.LittleEndian.PutUint16(bad[40:], 60000) // user name offset outside the record
	if _, err := decodeLogin7(bad); err == nil {
		t.Error("LOGIN7 with an out-of-range offset decoded without error")
	}
}

func TestPacketSplitting(t *testing.T) {
	_, _, addr := startServer(t, Options{})
	c := rawLogin(t, addr, 512)
	// A batch sent in three packets, RESETCONNECTION on each as the driver
	// does; the reply is split at the negotiated 512 bytes.
	payload := append([]byte{4, 0, 0, 0}, appendUCS2(nil, "text 2000")...)
	_, _ = c.Write(packet(packetSQLBatch, statusReset, payload[:3]))
	_, _ = c.Write(packet(packetSQLBatch, statusReset, payload[3:10]))
	_, _ = c.Write(packet(packetSQLBatch, statusReset|statusEOM, payload[10:]))
	var sizes []int
	var data []byte
	for {
		var h [headerSize]byte
		if _, err := io.ReadFull(c, h[:]); err != nil {
			t.Fatal(err)
		}
		n := int(binary.BigEndian.Uint16(h[2:]))
		if got := binary.BigEndian.Uint16(h[4:]); got < firstSPID {
			t.Fatalf("SPID in header = %d", got)
		}
		sizes = append(sizes, n)
		p := make([]byte, n-headerSize)
		if _, err := io.ReadFull(c, p); err != nil {
			t.Fatal(err)
		}
		data = append(data, p...)
		if h[1] == statusEOM {
			break
		}
		if h[1] != 0 {
			t.Fatalf("status 0x%02x on a non-final packet", h[1])
		}
	}
	for i, n := range sizes {
		if n > 512 || (i < len(sizes)-1 && n != 512) {
			t.Fatalf("packet sizes %v: want full 512-byte packets, then the rest", sizes)
		}
	}
	// ENVCHANGE(18) reset ack first, DONE(COUNT, SELECT, 1) last.
	if data[0] != tokenEnvChange || data[3] != envResetConnAck {
		t.Fatalf("reply starts with % x, want ENVCHANGE(18)", data[:4])
	}
	done := data[len(data)-13:]
	if done[0] != tokenDone || binary.LittleEndian.Uint16(done[1:]) != doneCount ||
		binary.LittleEndian.Uint16(done[3:]) != CmdSelect || binary.LittleEndian.Uint64(done[5:]) != 1 {
		t.Fatalf("final token % x", done)
	}
	if len(data) < 4000 {
		t.Fatalf("reply of %d bytes is too short for 2000 characters", len(data))
	}
}

func TestMalformedAfterLogin(t *testing.T) {
	srv, _, addr := startServer(t, Options{ReadTimeout: 300 * time.Millisecond})
	cases := map[string][]byte{
		"unknown packet type":     packet(0x07, statusEOM, []byte{1, 2, 3}),
		"packet over 512":         packet(packetSQLBatch, statusEOM, make([]byte, 600)),
		"bad ALL_HEADERS":         packet(packetSQLBatch, statusEOM, []byte{0xFF, 0xFF, 0, 0, 'x', 0}),
		"odd SQL text":            packet(packetSQLBatch, statusEOM, []byte{4, 0, 0, 0, 'x'}),
		"truncated RPC":           packet(packetRPC, statusEOM, []byte{4, 0, 0, 0, 0xFF, 0xFF, 10}),
		"PLP chunk too long":      packet(packetRPC, statusEOM, append([]byte{4, 0, 0, 0, 0xFF, 0xFF, 10, 0, 0, 0, 0, 0, typeNVarChar, 0xFF, 0xFF, 9, 4, 0xD0, 0, 0x34, 0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}, 0xFF, 0xFF, 0, 0)),
		"second LOGIN7":           packet(packetLogin7, statusEOM, buildLogin7("sa", "p@ss wörd", "master", 512)),
		"message never ends":      packet(packetSQLBatch, 0, []byte{4, 0, 0, 0}),
		"type change mid-message": append(packet(packetSQLBatch, 0, []byte{4, 0, 0, 0}), packet(packetRPC, statusEOM, nil)...),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			c := rawLogin(t, addr, 512)
			if _, err := c.Write(b); err != nil {
				t.Fatal(err)
			}
			expectClosed(t, c)
		})
	}
	// The server keeps serving.
	db := openDB(t, addr)
	if err := db.PingContext(ctxT(t)); err != nil {
		t.Fatalf("ping: %v", err)
	}
	_ = srv
}

// TestUnknownParameterType: a parameter type the emulator cannot decode is
// answered with SQL Server's error 8009; the connection stays usable.
func TestUnknownParameterType(t *testing.T) {
	_, _, addr := startServer(t, Options{})
	c := rawLogin(t, addr, 512)
	rpc := []byte{4, 0, 0, 0, 0xFF, 0xFF, 10, 0, 0, 0, 2, '@', 0, 'x', 0, 0, 0xF3, 1, 2, 3}
	for i := 0; i < 2; i++ {
		if _, err := c.Write(packet(packetRPC, statusEOM, rpc)); err != nil {
			t.Fatal(err)
		}
		reply := readReply(t, c)
		if reply[0] != tokenError || binary.LittleEndian.Uint32(reply[3:]) != 8009 {
			t.Fatalf("reply % x, want ERROR 8009", reply[:min(len(reply), 16)])
		}
		done := reply[len(reply)-13:]
		if done[0] != tokenDoneProc || binary.LittleEndian.Uint16(done[1:]) != doneError {
			t.Fatalf("reply ends with % x, want DONEPROC(ERROR)", done)
		}
	}
}

// TestAttentionAckIsItsOwnMessage: an attention during a request ends
// that request's response, then gets a response message of its own with
// only DONE(ATTN), as tedious expects (it reads the acknowledgement from
// the message after the cancelled request's, and times out otherwise).
func TestAttentionAckIsItsOwnMessage(t *testing.T) {
	_, h, addr := startServer(t, Options{})
	c := rawLogin(t, addr, 4096)
	if _, err := c.Write(packet(packetSQLBatch, statusEOM, append([]byte{4, 0, 0, 0}, appendUCS2(nil, "sleep")...))); err != nil {
		t.Fatal(err)
	}
	<-h.inExec
	if _, err := c.Write(packet(packetAttention, statusEOM, nil)); err != nil {
		t.Fatal(err)
	}
	first := readReply(t, c)
	if d := first[len(first)-13:]; d[0] != tokenDone || binary.LittleEndian.Uint16(d[1:])&doneAttn != 0 {
		t.Fatalf("the cancelled request's response: % x, want it to end with a DONE without ATTN", first)
	}
	ack := readReply(t, c)
	if len(ack) != 13 || ack[0] != tokenDone || binary.LittleEndian.Uint16(ack[1:]) != doneAttn {
		t.Fatalf("attention acknowledgement: % x, want a message of one DONE(ATTN)", ack)
	}
}
