package tds

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"
	"time"
)

// decodeSQLBatch decodes a SQL batch: ALL_HEADERS (7.2 on), then UCS-2 text.
func decodeSQLBatch(b []byte, headers bool) (string, error) {
	r := wireReader{b: b}
	r.skipAllHeaders(headers)
	if r.err != nil {
		return "", r.err
	}
	text := r.take(r.remaining(), "SQL text")
	if len(text)%2 != 0 {
		return "", malformed("SQL text has an odd byte length %d", len(text))
	}
	return ucs2String(text), nil
}

// procExecuteSQL is sp_executesql's well-known procedure id.
const procExecuteSQL = 10

// rpcCall is a decoded RPC request.
type rpcCall struct {
	ProcID   uint16 // 0 when called by name
	ProcName string
	Params   []Param
	// Unsupported is set when a parameter has a type the emulator cannot
	// decode (xml, TVP, ...): the request is answered with this error and
	// the connection stays open, as the message boundary is still known.
	Unsupported *Error
}

// procName is the procedure's name for messages ("sp_executesql", ...).
func (c rpcCall) procName() string {
	if c.ProcName != "" {
		return c.ProcName
	}
	names := map[uint16]string{1: "sp_cursor", 2: "sp_cursoropen", 3: "sp_cursorprepare",
		4: "sp_cursorexecute", 5: "sp_cursorprepexec", 6: "sp_cursorunprepare", 7: "sp_cursorfetch",
		8: "sp_cursoroption", 9: "sp_cursorclose", 10: "sp_executesql", 11: "sp_prepare",
		12: "sp_execute", 13: "sp_prepexec", 14: "sp_prepexecrpc", 15: "sp_unprepare"}
	if n, ok := names[c.ProcID]; ok {
		return n
	}
	return fmt.Sprintf("procedure id %d", c.ProcID)
}

// isExecuteSQL reports whether the call is sp_executesql (by id or name).
func (c rpcCall) isExecuteSQL() bool {
	if c.ProcName == "" {
		return c.ProcID == procExecuteSQL
	}
	name := strings.ToLower(strings.Trim(c.ProcName, "[]"))
	return name == "sp_executesql" || name == "sys.sp_executesql" || name == "master.sys.sp_executesql"
}

// request converts an sp_executesql call into a Request: the first two
// parameters are the statement and its declarations.
func (c rpcCall) request() (Request, error) {
	if len(c.Params) == 0 {
		return Request{}, fmt.Errorf("sp_executesql called without a statement")
	}
	stmt, ok := c.Params[0].Value.(string)
	if !ok {
		return Request{}, fmt.Errorf("sp_executesql statement must be nvarchar, got %T", c.Params[0].Value)
	}
	params := c.Params[1:]
	var decl string
	// The declaration string "@p1 bigint,..." follows, unnamed (go-mssqldb)
	// or named @params (tedious).
	if len(params) > 0 && (params[0].Name == "" || strings.EqualFold(params[0].Name, "@params")) {
		decl, _ = params[0].Value.(string)
		params = params[1:]
	}
	return Request{SQL: stmt, Params: params, RPC: true, Declarations: decl}, nil
}

// decodeRPC decodes an RPC request (§2.2.6.6) with one call.
func decodeRPC(b []byte, headers bool) (rpcCall, error) {
	var c rpcCall
	r := wireReader{b: b}
	r.skipAllHeaders(headers)
	n := r.u16("procedure name length")
	if n == 0xFFFF {
		c.ProcID = r.u16("procedure id")
	} else {
		c.ProcName = ucs2String(r.take(2*int(n), "procedure name"))
	}
	r.u16("option flags")
	for r.err == nil && r.remaining() > 0 {
		if next := r.b[r.off]; next == 0x80 || next == 0xFF {
			return c, malformed("several RPC calls in one request are not supported")
		}
		p := decodeParam(&r)
		var ut *unsupportedType
		if errors.As(r.err, &ut) {
			c.Unsupported = &Error{Number: 8009, State: 1, Class: 16, Message: fmt.Sprintf(
				"The incoming tabular data stream (TDS) remote procedure call (RPC) protocol stream is incorrect. "+
					"Parameter %d (\"%s\"): Data type 0x%02X is unknown.", len(c.Params)+1, p.Name, ut.typ)}
			return c, nil
		}
		if r.err == nil {
			c.Params = append(c.Params, p)
		}
	}
	return c, r.err
}

// unsupportedType is a parameter type the decoder does not know; its
// length cannot be known either, so decoding stops there.
type unsupportedType struct{ typ byte }

func (e *unsupportedType) Error() string {
	return fmt.Sprintf("unsupported parameter type 0x%02X", e.typ)
}

// Parameter status bits.
const paramByRef = 0x01

// decodeParam reads one parameter: name, status, TYPE_INFO, value.
func decodeParam(r *wireReader) Param {
	var p Param
	p.Name = r.bVarChar("parameter name")
	p.Output = r.u8("parameter status")&paramByRef != 0
	typ := r.u8("parameter type")
	if r.err != nil {
		return p
	}
	v, err := decodeValue(r, typ)
	if err != nil && r.err == nil {
		r.err = err
	}
	p.Value = v
	return p
}

// Type ids (§2.2.5.4).
const (
	typeNull           = 0x1F
	typeInt1           = 0x30
	typeBit            = 0x32
	typeInt2           = 0x34
	typeInt4           = 0x38
	typeDateTim4       = 0x3A
	typeFlt4           = 0x3B
	typeMoney          = 0x3C
	typeDateTime       = 0x3D
	typeFlt8           = 0x3E
	typeMoney4         = 0x7A
	typeInt8           = 0x7F
	typeGUID           = 0x24
	typeIntN           = 0x26
	typeDecimalN       = 0x6A
	typeNumericN       = 0x6C
	typeBitN           = 0x68
	typeFltN           = 0x6D
	typeMoneyN         = 0x6E
	typeDateTimeN      = 0x6F
	typeDateN          = 0x28
	typeTimeN          = 0x29
	typeDateTime2N     = 0x2A
	typeDateTimeOffset = 0x2B
	typeBigVarBin      = 0xA5
	typeBigVarChar     = 0xA7
	typeBigBinary      = 0xAD
	typeBigChar        = 0xAF
	typeNVarChar       = 0xE7
	typeNChar          = 0xEF
	typeVariant        = 0x62
)

// decodeValue reads the rest of a TYPE_INFO and the value of a parameter.
// Values come back as the Go types listed on Param.
func decodeValue(r *wireReader, typ byte) (any, error) {
	switch typ {
	case typeNull:
		return nil, nil
	case typeInt1, typeBit, typeInt2, typeInt4, typeInt8, typeFlt4, typeFlt8,
		typeDateTim4, typeDateTime, typeMoney, typeMoney4:
		size := map[byte]int{typeInt1: 1, typeBit: 1, typeInt2: 2, typeInt4: 4, typeInt8: 8, typeFlt4: 4,
			typeFlt8: 8, typeDateTim4: 4, typeDateTime: 8, typeMoney: 8, typeMoney4: 4}[typ]
		return fixedValue(typ, r.take(size, "fixed-length value"))
	case typeIntN, typeBitN, typeFltN, typeDateTimeN, typeMoneyN, typeGUID:
		r.u8("maximum length")
		n := int(r.u8("value length"))
		data := r.take(n, "value")
		if r.err != nil || n == 0 {
			return nil, nil
		}
		return byteLenValue(typ, data)
	case typeDecimalN, typeNumericN:
		r.u8("maximum length")
		r.u8("precision")
		scale := r.u8("scale")
		n := int(r.u8("value length"))
		data := r.take(n, "decimal value")
		if r.err != nil || n == 0 {
			return nil, nil
		}
		return decodeDecimal(data, scale)
	case typeDateN:
		n := int(r.u8("value length"))
		data := r.take(n, "date value")
		if r.err != nil || n == 0 {
			return nil, nil
		}
		if n != 3 {
			return nil, malformed("date value of %d bytes", n)
		}
		return civilDay(uint24(data)), nil
	case typeTimeN, typeDateTime2N, typeDateTimeOffset:
		scale := r.u8("scale")
		n := int(r.u8("value length"))
		data := r.take(n, "time value")
		if r.err != nil || n == 0 {
			return nil, nil
		}
		return timeValue(typ, scale, data)
	case typeNVarChar, typeNChar, typeBigVarChar, typeBigChar, typeBigVarBin, typeBigBinary:
		maxLen := r.u16("maximum length")
		if typ != typeBigVarBin && typ != typeBigBinary {
			r.take(5, "collation")
		}
		var data []byte
		if maxLen == 0xFFFF {
			var null bool
			data, null = readPLP(r)
			if null {
				return nil, nil
			}
		} else {
			n := r.u16("value length")
			if n == 0xFFFF {
				return nil, nil
			}
			data = r.take(int(n), "value")
		}
		if r.err != nil {
			return nil, nil
		}
		switch typ {
		case typeNVarChar, typeNChar:
			if len(data)%2 != 0 {
				return nil, malformed("nvarchar value has an odd byte length %d", len(data))
			}
			return ucs2String(data), nil
		case typeBigVarChar, typeBigChar:
			return latin1String(data), nil
		}
		return append([]byte{}, data...), nil
	}
	return nil, &unsupportedType{typ: typ}
}

// readPLP reads a partially length-prefixed value (§2.2.5.2.3).
func readPLP(r *wireReader) (data []byte, null bool) {
	total := r.u64("PLP length")
	if total == math.MaxUint64 {
		return nil, true
	}
	data = []byte{}
	for r.err == nil {
		n := r.u32("PLP chunk length")
		if n == 0 {
			break
		}
		data = append(data, r.take(int(n), "PLP chunk")...)
	}
	return data, false
}

func fixedValue(typ byte, b []byte) (any, error) {
	if b == nil {
		return nil, nil
	}
	switch typ {
	case typeInt1:
		return int64(b[0]), nil
	case typeBit:
		return b[0] != 0, nil
	case typeInt2:
		return int64(int16(binary.LittleEndian.Uint16(b))), nil
	case typeInt4:
		return int64(int32(binary.LittleEndian.Uint32(b))), nil
	case typeInt8:
		return int64(binary.LittleEndian.Uint64(b)), nil
	case typeFlt4:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b))), nil
	case typeFlt8:
		return math.Float64frombits(binary.LittleEndian.Uint64(b)), nil
	case typeDateTim4:
		days, mins := binary.LittleEndian.Uint16(b), binary.LittleEndian.Uint16(b[2:])
		return time.Date(1900, 1, 1+int(days), 0, int(mins), 0, 0, time.UTC), nil
	case typeDateTime:
		return decodeDateTime(b), nil
	case typeMoney:
		v := int64(uint64(binary.LittleEndian.Uint32(b))<<32 | uint64(binary.LittleEndian.Uint32(b[4:])))
		return scaledString(big.NewInt(v), 4), nil
	case typeMoney4:
		return scaledString(big.NewInt(int64(int32(binary.LittleEndian.Uint32(b)))), 4), nil
	}
	return nil, malformed("unsupported fixed type 0x%02X", typ)
}

func byteLenValue(typ byte, b []byte) (any, error) {
	n := len(b)
	switch typ {
	case typeIntN:
		switch n {
		case 1:
			return fixedValue(typeInt1, b)
		case 2:
			return fixedValue(typeInt2, b)
		case 4:
			return fixedValue(typeInt4, b)
		case 8:
			return fixedValue(typeInt8, b)
		}
	case typeBitN:
		if n == 1 {
			return b[0] != 0, nil
		}
	case typeFltN:
		switch n {
		case 4:
			return fixedValue(typeFlt4, b)
		case 8:
			return fixedValue(typeFlt8, b)
		}
	case typeDateTimeN:
		switch n {
		case 4:
			return fixedValue(typeDateTim4, b)
		case 8:
			return fixedValue(typeDateTime, b)
		}
	case typeMoneyN:
		switch n {
		case 4:
			return fixedValue(typeMoney4, b)
		case 8:
			return fixedValue(typeMoney, b)
		}
	case typeGUID:
		if n == 16 {
			return formatGUID(b), nil
		}
	}
	return nil, malformed("value of %d bytes for type 0x%02X", n, typ)
}

// decodeDecimal turns a sign byte + little-endian magnitude into "-123.45".
func decodeDecimal(b []byte, scale uint8) (any, error) {
	if len(b) < 2 {
		return nil, malformed("decimal value of %d bytes", len(b))
	}
	mag := make([]byte, len(b)-1)
	for i := range mag {
		mag[i] = b[len(b)-1-i] // big.Int wants big-endian
	}
	v := new(big.Int).SetBytes(mag)
	if b[0] == 0 {
		v.Neg(v)
	}
	return scaledString(v, int(scale)), nil
}

func scaledString(v *big.Int, scale int) string {
	neg := v.Sign() < 0
	digits := new(big.Int).Abs(v).String()
	if scale > 0 {
		if len(digits) <= scale {
			digits = strings.Repeat("0", scale-len(digits)+1) + digits
		}
		digits = digits[:len(digits)-scale] + "." + digits[len(digits)-scale:]
	}
	if neg {
		return "-" + digits
	}
	return digits
}

// formatGUID renders wire-order GUID bytes (first three groups
// little-endian) in canonical form.
func formatGUID(b []byte) string {
	return fmt.Sprintf("%08X-%04X-%04X-%X-%X", binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint16(b[4:]),
		binary.LittleEndian.Uint16(b[6:]), b[8:10], b[10:16])
}

func latin1String(b []byte) string {
	r := make([]rune, len(b))
	for i, c := range b {
		r[i] = rune(c)
	}
	return string(r)
}

var (
	epoch1900 = time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC)
	epoch0001 = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
)

func decodeDateTime(b []byte) time.Time {
	days := int32(binary.LittleEndian.Uint32(b))
	ticks := binary.LittleEndian.Uint32(b[4:]) // 1/300 s
	ns := int64(ticks) * 1e9 / 300
	return epoch1900.AddDate(0, 0, int(days)).Add(time.Duration(ns))
}

func uint24(b []byte) int { return int(b[0]) | int(b[1])<<8 | int(b[2])<<16 }

func civilDay(days int) time.Time { return epoch0001.AddDate(0, 0, days) }

// timeValue decodes time(n), datetime2(n) and datetimeoffset(n).
func timeValue(typ, scale byte, b []byte) (any, error) {
	if scale > 7 {
		return nil, malformed("time scale %d", scale)
	}
	tlen := 5
	switch {
	case scale <= 2:
		tlen = 3
	case scale <= 4:
		tlen = 4
	}
	want := tlen
	switch typ {
	case typeDateTime2N:
		want += 3
	case typeDateTimeOffset:
		want += 5
	}
	if len(b) != want {
		return nil, malformed("time value of %d bytes, want %d for scale %d", len(b), want, scale)
	}
	var units uint64
	for i := tlen - 1; i >= 0; i-- {
		units = units<<8 | uint64(b[i])
	}
	for i := scale; i < 7; i++ {
		units *= 10
	}
	since := time.Duration(units * 100) // 100 ns units
	if typ == typeTimeN {
		return epoch0001.Add(since), nil
	}
	t := civilDay(uint24(b[tlen:])).Add(since)
	if typ == typeDateTimeOffset {
		offset := int(int16(binary.LittleEndian.Uint16(b[tlen+3:])))
		// The wire value is UTC; present it in the sender's zone.
		return t.In(time.FixedZone("", offset*60)), nil
	}
	return t, nil
}

// Transaction manager request types (§2.2.6.9).
const (
	tmBegin    = 5
	tmCommit   = 7
	tmRollback = 8
)

// decodeTransMgr returns the request type of a transaction manager request.
func decodeTransMgr(b []byte, headers bool) (uint16, error) {
	r := wireReader{b: b}
	r.skipAllHeaders(headers)
	typ := r.u16("transaction request type")
	return typ, r.err
}
