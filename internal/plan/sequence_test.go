package plan

import (
	"testing"
	"time"
)

func TestUTCSequence(t *testing.T) {
	at := time.Date(2026, 11, 29, 19, 25, 7, 0, time.FixedZone("CET", 3600))
	tests := []struct {
		last, want int64
	}{
		{0, 20261129182507}, // converted to UTC
		{20261129182506, 20261129182507},
		{20261129182507, 20261129182508}, // same second: next number
		{20261130000000, 20261130000001}, // clock went back: still increasing
	}
	for _, tt := range tests {
		if got := UTCSequence(at, tt.last); got != tt.want {
			t.Errorf("UTCSequence(last=%d) = %d, want %d", tt.last, got, tt.want)
		}
	}
}
