package tds

import (
	"fmt"
	"time"
)

// Column types a down-level client gets in place of types newer than its
// TDS version; never given by a handler (see downlevel).
const (
	typeColNText ColumnType = 100 + iota // ntext, for nvarchar(max) to 7.1
	typeColImage                         // image, for varbinary(max) to 7.1
)

// Wire type bytes of the text types (§2.2.5.4.2).
const (
	typeNText = 0x63
	typeImage = 0x22
)

// datetime2Text is how datetime2(7) reads as text to a client before 7.3.
const datetime2Text = "2006-01-02 15:04:05.0000000"

// downlevel maps result columns to what a client speaking TDS version ver
// can decode, as SQL Server does for down-level clients: date and time
// types (TDS 7.3) go as nvarchar columns holding their literal form
// (https://learn.microsoft.com/en-us/sql/relational-databases/native-client-odbc-date-time/enhanced-date-and-time-type-behavior-with-previous-sql-server-versions-odbc),
// and the (max) types, sent as PLP from TDS 7.2 on (§2.2.5.2.3), go to a
// 7.1 client as ntext and image
// (https://learn.microsoft.com/en-us/sql/relational-databases/native-client/features/using-large-value-types).
// changed is false, and wire is cols itself, when nothing changes.
func downlevel(cols []Column, ver uint32) (wire []Column, changed bool) {
	var out []Column
	for i, c := range cols {
		w := c
		switch {
		case c.Type == TypeDateTime2 && ver < tds73:
			w.Type, w.Size = TypeNVarChar, len(datetime2Text)
		case c.isMax() && ver < tds72 && c.Type == TypeNVarChar:
			w.Type = typeColNText
		case c.isMax() && ver < tds72 && c.Type == TypeVarBinary:
			w.Type = typeColImage
		default:
			continue
		}
		if out == nil {
			out = append([]Column(nil), cols...)
		}
		out[i] = w
	}
	if out == nil {
		return cols, false
	}
	return out, true
}

// downlevelValue converts a value of column c to the wire column w that
// downlevel chose for it.
func downlevelValue(c, w Column, v any) (any, error) {
	if v == nil || c.Type == w.Type {
		return v, nil
	}
	if c.Type == TypeDateTime2 {
		t, ok := v.(time.Time)
		if !ok {
			return nil, fmt.Errorf("datetime2 value must be time.Time, got %T", v)
		}
		return t.Format(datetime2Text), nil
	}
	return v, nil
}

// appendTextTypeInfo is the TYPE_INFO of ntext and image to a 7.1 client:
// the type, its maximum length, ntext's collation, then the table name as
// a US_VARCHAR (7.2 made it a multi-part name, §2.2.7.4); empty, as for a
// computed column.
func appendTextTypeInfo(b []byte, t ColumnType) []byte {
	if t == typeColNText {
		b = append(b, typeNText)
		b = appendU32(b, 0x7FFFFFFE)
		b = append(b, collationLatin1...)
	} else {
		b = append(b, typeImage)
		b = appendU32(b, 0x7FFFFFFF)
	}
	return appendU16(b, 0)
}

// textPointer is the TEXTPTR every ntext/image value carries; clients only
// hand it back to update the value in place, which the emulator does not do.
var textPointer = [16]byte{'s', 'q', 'l', 's', 'i', 'm'}

// appendTextValue appends a non-NULL ntext or image value: TEXTPTR length
// and pointer, an 8-byte timestamp, the data length and the data (§2.2.4.2.1.3).
func appendTextValue(b []byte, t ColumnType, v any) ([]byte, error) {
	var data []byte
	if t == typeColNText {
		s, ok := v.(string)
		if !ok {
			return b, fmt.Errorf("ntext value must be a string, got %T", v)
		}
		data = appendUCS2(nil, s)
	} else {
		bin, ok := v.([]byte)
		if !ok {
			return b, fmt.Errorf("image value must be []byte, got %T", v)
		}
		data = bin
	}
	b = append(b, byte(len(textPointer)))
	b = append(b, textPointer[:]...)
	b = append(b, make([]byte, 8)...)
	b = appendU32(b, uint32(len(data)))
	return append(b, data...), nil
}
