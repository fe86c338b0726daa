package tds

import (
	"encoding/binary"
	"math"
	"strconv"
)

// PRELOGIN option tokens (§2.2.6.5).
const (
	preloginVersion    = 0x00
	preloginEncryption = 0x01
	preloginInstOpt    = 0x02
	preloginThreadID   = 0x03
	preloginMARS       = 0x04
	preloginTerminator = 0xFF

	encryptNotSupported = 0x02
)

// decodePrelogin checks a PRELOGIN payload and returns its options.
func decodePrelogin(b []byte) (map[byte][]byte, error) {
	opts := map[byte][]byte{}
	for i := 0; ; i += 5 {
		if i >= len(b) {
			return nil, malformed("PRELOGIN option table has no terminator")
		}
		tok := b[i]
		if tok == preloginTerminator {
			return opts, nil
		}
		if i+5 > len(b) {
			return nil, malformed("PRELOGIN option %d truncated", tok)
		}
		off := int(binary.BigEndian.Uint16(b[i+1:]))
		n := int(binary.BigEndian.Uint16(b[i+3:]))
		if off+n > len(b) {
			return nil, malformed("PRELOGIN option %d (offset %d, length %d) outside the %d-byte payload", tok, off, n, len(b))
		}
		opts[tok] = b[off : off+n]
	}
}

// preloginReply answers PRELOGIN with the ENCRYPTION value decided by
// preloginEncryption: NOT_SUP without TLS (encrypt=disable and
// encrypt=false work, encrypt=true fails clearly in the driver: "server
// does not support encryption"), ON or REQ with it.
func preloginReply(o Options, encryption byte) []byte {
	type opt struct {
		tok  byte
		data []byte
	}
	opts := []opt{
		{preloginVersion, []byte{o.Major, o.Minor, byte(o.Build >> 8), byte(o.Build), 0, 0}},
		{preloginEncryption, []byte{encryption}},
		{preloginInstOpt, []byte{0}},
		{preloginThreadID, nil},
		{preloginMARS, []byte{0}},
	}
	off := 5*len(opts) + 1
	var table, data []byte
	for _, op := range opts {
		table = append(table, op.tok, byte(off>>8), byte(off), byte(len(op.data)>>8), byte(len(op.data)))
		data = append(data, op.data...)
		off += len(op.data)
	}
	table = append(table, preloginTerminator)
	return append(table, data...)
}

// login7 is the decoded LOGIN7 record (§2.2.6.4).
type login7 struct {
	TDSVersion uint32
	PacketSize int
	HostName   string
	User       string
	Password   string
	AppName    string
	ServerName string
	Language   string
	Database   string
	SSPI       bool   // integrated (NTLM/Kerberos) authentication requested
	SSPIData   []byte // its first SSPI message (NTLM: NEGOTIATE_MESSAGE)
}

// TDS versions as LOGIN7 and LOGINACK carry them (§2.2.6.4, §2.2.7.14).
const (
	tds71 uint32 = 0x71000001 // SQL Server 2000 SP1
	tds72 uint32 = 0x72090002 // SQL Server 2005
	tds73 uint32 = 0x730A0003 // SQL Server 2008 (7.3A; 7.3B is 0x730B0003)
	tds74 uint32 = 0x74000004 // SQL Server 2012 and later
	tds80 uint32 = 0x08000000 // TDS 8.0, strict encryption (SQL Server 2022)
)

// negotiateVersion is the TDS version the server answers a client asking
// for v with: the client's own when the server speaks it, else 7.4, the
// newest a server of 2012 to 2022 knows (TDS 8.0 differs from 7.4 only in
// when TLS starts, and is acknowledged as 7.4). Down-level clients get
// their own version, and with it the down-level encodings of newer types
// (see downlevel). 7.0 (SQL Server 7.0) is refused: the emulator does not
// speak its collation-less type info.
func negotiateVersion(v uint32) (uint32, error) {
	switch {
	case v == tds80 || v >= tds74:
		return tds74, nil
	case v >= 0x73000000:
		return v, nil
	case v >= tds72:
		return tds72, nil
	case v >= 0x71000000:
		return tds71, nil
	}
	return 0, malformed("LOGIN7 asks for TDS version 0x%08X; the emulator speaks 7.1 to 7.4 (and 8.0)", v)
}

// The fixed part of LOGIN7 is 94 bytes from TDS 7.2 on (ibChangePassword,
// cchChangePassword and cbSSPILong were added), 86 before.
const (
	login7FixedSize   = 94
	login7FixedSize71 = 86
)

// decodeLogin7 decodes a LOGIN7 payload. Offsets count from the start of
// the record, lengths count UCS-2 characters.
func decodeLogin7(b []byte) (login7, error) {
	var l login7
	if len(b) < login7FixedSize71 {
		return l, malformed("LOGIN7 record is %d bytes, shorter than its %d-byte fixed part", len(b), login7FixedSize71)
	}
	fixed := login7FixedSize
	if v := binary.LittleEndian.Uint32(b[4:]); v < tds72 && v != tds80 {
		fixed = login7FixedSize71
	}
	if len(b) < fixed {
		return l, malformed("LOGIN7 record is %d bytes, shorter than its %d-byte fixed part", len(b), fixed)
	}
	total := int(binary.LittleEndian.Uint32(b[0:]))
	if total < fixed || total > len(b) {
		return l, malformed("LOGIN7 length %d does not match the %d-byte message", total, len(b))
	}
	b = b[:total]
	l.TDSVersion = binary.LittleEndian.Uint32(b[4:])
	l.PacketSize = int(binary.LittleEndian.Uint32(b[8:]))
	field := func(at int, what string, mangled bool) (string, error) {
		off := int(binary.LittleEndian.Uint16(b[at:]))
		n := 2 * int(binary.LittleEndian.Uint16(b[at+2:]))
		if n == 0 {
			return "", nil
		}
		if off < fixed || off+n > len(b) {
			return "", malformed("LOGIN7 %s (offset %d, %d bytes) outside the %d-byte record", what, off, n, len(b))
		}
		v := b[off : off+n]
		if mangled {
			v = unmanglePassword(v)
		}
		return ucs2String(v), nil
	}
	var err error
	for _, f := range []struct {
		at      int
		what    string
		dst     *string
		mangled bool
	}{
		{36, "host name", &l.HostName, false},
		{40, "user name", &l.User, false},
		{44, "password", &l.Password, true},
		{48, "app name", &l.AppName, false},
		{52, "server name", &l.ServerName, false},
		{64, "language", &l.Language, false},
		{68, "database", &l.Database, false},
	} {
		if *f.dst, err = field(f.at, f.what, f.mangled); err != nil {
			return l, err
		}
	}
	const fIntSecurity = 0x80
	l.SSPI = b[25]&fIntSecurity != 0
	if l.SSPI {
		// ibSSPI, cbSSPI (bytes, not characters) at 78 and 80.
		off, n := int(binary.LittleEndian.Uint16(b[78:])), int(binary.LittleEndian.Uint16(b[80:]))
		if n > 0 && (off < fixed || off+n > len(b)) {
			return l, malformed("LOGIN7 SSPI data (offset %d, %d bytes) outside the %d-byte record", off, n, len(b))
		}
		l.SSPIData = b[off : off+n]
	}
	return l, nil
}

// unmanglePassword reverses the LOGIN7 password obfuscation: each byte was
// nibble-swapped then XORed with 0xA5.
func unmanglePassword(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		c ^= 0xA5
		out[i] = c<<4 | c>>4
	}
	return out
}

// negotiatePacketSize clamps the client's request to what TDS allows; the
// server then echoes it in ENVCHANGE(4) and splits every reply at it.
func negotiatePacketSize(requested int) int {
	switch {
	case requested == 0:
		return defaultPacketSize
	case requested < minPacketSize:
		return minPacketSize
	case requested > maxPacketSize:
		return maxPacketSize
	}
	return requested
}

// ENVCHANGE types (§2.2.7.9).
const (
	envDatabase      = 1
	envLanguage      = 2
	envPacketSize    = 4
	envCollation     = 7
	envBeginTran     = 8
	envCommitTran    = 9
	envRollbackTran  = 10
	envResetConnAck  = 18
	tokenEnvChange   = 0xE3
	tokenLoginAck    = 0xAD
	tokenInfo        = 0xAB
	tokenError       = 0xAA
	tokenColMetadata = 0x81
	tokenRow         = 0xD1
	tokenReturnStat  = 0x79
	tokenDone        = 0xFD
	tokenDoneProc    = 0xFE
	tokenDoneInProc  = 0xFF
)

// collationLatin1 is SQL_Latin1_General_CP1_CI_AS.
var collationLatin1 = []byte{0x09, 0x04, 0xD0, 0x00, 0x34}

// envChangeString is an ENVCHANGE with B_VARCHAR new and old values.
func envChangeString(b []byte, typ byte, newValue, oldValue string) []byte {
	body := []byte{typ}
	body = appendBVarChar(body, newValue)
	body = appendBVarChar(body, oldValue)
	return envChange(b, body)
}

// envChangeBytes is an ENVCHANGE with B_VARBYTE new and old values.
func envChangeBytes(b []byte, typ byte, newValue, oldValue []byte) []byte {
	body := []byte{typ, byte(len(newValue))}
	body = append(body, newValue...)
	body = append(body, byte(len(oldValue)))
	body = append(body, oldValue...)
	return envChange(b, body)
}

func envChange(b, body []byte) []byte {
	b = append(b, tokenEnvChange)
	b = appendU16(b, uint16(len(body)))
	return append(b, body...)
}

// loginReply is the token stream of a successful login, in the order a
// real server sends it; messages in the session's language.
func (c *conn) loginReply(database string, packetSize int) []byte {
	o := c.s.opts
	lang := sessionLanguage(c.sess)
	if lang == "" {
		lang = "us_english"
	}
	var b []byte
	b = envChangeString(b, envDatabase, database, "master")
	b = c.appendMsg(b, false, &Error{Number: 5701, State: 2, Class: 0,
		Message: "Changed database context to '" + database + "'."})
	b = envChangeBytes(b, envCollation, collationLatin1, nil)
	b = envChangeString(b, envLanguage, lang, "")
	b = c.appendMsg(b, false, &Error{Number: 5703, State: 1, Class: 0,
		Message: "Changed language setting to " + lang + "."})
	b = appendLoginAck(b, o, c.ver)
	ps := strconv.Itoa(packetSize)
	b = envChangeString(b, envPacketSize, ps, ps)
	return c.appendDone(b, tokenDone, 0, 0, 0)
}

func appendLoginAck(b []byte, o Options, ver uint32) []byte {
	body := []byte{1, byte(ver >> 24), byte(ver >> 16), byte(ver >> 8), byte(ver)} // interface SQL, TDS version (big-endian)
	body = appendBVarChar(body, "Microsoft SQL Server")
	body = append(body, o.Major, o.Minor, byte(o.Build>>8), byte(o.Build))
	b = append(b, tokenLoginAck)
	b = appendU16(b, uint16(len(body)))
	return append(b, body...)
}

// appendMessage appends an INFO or ERROR token (§2.2.7.10, §2.2.7.13);
// LineNumber is a LONG from TDS 7.2 on, a USHORT before.
func appendMessage(b []byte, isError bool, e *Error, server string, ver uint32) []byte {
	// The token length is a uint16: keep the message within it.
	msg := truncateChars(e.Message, 30000)
	body := appendU32(nil, uint32(e.Number))
	body = append(body, e.State, e.Class)
	body = appendUSVarChar(body, msg)
	body = appendBVarChar(body, server)
	body = appendBVarChar(body, e.Procedure)
	if ver < tds72 {
		body = appendU16(body, uint16(e.Line))
	} else {
		body = appendU32(body, uint32(e.Line))
	}
	if isError {
		b = append(b, tokenError)
	} else {
		b = append(b, tokenInfo)
	}
	b = appendU16(b, uint16(len(body)))
	return append(b, body...)
}

// DONE status bits (§2.2.7.6).
const (
	doneMore  uint16 = 0x01
	doneError uint16 = 0x02
	doneCount uint16 = 0x10
	doneAttn  uint16 = 0x20
)

// appendDone appends a DONE, DONEPROC or DONEINPROC token. Its row count
// is 8 bytes from TDS 7.2 on, 4 before (§2.2.7.6).
func (c *conn) appendDone(b []byte, token byte, status, cmd uint16, rows uint64) []byte {
	b = append(b, token)
	b = appendU16(b, status)
	b = appendU16(b, cmd)
	if c.ver < tds72 {
		return appendU32(b, uint32(min(rows, math.MaxUint32)))
	}
	return binary.LittleEndian.AppendUint64(b, rows)
}
