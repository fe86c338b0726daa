package tds

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"
)

func TestNegotiateVersion(t *testing.T) {
	for _, c := range []struct {
		client, want uint32
		ok           bool
	}{
		{tds80, tds74, true},
		{tds74, tds74, true},
		{0x75000000, tds74, true}, // newer than the server: the server's own
		{0x730B0003, 0x730B0003, true},
		{tds73, tds73, true},
		{tds72, tds72, true},
		{tds71, tds71, true},
		{0x71000000, tds71, true},
		{0x70000000, 0, false},
		{0, 0, false},
	} {
		got, err := negotiateVersion(c.client)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("negotiateVersion(0x%08X) = 0x%08X, %v; want 0x%08X, ok %v", c.client, got, err, c.want, c.ok)
		}
	}
}

func TestDownlevelColumns(t *testing.T) {
	cols := []Column{{Name: "i", Type: TypeInt}, {Name: "t", Type: TypeDateTime2}, {Name: "m", Type: TypeNVarChar},
		{Name: "b", Type: TypeVarBinary}, {Name: "s", Type: TypeNVarChar, Size: 10}}
	if got, changed := downlevel(cols, tds74); changed || &got[0] != &cols[0] {
		t.Error("7.4: columns copied though nothing changes")
	}
	for _, c := range []struct {
		ver   uint32
		types []ColumnType
	}{
		{tds73, []ColumnType{TypeInt, TypeDateTime2, TypeNVarChar, TypeVarBinary, TypeNVarChar}},
		{tds72, []ColumnType{TypeInt, TypeNVarChar, TypeNVarChar, TypeVarBinary, TypeNVarChar}},
		{tds71, []ColumnType{TypeInt, TypeNVarChar, typeColNText, typeColImage, TypeNVarChar}},
	} {
		got, _ := downlevel(cols, c.ver)
		for i, w := range c.types {
			if got[i].Type != w {
				t.Errorf("0x%08X column %s: type %d, want %d", c.ver, cols[i].Name, got[i].Type, w)
			}
		}
	}
	if cols[1].Type != TypeDateTime2 {
		t.Fatal("downlevel changed its input")
	}
	at := time.Date(2026, 11, 30, 17, 5, 9, 123456700, time.UTC)
	w, _ := downlevel(cols, tds72)
	if v, err := downlevelValue(cols[1], w[1], at); err != nil || v != "2026-11-30 17:05:09.1234567" {
		t.Errorf("datetime2 to a 7.2 client: %v, %v", v, err)
	}
}

// TestDownLevelWire logs in as a TDS 7.1 client (86-byte LOGIN7, no
// ALL_HEADERS) and checks what SQL Server would send it: LOGINACK with 7.1,
// a USHORT UserType, nvarchar(max) as ntext, 4-byte DONE row counts and
// USHORT message line numbers.
func TestDownLevelWire(t *testing.T) {
	_, _, addr := startServer(t, Options{})
	c, login := rawLoginVersion(t, addr, tds71, 4096)
	if !bytes.Contains(login, []byte{tokenLoginAck}) || !bytes.Contains(login, []byte{1, 0x71, 0, 0, 1}) {
		t.Fatalf("login reply has no LOGINACK for TDS 7.1: % x", login)
	}
	batch := func(sql string) []byte {
		if _, err := c.Write(packet(packetSQLBatch, statusEOM, appendUCS2(nil, sql))); err != nil {
			t.Fatal(err)
		}
		return readReply(t, c)
	}
	r := batch("text 3")
	// COLMETADATA, 1 column, UserType (2), Flags (2), TYPE_INFO.
	if r[0] != tokenColMetadata || binary.LittleEndian.Uint16(r[1:]) != 1 || r[7] != typeNText {
		t.Fatalf("nvarchar(max) to a 7.1 client: % x", r[:min(len(r), 16)])
	}
	if !bytes.Contains(r, appendUCS2(append([]byte{0, 0, 0, 0, 0, 0, 0, 0}, 6, 0, 0, 0), longText(3))) {
		t.Fatalf("ntext value (timestamp, length, data) not found: % x", r)
	}
	if d := r[len(r)-9:]; d[0] != tokenDone {
		t.Fatalf("reply does not end with a 9-byte DONE: % x", r)
	}
	r = batch("backupfail")
	// Two ERROR tokens then DONE; each token's length must cover its fields
	// with a 2-byte line number.
	at := 0
	for range 2 {
		if r[at] != tokenError {
			t.Fatalf("token 0x%02x at %d, want ERROR: % x", r[at], at, r)
		}
		n := int(binary.LittleEndian.Uint16(r[at+1:]))
		body := r[at+3 : at+3+n]
		p := 6
		p += 2 + 2*int(binary.LittleEndian.Uint16(body[p:]))
		p += 1 + 2*int(body[p])
		p += 1 + 2*int(body[p])
		if n-p != 2 {
			t.Fatalf("ERROR token: %d bytes after the procedure name, want a 2-byte line number", n-p)
		}
		at += 3 + n
	}
	if len(r)-at != 9 || r[at] != tokenDone {
		t.Fatalf("after the errors: % x, want one 9-byte DONE", r[at:])
	}
}
