package tds

import (
	"errors"
	"testing"

	"github.com/microsoft/go-mssqldb/integratedauth/ntlm"
)

// The server side against go-mssqldb's own NTLM client: the right password
// passes, a wrong one, an unknown login and an NTLMv1 answer do not.
func TestNTLMAgainstTheDriversClient(t *testing.T) {
	logins := map[string]string{`CORP\svc_backup`: "Winter2026!"}
	lookup := func(l string) (string, bool) { p, ok := logins[l]; return p, ok }
	handshake := func(a *ntlm.Auth) (string, error) {
		neg, err := a.InitialBytes()
		if err != nil {
			t.Fatal(err)
		}
		x, challenge, err := newNTLMExchange(neg, "CORP", "SQL01")
		if err != nil {
			t.Fatal(err)
		}
		auth, err := a.NextBytes(challenge)
		if err != nil {
			t.Fatalf("the driver refused the challenge: %v", err)
		}
		return x.verify(auth, lookup)
	}
	login, err := handshake(&ntlm.Auth{Domain: "CORP", UserName: "svc_backup", Password: "Winter2026!", Workstation: "WS1"})
	if err != nil || login != `CORP\svc_backup` {
		t.Fatalf("right password: %q %v", login, err)
	}
	// Over TLS the driver adds channel bindings to the blob; the proof
	// covers them and still verifies.
	login, err = handshake(&ntlm.Auth{Domain: "CORP", UserName: "svc_backup", Password: "Winter2026!", ChannelBinding: []byte("0123456789abcdef")})
	if err != nil || login != `CORP\svc_backup` {
		t.Fatalf("with channel bindings: %q %v", login, err)
	}
	for _, a := range []*ntlm.Auth{
		{Domain: "CORP", UserName: "svc_backup", Password: "Summer2026!"},
		{Domain: "CORP", UserName: "nobody", Password: "Winter2026!"},
		{Domain: "OTHER", UserName: "svc_backup", Password: "Winter2026!"},
	} {
		if _, err := handshake(a); !errors.Is(err, errNTLM) {
			t.Errorf("%s\\%s with %q: %v, want refused", a.Domain, a.UserName, a.Password, err)
		}
	}

	// An NTLMv1 (NTLM2 session) answer: a challenge without target info.
	a := &ntlm.Auth{Domain: "CORP", UserName: "svc_backup", Password: "Winter2026!"}
	neg, _ := a.InitialBytes()
	x, challenge, _ := newNTLMExchange(neg, "CORP", "SQL01")
	challenge[22] &^= byte(ntlmFlagTargetInfo >> 16)
	auth, err := a.NextBytes(challenge)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := x.verify(auth, lookup); !errors.Is(err, errNTLM) {
		t.Errorf("NTLMv1 answer: %v, want refused", err)
	}
	for _, bad := range [][]byte{nil, []byte("NTLMSSP\x00"), make([]byte, 100)} {
		if _, err := x.verify(bad, lookup); !errors.Is(err, errNTLM) {
			t.Errorf("malformed %q: %v", bad, err)
		}
		if _, _, err := newNTLMExchange(bad, "CORP", "SQL01"); !errors.Is(err, errNTLM) {
			t.Errorf("malformed negotiate %q: %v", bad, err)
		}
	}
}
