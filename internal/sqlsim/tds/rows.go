package tds

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"math/big"
	"strings"
	"time"
)

// ucs2ChunkChars is how many characters of a long string are encoded at a
// time when streaming it into packets.
const ucs2ChunkChars = 4096

// isMax reports whether the column is an nvarchar(max)/varbinary(max)
// (sent as PLP).
func (c Column) isMax() bool {
	switch c.Type {
	case TypeNVarChar:
		return c.Size <= 0 || c.Size > 4000
	case TypeVarBinary:
		return c.Size <= 0 || c.Size > 8000
	}
	return false
}

// numericLen is the byte length of a numeric(p) value: sign + magnitude.
func numericLen(p uint8) int {
	switch {
	case p <= 9:
		return 5
	case p <= 19:
		return 9
	case p <= 28:
		return 13
	}
	return 17
}

func (c Column) precision() uint8 {
	if c.Precision == 0 {
		return 18
	}
	return c.Precision
}

// checkColumns validates column definitions before COLMETADATA is sent.
func checkColumns(cols []Column) error {
	if len(cols) == 0 || len(cols) > 4096 {
		return fmt.Errorf("tds: a result set needs 1 to 4096 columns, got %d", len(cols))
	}
	for i, c := range cols {
		switch c.Type {
		case TypeInt, TypeBigInt, TypeSmallInt, TypeTinyInt, TypeBit, TypeNVarChar, TypeDateTime,
			TypeDateTime2, TypeUniqueIdentifier, TypeReal, TypeFloat, TypeVarBinary, TypeVariant:
		case TypeChar:
			if c.Size < 1 || c.Size > 8000 {
				return fmt.Errorf("tds: column %d %q: char size %d must be 1..8000", i, c.Name, c.Size)
			}
		case TypeNumeric:
			if c.precision() > 38 || c.Scale > c.precision() {
				return fmt.Errorf("tds: column %d %q: numeric(%d,%d) is invalid", i, c.Name, c.precision(), c.Scale)
			}
		default:
			return fmt.Errorf("tds: column %d %q: unknown column type %d", i, c.Name, c.Type)
		}
	}
	return nil
}

// appendColMetadata appends a COLMETADATA token (§2.2.7.4) for a client
// of TDS version ver: UserType is a ULONG from 7.2 on, a USHORT before.
func appendColMetadata(b []byte, cols []Column, ver uint32) []byte {
	b = append(b, tokenColMetadata)
	b = appendU16(b, uint16(len(cols)))
	for _, c := range cols {
		if ver < tds72 {
			b = appendU16(b, 0) // UserType
		} else {
			b = appendU32(b, 0)
		}
		var flags uint16
		if c.Nullable {
			flags |= 0x0001
		}
		b = appendU16(b, flags)
		b = appendTypeInfo(b, c)
		b = appendBVarChar(b, c.Name)
	}
	return b
}

func appendTypeInfo(b []byte, c Column) []byte {
	switch c.Type {
	case TypeInt:
		return append(b, typeIntN, 4)
	case TypeBigInt:
		return append(b, typeIntN, 8)
	case TypeSmallInt:
		return append(b, typeIntN, 2)
	case TypeTinyInt:
		return append(b, typeIntN, 1)
	case TypeBit:
		return append(b, typeBitN, 1)
	case TypeNVarChar:
		b = append(b, typeNVarChar)
		if c.isMax() {
			b = appendU16(b, 0xFFFF)
		} else {
			b = appendU16(b, uint16(2*c.Size))
		}
		return append(b, collationLatin1...)
	case TypeChar:
		b = append(b, typeBigChar)
		b = appendU16(b, uint16(c.Size))
		return append(b, collationLatin1...)
	case TypeDateTime:
		return append(b, typeDateTimeN, 8)
	case TypeDateTime2:
		return append(b, typeDateTime2N, 7)
	case TypeNumeric:
		return append(b, typeNumericN, byte(numericLen(c.precision())), c.precision(), c.Scale)
	case TypeUniqueIdentifier:
		return append(b, typeGUID, 16)
	case TypeReal:
		return append(b, typeFltN, 4)
	case TypeFloat:
		return append(b, typeFltN, 8)
	case TypeVarBinary:
		b = append(b, typeBigVarBin)
		if c.isMax() {
			return appendU16(b, 0xFFFF)
		}
		return appendU16(b, uint16(c.Size))
	case TypeVariant:
		b = append(b, typeVariant)
		return appendU32(b, 8016)
	case typeColNText, typeColImage:
		return appendTextTypeInfo(b, c.Type)
	}
	panic("unreachable: checked by checkColumns")
}

// encodeRow converts the values of one row to their wire form. Small
// values are appended to b; long strings and binaries are returned as
// deferred segments so they can be streamed without a second copy.
// Errors name the column: a value that does not fit its column would make
// the driver panic, so it is refused here.
func encodeRow(b []byte, cols []Column, values []any) ([]byte, []segment, error) {
	if len(values) != len(cols) {
		return b, nil, fmt.Errorf("tds: row has %d values for %d columns", len(values), len(cols))
	}
	b = append(b, tokenRow)
	var segs []segment
	for i, c := range cols {
		v := values[i]
		var err error
		if c.isMax() {
			var seg *segment
			b, seg, err = encodePLP(b, c, v)
			if seg != nil {
				seg.at = len(b)
				segs = append(segs, *seg)
			}
		} else {
			b, err = encodeValue(b, c, v)
		}
		if err != nil {
			return b, nil, fmt.Errorf("tds: column %d %q: %w", i, c.Name, err)
		}
	}
	return b, segs, nil
}

// segment is a long value written after the first `at` bytes of the
// encoded row: either a string (as UCS-2) or bytes, as one PLP chunk.
type segment struct {
	at  int
	str string
	bin []byte
	ucs bool
}

// encodePLP writes the PLP header of a (max) value; the data follows as a
// segment, then the chunk terminator is appended by writeRow.
func encodePLP(b []byte, c Column, v any) ([]byte, *segment, error) {
	if v == nil {
		return binary.LittleEndian.AppendUint64(b, math.MaxUint64), nil, nil
	}
	switch c.Type {
	case TypeNVarChar:
		s, ok := v.(string)
		if !ok {
			return b, nil, fmt.Errorf("nvarchar(max) value must be a string, got %T", v)
		}
		n := ucs2Len(s)
		b = binary.LittleEndian.AppendUint64(b, uint64(n))
		if n == 0 {
			return appendU32(b, 0), nil, nil
		}
		return appendU32(b, uint32(n)), &segment{str: s, ucs: true}, nil
	default:
		bin, ok := v.([]byte)
		if !ok {
			return b, nil, fmt.Errorf("varbinary(max) value must be []byte, got %T", v)
		}
		b = binary.LittleEndian.AppendUint64(b, uint64(len(bin)))
		if len(bin) == 0 {
			return appendU32(b, 0), nil, nil
		}
		return appendU32(b, uint32(len(bin))), &segment{bin: bin}, nil
	}
}

func encodeValue(b []byte, c Column, v any) ([]byte, error) {
	if v == nil {
		switch c.Type {
		case TypeNVarChar, TypeChar, TypeVarBinary:
			return appendU16(b, 0xFFFF), nil
		case TypeVariant:
			return appendU32(b, 0), nil
		}
		return append(b, 0), nil
	}
	switch c.Type {
	case typeColNText, typeColImage:
		return appendTextValue(b, c.Type, v)
	case TypeInt, TypeBigInt, TypeSmallInt, TypeTinyInt:
		n, err := toInt64(v)
		if err != nil {
			return b, err
		}
		size, lo, hi := 8, int64(math.MinInt64), int64(math.MaxInt64)
		switch c.Type {
		case TypeInt:
			size, lo, hi = 4, math.MinInt32, math.MaxInt32
		case TypeSmallInt:
			size, lo, hi = 2, math.MinInt16, math.MaxInt16
		case TypeTinyInt:
			size, lo, hi = 1, 0, math.MaxUint8
		}
		if n < lo || n > hi {
			return b, fmt.Errorf("value %d out of range", n)
		}
		b = append(b, byte(size))
		return binary.LittleEndian.AppendUint64(b, uint64(n))[:len(b)+size], nil
	case TypeBit:
		t, ok := v.(bool)
		if !ok {
			return b, fmt.Errorf("bit value must be bool, got %T", v)
		}
		if t {
			return append(b, 1, 1), nil
		}
		return append(b, 1, 0), nil
	case TypeNVarChar:
		s, ok := v.(string)
		if !ok {
			return b, fmt.Errorf("nvarchar value must be a string, got %T", v)
		}
		n := ucs2Len(s)
		if n > 2*c.Size {
			return b, fmt.Errorf("string of %d characters does not fit nvarchar(%d)", n/2, c.Size)
		}
		b = appendU16(b, uint16(n))
		return appendUCS2(b, s), nil
	case TypeChar:
		s, ok := v.(string)
		if !ok {
			return b, fmt.Errorf("char value must be a string, got %T", v)
		}
		raw := []byte{}
		for _, r := range s {
			if r > 0xFF {
				r = '?'
			}
			raw = append(raw, byte(r))
		}
		if len(raw) > c.Size {
			return b, fmt.Errorf("string of %d characters does not fit char(%d)", len(raw), c.Size)
		}
		b = appendU16(b, uint16(c.Size))
		b = append(b, raw...)
		for i := len(raw); i < c.Size; i++ { // char(n) is blank-padded
			b = append(b, ' ')
		}
		return b, nil
	case TypeDateTime:
		t, ok := v.(time.Time)
		if !ok {
			return b, fmt.Errorf("datetime value must be time.Time, got %T", v)
		}
		return appendDateTime(b, t), nil
	case TypeDateTime2:
		t, ok := v.(time.Time)
		if !ok {
			return b, fmt.Errorf("datetime2 value must be time.Time, got %T", v)
		}
		return appendDateTime2(b, t)
	case TypeNumeric:
		return appendNumeric(b, c, v)
	case TypeUniqueIdentifier:
		g, err := toGUID(v)
		if err != nil {
			return b, err
		}
		b = append(b, 16)
		b = binary.LittleEndian.AppendUint32(b, binary.BigEndian.Uint32(g[0:4]))
		b = binary.LittleEndian.AppendUint16(b, binary.BigEndian.Uint16(g[4:6]))
		b = binary.LittleEndian.AppendUint16(b, binary.BigEndian.Uint16(g[6:8]))
		return append(b, g[8:]...), nil
	case TypeReal, TypeFloat:
		var f float64
		switch x := v.(type) {
		case float64:
			f = x
		case float32:
			f = float64(x)
		default:
			return b, fmt.Errorf("float value must be float64, got %T", v)
		}
		if c.Type == TypeReal {
			b = append(b, 4)
			return appendU32(b, math.Float32bits(float32(f))), nil
		}
		b = append(b, 8)
		return binary.LittleEndian.AppendUint64(b, math.Float64bits(f)), nil
	case TypeVarBinary:
		bin, ok := v.([]byte)
		if !ok {
			return b, fmt.Errorf("varbinary value must be []byte, got %T", v)
		}
		if len(bin) > c.Size {
			return b, fmt.Errorf("%d bytes do not fit varbinary(%d)", len(bin), c.Size)
		}
		b = appendU16(b, uint16(len(bin)))
		return append(b, bin...), nil
	case TypeVariant:
		return appendVariant(b, v)
	}
	return b, fmt.Errorf("unknown column type %d", c.Type)
}

func toInt64(v any) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case int:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case int16:
		return int64(x), nil
	case int8:
		return int64(x), nil
	case uint8:
		return int64(x), nil
	case uint16:
		return int64(x), nil
	case uint32:
		return int64(x), nil
	case uint64:
		if x > math.MaxInt64 {
			return 0, fmt.Errorf("value %d out of range", x)
		}
		return int64(x), nil
	case uint:
		if uint64(x) > math.MaxInt64 {
			return 0, fmt.Errorf("value %d out of range", x)
		}
		return int64(x), nil
	}
	return 0, fmt.Errorf("integer value must be a Go integer, got %T", v)
}

func appendDateTime(b []byte, t time.Time) []byte {
	y, m, d := t.Date()
	day := time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	days := int32(day.Sub(epoch1900).Hours() / 24)
	sinceMidnight := time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute +
		time.Duration(t.Second())*time.Second + time.Duration(t.Nanosecond())
	ticks := uint32((int64(sinceMidnight)*300 + 5e8) / 1e9) // round to 1/300 s
	if ticks >= 300*86400 {
		days++
		ticks -= 300 * 86400
	}
	b = append(b, 8)
	b = appendU32(b, uint32(days))
	return appendU32(b, ticks)
}

// daysSince0001 counts days from 0001-01-01 to t's calendar date.
func daysSince0001(t time.Time) int {
	y, m, d := t.Date()
	y0 := y - 1
	return y0*365 + y0/4 - y0/100 + y0/400 + time.Date(y, m, d, 0, 0, 0, 0, time.UTC).YearDay() - 1
}

func appendDateTime2(b []byte, t time.Time) ([]byte, error) {
	if t.Year() < 1 || t.Year() > 9999 {
		return b, fmt.Errorf("datetime2 value %s out of range", t)
	}
	units := (int64(t.Hour())*3600+int64(t.Minute())*60+int64(t.Second()))*1e7 + int64(t.Nanosecond())/100
	days := daysSince0001(t)
	b = append(b, 8)
	b = append(b, byte(units), byte(units>>8), byte(units>>16), byte(units>>24), byte(units>>32))
	return append(b, byte(days), byte(days>>8), byte(days>>16)), nil
}

// appendNumeric encodes an int64 (already scaled: 12345 with scale 2 is
// 123.45) or a decimal string.
func appendNumeric(b []byte, c Column, v any) ([]byte, error) {
	var n *big.Int
	switch x := v.(type) {
	case string:
		var err error
		if n, err = parseScaled(x, int(c.Scale)); err != nil {
			return b, err
		}
	default:
		i, err := toInt64(v)
		if err != nil {
			return b, fmt.Errorf("numeric value must be an integer or a decimal string, got %T", v)
		}
		n = big.NewInt(i)
	}
	limit := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(c.precision())), nil)
	if new(big.Int).Abs(n).Cmp(limit) >= 0 {
		return b, fmt.Errorf("value %s does not fit numeric(%d,%d)", n, c.precision(), c.Scale)
	}
	size := numericLen(c.precision())
	b = append(b, byte(size))
	if n.Sign() < 0 {
		b = append(b, 0)
	} else {
		b = append(b, 1)
	}
	mag := new(big.Int).Abs(n).Bytes() // big-endian
	le := make([]byte, size-1)
	for i := range mag {
		le[i] = mag[len(mag)-1-i]
	}
	return append(b, le...), nil
}

// parseScaled parses "-123.45" into an integer scaled by 10^scale.
func parseScaled(s string, scale int) (*big.Int, error) {
	s = strings.TrimSpace(s)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(strings.TrimPrefix(s, "-"), "+")
	whole, frac, _ := strings.Cut(s, ".")
	if len(frac) > scale {
		return nil, fmt.Errorf("decimal %q has more than %d fraction digits", s, scale)
	}
	digits := whole + frac + strings.Repeat("0", scale-len(frac))
	n, ok := new(big.Int).SetString(digits, 10)
	if !ok || digits == "" {
		return nil, fmt.Errorf("invalid decimal %q", s)
	}
	if neg {
		n.Neg(n)
	}
	return n, nil
}

// toGUID accepts [16]byte in canonical order or "xxxxxxxx-xxxx-...".
func toGUID(v any) ([16]byte, error) {
	var g [16]byte
	switch x := v.(type) {
	case [16]byte:
		return x, nil
	case string:
		h := strings.ReplaceAll(strings.Trim(x, "{}"), "-", "")
		if len(h) != 32 {
			return g, fmt.Errorf("invalid uniqueidentifier %q", x)
		}
		if _, err := hex.Decode(g[:], []byte(h)); err != nil {
			return g, fmt.Errorf("invalid uniqueidentifier %q", x)
		}
		return g, nil
	}
	return g, fmt.Errorf("uniqueidentifier value must be [16]byte or string, got %T", v)
}

// appendVariant encodes a sql_variant (§2.2.5.5.4): string as nvarchar,
// integers as int/bigint, bool as bit, float64 as float.
func appendVariant(b []byte, v any) ([]byte, error) {
	var base byte
	var props, data []byte
	switch x := v.(type) {
	case string:
		x = truncateChars(x, 4000)
		base = typeNVarChar
		props = append(append([]byte{}, collationLatin1...), 0, 0)
		data = appendUCS2(nil, x)
		binary.LittleEndian.PutUint16(props[5:], uint16(len(data)))
	case bool:
		base, data = typeBit, []byte{0}
		if x {
			data[0] = 1
		}
	case float64:
		base, data = typeFlt8, binary.LittleEndian.AppendUint64(nil, math.Float64bits(x))
	case time.Time:
		// datetime (e.g. DATABASEPROPERTYEX 'LastGoodCheckDbTime'): the
		// 8 data bytes without appendDateTime's length prefix.
		base, data = typeDateTime, appendDateTime(nil, x)[1:]
	default:
		n, err := toInt64(v)
		if err != nil {
			return b, fmt.Errorf("sql_variant value must be string, integer, bool, float64 or time.Time, got %T", v)
		}
		if n >= math.MinInt32 && n <= math.MaxInt32 {
			base, data = typeInt4, appendU32(nil, uint32(n))
		} else {
			base, data = typeInt8, binary.LittleEndian.AppendUint64(nil, uint64(n))
		}
	}
	b = appendU32(b, uint32(2+len(props)+len(data)))
	b = append(b, base, byte(len(props)))
	b = append(b, props...)
	return append(b, data...), nil
}
