package plan

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/tsql"
)

func TestDefaultBufferCount(t *testing.T) {
	// One backup file, one database volume: 1*3 + 1 + 2 = 6, the "Buffer count: 6"
	// of the trace flag 3213 output in the CSS article.
	if got := DefaultBufferCount(1, 1); got != 6 {
		t.Errorf("DefaultBufferCount(1, 1) = %d, want 6", got)
	}
	// Seed 000's setup: 32 files, 9 LUNs: 32*3 + 32 + 18 = 146.
	if got := DefaultBufferCount(32, 9); got != 146 {
		t.Errorf("DefaultBufferCount(32, 9) = %d, want 146", got)
	}
	if got := DefaultBufferCount(2, 0); got != 10 {
		t.Errorf("DefaultBufferCount(2, 0) = %d, want 10 (at least one volume)", got)
	}
}

func TestBackupMemory(t *testing.T) {
	tests := []struct {
		t    Tuning
		vols int
		want int64
	}{
		// Seed 000's settings: BUFFERCOUNT 256 x MAXTRANSFERSIZE 4 MB = 1 GiB, whatever the stripe count.
		{Tuning{Stripes: 32, BufferCount: 256, MaxTransferSize: 4 << 20}, 9, 1 << 30},
		{Tuning{Stripes: 1, BufferCount: 256, MaxTransferSize: 4 << 20}, 9, 1 << 30},
		// Seed 004's failing example: 3000 x 2 MB = 5.9 GiB.
		{Tuning{Stripes: 1, BufferCount: 3000, MaxTransferSize: 2097152}, 1, 3000 * 2097152},
		// Defaults: 6 buffers x 1 MiB.
		{Tuning{}, 1, 6 << 20},
		// Default BUFFERCOUNT grows with the stripes: 8 files, 1 volume = 34 x 4 MiB.
		{Tuning{Stripes: 8, MaxTransferSize: 4 << 20}, 1, 34 * 4 << 20},
	}
	for _, tt := range tests {
		if got := BackupMemory(tt.t, tt.vols); got != tt.want {
			t.Errorf("BackupMemory(%+v, %d) = %d, want %d", tt.t, tt.vols, got, tt.want)
		}
	}
}

func TestCheckTuning(t *testing.T) {
	const budget = 2 << 30
	ok := []Tuning{
		{},
		{Stripes: 32, BufferCount: 256, MaxTransferSize: 4 << 20, BlockSize: 65536}, // seed 000: 1 GiB
		{Stripes: 64, MaxTransferSize: 64 << 10, BlockSize: 512},
		{Stripes: 8, BufferCount: 512, MaxTransferSize: 4 << 20}, // exactly 2 GiB
	}
	for _, tu := range ok {
		if err := CheckTuning(tu, 1, budget); err != nil {
			t.Errorf("CheckTuning(%+v) = %v", tu, err)
		}
	}
	bad := []struct {
		t   Tuning
		msg string
	}{
		{Tuning{Stripes: 65}, "stripes = 65"},
		{Tuning{Stripes: -1}, "stripes = -1"},
		{Tuning{MaxTransferSize: 100000}, "MAXTRANSFERSIZE 100000 must be a multiple of 65536"},
		{Tuning{MaxTransferSize: 8 << 20}, "MAXTRANSFERSIZE 8388608"},
		{Tuning{BlockSize: 1000}, "BLOCKSIZE 1000"},
		{Tuning{BlockSize: 131072}, "BLOCKSIZE 131072"},
		{Tuning{BufferCount: -5}, "BUFFERCOUNT -5"},
		// Seed 004: 3000 x 2 MiB = 5.9 GiB > 2 GiB; the fix names a count that fits.
		{Tuning{Stripes: 1, BufferCount: 3000, MaxTransferSize: 2097152}, "BUFFERCOUNT 3000 x MAXTRANSFERSIZE 2097152 = 5.9 GiB exceeds the memory budget of 2.0 GiB; lower buffercount to at most 1024"},
		// 64 stripes with the default BUFFERCOUNT (64*4+2 = 258) x 4 MiB = 1 GiB > 512 MiB.
		{Tuning{Stripes: 64, MaxTransferSize: 4 << 20}, "BUFFERCOUNT 258 (SQL Server's default for 64 stripes)"},
	}
	for _, c := range bad {
		b := int64(budget)
		if c.t.Stripes == 64 {
			b = 512 << 20
		}
		err := CheckTuning(c.t, 1, b)
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("CheckTuning(%+v) = %v, want mention of %q", c.t, err, c.msg)
		}
	}
	if err := CheckTuning(Tuning{MaxTransferSize: 100000}, 1, 0); !errors.Is(err, tsql.ErrInvalidOption) {
		t.Errorf("limit errors should wrap tsql.ErrInvalidOption: %v", err)
	}
	if err := CheckTuning(Tuning{BufferCount: 1 << 20, MaxTransferSize: 4 << 20}, 1, 0); err != nil {
		t.Errorf("budget 0 means no memory guard: %v", err)
	}
}

func TestRoundDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		83*time.Second + 400*time.Millisecond:       "1m23s",
		4567 * time.Millisecond:                     "4.57s",
		120*time.Millisecond + 400*time.Microsecond: "120ms",
	} {
		if got := RoundDuration(d).String(); got != want {
			t.Errorf("RoundDuration(%s) = %s, want %s", d, got, want)
		}
	}
}
