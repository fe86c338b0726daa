package tds

import (
	"encoding/binary"
	"unicode/utf16"
	"unicode/utf8"
)

// wireReader decodes little-endian fields from a whole message. Every read
// is bounds-checked: a short message yields a *protocolError, never a panic.
type wireReader struct {
	b   []byte
	off int
	err error
}

func (r *wireReader) fail(what string) {
	if r.err == nil {
		r.err = malformed("%s truncated at byte %d of %d", what, r.off, len(r.b))
	}
}

func (r *wireReader) remaining() int { return len(r.b) - r.off }

func (r *wireReader) take(n int, what string) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b)-r.off {
		r.fail(what)
		return nil
	}
	v := r.b[r.off : r.off+n]
	r.off += n
	return v
}

func (r *wireReader) u8(what string) byte {
	if b := r.take(1, what); b != nil {
		return b[0]
	}
	return 0
}

func (r *wireReader) u16(what string) uint16 {
	if b := r.take(2, what); b != nil {
		return binary.LittleEndian.Uint16(b)
	}
	return 0
}

func (r *wireReader) u32(what string) uint32 {
	if b := r.take(4, what); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (r *wireReader) u64(what string) uint64 {
	if b := r.take(8, what); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

// bVarChar reads a B_VARCHAR (length in characters, one byte).
func (r *wireReader) bVarChar(what string) string {
	n := int(r.u8(what))
	return ucs2String(r.take(2*n, what))
}

// skipAllHeaders skips the ALL_HEADERS block that starts SQL batch, RPC
// and transaction manager requests (§2.2.5.3), checking its lengths;
// present is false for a TDS 7.1 client, which sends none.
func (r *wireReader) skipAllHeaders(present bool) {
	if !present {
		return
	}
	total := int(r.u32("ALL_HEADERS length"))
	if r.err != nil {
		return
	}
	if total < 4 || total-4 > r.remaining() {
		r.err = malformed("ALL_HEADERS length %d does not fit a %d-byte message", total, len(r.b))
		return
	}
	h := wireReader{b: r.take(total-4, "ALL_HEADERS")}
	for h.remaining() > 0 && h.err == nil {
		n := int(h.u32("header length"))
		if h.err == nil && (n < 6 || n-4 > h.remaining()) {
			r.err = malformed("ALL_HEADERS entry length %d is invalid", n)
			return
		}
		h.take(n-4, "header")
	}
	if h.err != nil {
		r.err = h.err
	}
}

// ucs2String decodes UTF-16LE; an odd trailing byte is dropped.
func ucs2String(b []byte) string {
	if len(b) < 2 {
		return ""
	}
	u := make([]uint16, len(b)/2)
	ascii := true
	for i := range u {
		u[i] = binary.LittleEndian.Uint16(b[2*i:])
		if u[i] >= utf8.RuneSelf {
			ascii = false
		}
	}
	if ascii {
		s := make([]byte, len(u))
		for i, c := range u {
			s[i] = byte(c)
		}
		return string(s)
	}
	return string(utf16.Decode(u))
}

// ucs2Len is the UTF-16LE byte length of s.
func ucs2Len(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < utf8.RuneSelf {
			n += 2
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size - 1
		if r >= 0x10000 {
			n += 4
		} else {
			n += 2
		}
	}
	return n
}

// appendUCS2 appends s as UTF-16LE.
func appendUCS2(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < utf8.RuneSelf {
			b = append(b, c, 0)
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size - 1
		if r >= 0x10000 {
			r1, r2 := utf16.EncodeRune(r)
			b = append(b, byte(r1), byte(r1>>8), byte(r2), byte(r2>>8))
		} else {
			b = append(b, byte(r), byte(r>>8))
		}
	}
	return b
}

// truncateChars cuts s to at most n UTF-16 units (B_VARCHAR/US_VARCHAR
// limits), on a rune boundary.
func truncateChars(s string, n int) string {
	units := 0
	for i, r := range s {
		w := 1
		if r >= 0x10000 {
			w = 2
		}
		if units+w > n {
			return s[:i]
		}
		units += w
	}
	return s
}

// Small-token builders: ENVCHANGE, INFO/ERROR and LOGINACK carry a length
// prefix, so they are built in memory and then written.

func appendU16(b []byte, v uint16) []byte { return binary.LittleEndian.AppendUint16(b, v) }
func appendU32(b []byte, v uint32) []byte { return binary.LittleEndian.AppendUint32(b, v) }

func appendBVarChar(b []byte, s string) []byte {
	s = truncateChars(s, 255)
	b = append(b, byte(ucs2Len(s)/2))
	return appendUCS2(b, s)
}

func appendUSVarChar(b []byte, s string) []byte {
	s = truncateChars(s, 0xFFFF)
	b = appendU16(b, uint16(ucs2Len(s)/2))
	return appendUCS2(b, s)
}
