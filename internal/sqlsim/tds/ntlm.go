package tds

import (
	"crypto/hmac"
	"crypto/md5"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"strings"

	"golang.org/x/crypto/md4" //nolint:staticcheck // NTLM's NT hash is MD4 by definition (MS-NLMP 3.3.1)
)

// NTLM (MS-NLMP, https://learn.microsoft.com/openspecs/windows_protocols/ms-nlmp)
// as SQL Server runs it through SSPI for a Windows login: LOGIN7 carries
// the client's NEGOTIATE_MESSAGE, the server answers with an SSPI token
// holding a CHALLENGE_MESSAGE, the client sends its AUTHENTICATE_MESSAGE in
// an SSPI packet (0x11). The emulator plays the domain controller too: it
// knows each Windows login's password and checks the NTLMv2 response.
// NTLMv1 and LM responses are refused, as a domain with the current default
// LAN Manager authentication level ("Send NTLMv2 response only. Refuse LM &
// NTLM") refuses them.

const (
	ntlmNegotiate    = 1
	ntlmChallenge    = 2
	ntlmAuthenticate = 3

	ntlmFlagUnicode          = 0x00000001
	ntlmFlagRequestTarget    = 0x00000004
	ntlmFlagNTLM             = 0x00000200
	ntlmFlagAlwaysSign       = 0x00008000
	ntlmFlagTargetTypeDomain = 0x00010000
	ntlmFlagExtendedSession  = 0x00080000
	ntlmFlagTargetInfo       = 0x00800000

	avEOL           = 0
	avNbComputer    = 1
	avNbDomain      = 2
	avDNSComputer   = 3
	avDNSDomain     = 4
	ntlmSignature   = "NTLMSSP\x00"
	ntlmMinAuthSize = 64
)

// errNTLM is any malformed or wrong NTLM message: the login fails.
var errNTLM = errors.New("NTLM authentication failed")

// ntlmExchange is one server side of an NTLM handshake.
type ntlmExchange struct {
	challenge [8]byte
	domain    string
}

// newNTLMExchange checks the client's NEGOTIATE_MESSAGE and returns the
// CHALLENGE_MESSAGE to send, for a server named computer in domain.
func newNTLMExchange(negotiate []byte, domain, computer string) (*ntlmExchange, []byte, error) {
	if len(negotiate) < 16 || string(negotiate[:8]) != ntlmSignature || binary.LittleEndian.Uint32(negotiate[8:]) != ntlmNegotiate {
		return nil, nil, errNTLM
	}
	x := &ntlmExchange{domain: domain}
	if _, err := rand.Read(x.challenge[:]); err != nil {
		return nil, nil, err
	}
	var info []byte
	for _, av := range []struct {
		id uint16
		v  string
	}{{avNbDomain, strings.ToUpper(domain)}, {avNbComputer, strings.ToUpper(computer)},
		{avDNSDomain, strings.ToLower(domain)}, {avDNSComputer, strings.ToLower(computer)}} {
		u := appendUCS2(nil, av.v)
		info = binary.LittleEndian.AppendUint16(info, av.id)
		info = binary.LittleEndian.AppendUint16(info, uint16(len(u)))
		info = append(info, u...)
	}
	info = append(info, avEOL, 0, 0, 0)
	target := appendUCS2(nil, strings.ToUpper(domain))
	const header = 48
	msg := make([]byte, header, header+len(target)+len(info))
	copy(msg, ntlmSignature)
	binary.LittleEndian.PutUint32(msg[8:], ntlmChallenge)
	putSecBuf(msg[12:], len(target), header)
	flags := uint32(ntlmFlagUnicode | ntlmFlagRequestTarget | ntlmFlagNTLM | ntlmFlagAlwaysSign |
		ntlmFlagTargetTypeDomain | ntlmFlagExtendedSession | ntlmFlagTargetInfo)
	binary.LittleEndian.PutUint32(msg[20:], flags)
	copy(msg[24:32], x.challenge[:])
	putSecBuf(msg[40:], len(info), header+len(target))
	msg = append(append(msg, target...), info...)
	return x, msg, nil
}

// verify checks the client's AUTHENTICATE_MESSAGE: its NTLMv2 response must
// be the HMAC of this exchange's challenge under the password that
// password returns for the user. It returns the login, DOMAIN\user.
func (x *ntlmExchange) verify(auth []byte, password func(login string) (string, bool)) (string, error) {
	if len(auth) < ntlmMinAuthSize || string(auth[:8]) != ntlmSignature || binary.LittleEndian.Uint32(auth[8:]) != ntlmAuthenticate {
		return "", errNTLM
	}
	nt, ok1 := secBuf(auth, 20)
	dom, ok2 := secBuf(auth, 28)
	usr, ok3 := secBuf(auth, 36)
	if !ok1 || !ok2 || !ok3 || len(dom)%2 != 0 || len(usr)%2 != 0 {
		return "", errNTLM
	}
	// An NTLMv2 response is NTProofStr (16) + a blob of at least 28 bytes;
	// an NTLMv1 or NTLM2-session response is 24 bytes.
	if len(nt) < 16+28 {
		return "", errNTLM
	}
	domain, user := ucs2String(dom), ucs2String(usr)
	login := domain + `\` + user
	pw, ok := password(login)
	if !ok {
		return login, errNTLM
	}
	h := md4.New()
	h.Write(appendUCS2(nil, pw))
	owf := hmacMD5(h.Sum(nil), appendUCS2(nil, strings.ToUpper(user)+domain))
	proof := hmacMD5(owf, append(x.challenge[:], nt[16:]...))
	if !hmac.Equal(proof, nt[:16]) {
		return login, errNTLM
	}
	return login, nil
}

func hmacMD5(key, data []byte) []byte {
	m := hmac.New(md5.New, key)
	m.Write(data)
	return m.Sum(nil)
}

// putSecBuf writes an NTLM security buffer (length, allocated, offset).
func putSecBuf(b []byte, n, off int) {
	binary.LittleEndian.PutUint16(b[0:], uint16(n))
	binary.LittleEndian.PutUint16(b[2:], uint16(n))
	binary.LittleEndian.PutUint32(b[4:], uint32(off))
}

// secBuf reads the security buffer at at; false when it points outside msg.
func secBuf(msg []byte, at int) ([]byte, bool) {
	n := int(binary.LittleEndian.Uint16(msg[at:]))
	off := int64(binary.LittleEndian.Uint32(msg[at+4:]))
	if off+int64(n) > int64(len(msg)) {
		return nil, false
	}
	return msg[off : off+int64(n)], true
}
