package tsql

import (
	"errors"
	"strings"
	"testing"
)

func TestQuoteIdent(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"Sales", "[Sales]"},
		{"Sales]; DROP DATABASE x--", "[Sales]]; DROP DATABASE x--]"},
		{"O'Brien", "[O'Brien]"},
		{"[already]", "[[already]]]"},
		{"]]", "[]]]]]"},
		{"Grüße 販売", "[Grüße 販売]"},
		{"with space", "[with space]"},
		{strings.Repeat("a", 128), "[" + strings.Repeat("a", 128) + "]"},
		// 64 characters outside the BMP are 128 UTF-16 code units: still fits.
		{strings.Repeat("😀", 64), "[" + strings.Repeat("😀", 64) + "]"},
	}
	for _, tt := range tests {
		got, err := QuoteIdent(tt.in)
		if err != nil {
			t.Errorf("QuoteIdent(%q): unexpected error %v", tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("QuoteIdent(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestQuoteIdentRejects(t *testing.T) {
	tests := []struct {
		name, in, wantMsg string
	}{
		{"empty", "", "empty"},
		{"NUL", "Sa\x00les", "NUL"},
		{"129 chars", strings.Repeat("a", 129), "129 characters"},
		{"65 astral chars = 130 UTF-16 units", strings.Repeat("😀", 65), "130 characters"},
		{"invalid UTF-8", "Sa\xffles", "UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := QuoteIdent(tt.in)
			if err == nil {
				t.Fatalf("QuoteIdent(%q) accepted a bad name", tt.in)
			}
			if !errors.Is(err, ErrInvalidIdent) {
				t.Errorf("error %v does not wrap ErrInvalidIdent", err)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("error %q does not mention %q", err, tt.wantMsg)
			}
		})
	}
}

func TestQuoteString(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain", "N'plain'"},
		{"O'Brien", "N'O''Brien'"},
		{"''", "N''''''"},
		{`\\192.168.2.2\backup\x.bak`, `N'\\192.168.2.2\backup\x.bak'`},
		{"x'; DROP DATABASE y--", "N'x''; DROP DATABASE y--'"},
		{"販売", "N'販売'"},
		{"", "N''"},
	}
	for _, tt := range tests {
		if got := QuoteString(tt.in); got != tt.want {
			t.Errorf("QuoteString(%q) = %q, want %q", tt.in, got, tt.want)
		}
		got, err := Literal(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("Literal(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	if _, err := Literal("a\x00b"); !errors.Is(err, ErrInvalidLiteral) {
		t.Errorf("Literal with NUL: got %v, want ErrInvalidLiteral", err)
	}
}

func TestQualifiedName(t *testing.T) {
	got, err := QualifiedName("Sales]", "dbo", "Order's")
	if err != nil {
		t.Fatal(err)
	}
	if want := "[Sales]]].[dbo].[Order's]"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	for _, parts := range [][]string{nil, {"a", "b", "c", "d", "e"}, {"db", "", "t"}} {
		if _, err := QualifiedName(parts...); err == nil {
			t.Errorf("QualifiedName(%q) accepted", parts)
		}
	}
}
