package sqlsim

import (
	"strconv"
	"strings"
	"unicode/utf16"

	"github.com/backupcycle/backupcycle/internal/sqlsim/tds"
)

// varType is the declared type of a variable or an sp_executesql
// parameter: SELECT @v returns a column of that type (an int parameter is
// an int column, not a bigint), and a value assigned to it is converted
// as SQL Server converts on assignment (strings cut to the declared
// length).
type varType struct {
	col tds.Column
}

// declaredColumn maps a declared data type onto the emulator's column
// types; nil for a type it does not model (the value's own type is used).
// varchar and char are answered as nvarchar, and date, time and
// datetimeoffset as datetime2: the emulator has no column types of their
// own for them.
func declaredColumn(t typeSpec) *varType {
	c := tds.Column{Nullable: true}
	length := func(def int) int {
		if len(t.args) == 0 {
			return def // DECLARE @s nvarchar is nvarchar(1)
		}
		if t.args[0] == "max" {
			return 0
		}
		n, err := strconv.Atoi(t.args[0])
		if err != nil || n < 1 {
			return def
		}
		return n
	}
	switch t.name {
	case "int":
		c.Type = tds.TypeInt
	case "bigint":
		c.Type = tds.TypeBigInt
	case "smallint":
		c.Type = tds.TypeSmallInt
	case "tinyint":
		c.Type = tds.TypeTinyInt
	case "bit":
		c.Type = tds.TypeBit
	case "nvarchar", "nchar", "varchar", "char":
		c.Type, c.Size = tds.TypeNVarChar, length(1)
		if c.Size > 4000 {
			c.Size = 0 // varchar(8000) holds more than nvarchar(4000)
		}
	case "sysname":
		c.Type, c.Size = tds.TypeNVarChar, 128
	case "varbinary", "binary":
		c.Type, c.Size = tds.TypeVarBinary, length(1)
	case "datetime", "smalldatetime":
		c.Type = tds.TypeDateTime
	case "datetime2", "date", "time", "datetimeoffset":
		c.Type = tds.TypeDateTime2
	case "float":
		c.Type = tds.TypeFloat
	case "real":
		c.Type = tds.TypeReal
	case "decimal", "numeric":
		c.Type, c.Precision = tds.TypeNumeric, 18
		if len(t.args) > 0 {
			if p, err := strconv.Atoi(t.args[0]); err == nil && p >= 1 && p <= 38 {
				c.Precision = uint8(p)
			}
		}
		if len(t.args) > 1 {
			if s, err := strconv.Atoi(t.args[1]); err == nil && s >= 0 && s <= int(c.Precision) {
				c.Scale = uint8(s)
			}
		}
	case "money":
		c.Type, c.Precision, c.Scale = tds.TypeNumeric, 19, 4
	case "smallmoney":
		c.Type, c.Precision, c.Scale = tds.TypeNumeric, 10, 4
	case "uniqueidentifier":
		c.Type = tds.TypeUniqueIdentifier
	case "sql_variant":
		c.Type = tds.TypeVariant
	default:
		return nil
	}
	return &varType{col: c}
}

// assign converts v for a variable of type t, as an assignment does: a
// string or binary longer than the declared length is cut (silently, for
// variables), a number for a bit becomes 0 or 1, a float for a decimal is
// rounded to its scale.
func (t *varType) assign(v any) any {
	if t == nil || v == nil {
		return v
	}
	c := t.col
	switch x := v.(type) {
	case string:
		if c.Type == tds.TypeNVarChar && c.Size > 0 && utf16Len(x) > c.Size {
			u := utf16.Encode([]rune(x))[:c.Size]
			return string(utf16.Decode(u))
		}
	case []byte:
		if c.Type == tds.TypeVarBinary && c.Size > 0 && len(x) > c.Size {
			return x[:c.Size]
		}
	case int64:
		if c.Type == tds.TypeBit {
			return x != 0
		}
	case float64:
		if c.Type == tds.TypeNumeric {
			return strconv.FormatFloat(x, 'f', int(c.Scale), 64)
		}
	}
	return v
}

// parseDeclarations reads sp_executesql's parameter list ("@p1 int,
// @p2 nvarchar(max) OUTPUT") into each parameter's type; parameters it
// cannot read are left untyped.
func parseDeclarations(decl string) map[string]*varType {
	out := map[string]*varType{}
	if strings.TrimSpace(decl) == "" {
		return out
	}
	toks, err := lex(decl)
	if err != nil {
		return out
	}
	p := &parser{toks: toks, sql: decl}
	for {
		name := p.next()
		if name.kind != tVar {
			return out
		}
		p.accept("AS")
		t, err := p.typeSpec()
		if err != nil {
			return out
		}
		out[strings.ToLower(name.text)] = declaredColumn(t)
		if !p.accept("OUTPUT") {
			p.accept("OUT")
		}
		if !p.acceptOp(",") {
			return out
		}
	}
}

// utf16Len is the length of s in UTF-16 code units, as nvarchar counts.
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}
