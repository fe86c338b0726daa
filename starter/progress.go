package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/backupcycle/backupcycle/starter/client"
	"github.com/backupcycle/backupcycle/workflows"
)

// progressPrinter renders the `progress` query answers of a running cycle:
// on a terminal one line per step, redrawn in place (percent, size, MB/s,
// ETA); otherwise a plain line when a step begins and at each quarter of it,
// so a log file gets a few lines, not one per poll.
type progressPrinter struct {
	w   io.Writer
	tty bool
	// The current step, when it was first seen and what it had done then:
	// the query carries percent and bytes, so the rate and ETA are measured
	// between polls.
	step      string
	seq       int64
	seenAt    time.Time
	seenBytes int64
	seenPct   float64
	mark      int // the last quarter printed (plain)
	open      bool
}

func newProgressPrinter(w io.Writer, tty bool) *progressPrinter {
	return &progressPrinter{w: w, tty: tty}
}

// update shows p as of now.
func (pp *progressPrinter) update(p workflows.Progress, now time.Time) {
	if p.Step == "" {
		return
	}
	if p.Step != pp.step || p.Sequence != pp.seq {
		if pp.open {
			fmt.Fprintln(pp.w)
			pp.open = false
		}
		pp.step, pp.seq, pp.seenAt, pp.seenBytes, pp.seenPct, pp.mark = p.Step, p.Sequence, now, p.Bytes, p.Percent, 0
		if !pp.tty {
			fmt.Fprintf(pp.w, "  step %s%s\n", p.Step, where(p))
		}
	}
	line := pp.line(p, now)
	if pp.tty {
		// \r and erase-line: redraw the step's line in place.
		fmt.Fprintf(pp.w, "\r\x1b[K%s", line)
		pp.open = true
		return
	}
	if q := int(p.Percent / 25); q > pp.mark && p.Percent < 100 {
		pp.mark = q
		fmt.Fprintln(pp.w, line)
	}
}

// finish ends an open terminal line.
func (pp *progressPrinter) finish() {
	if pp.open {
		fmt.Fprintln(pp.w)
		pp.open = false
	}
}

// line is "  step backup (seq 2 on bak02)  45%  1.2 GiB  118.3 MB/s  ETA 1m20s".
func (pp *progressPrinter) line(p workflows.Progress, now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  step %s%s  %3.0f%%", p.Step, where(p), p.Percent)
	if p.Bytes > 0 {
		fmt.Fprintf(&b, "  %s", humanBytes(p.Bytes))
	}
	el := now.Sub(pp.seenAt)
	if el >= time.Second {
		if d := p.Bytes - pp.seenBytes; d > 0 {
			// MB/s as the Web UI's details show it (10^6 bytes).
			fmt.Fprintf(&b, "  %.1f MB/s", float64(d)/1e6/el.Seconds())
		}
		if dp := p.Percent - pp.seenPct; dp > 0 && p.Percent < 100 {
			eta := time.Duration(float64(el) * (100 - p.Percent) / dp)
			fmt.Fprintf(&b, "  ETA %s", eta.Round(time.Second))
		}
	}
	return b.String()
}

func where(p workflows.Progress) string {
	switch {
	case p.Sequence != 0 && p.Server != "":
		return fmt.Sprintf(" (seq %d on %s)", p.Sequence, p.Server)
	case p.Sequence != 0:
		return fmt.Sprintf(" (seq %d)", p.Sequence)
	}
	return ""
}

// followProgress asks the cycle for its progress every progressEvery and
// shows it until the returned stop is called (which waits for the last
// line). A query without an answer (no worker yet) is skipped: the wait
// itself reports a cycle that does not finish.
func followProgress(ctx context.Context, c *client.Client, workflowID, runID string, pp *progressPrinter) (stop func()) {
	end := every(ctx, func(ctx context.Context) {
		p, err := c.CycleProgress(ctx, workflowID, runID)
		if err == nil && ctx.Err() == nil {
			pp.update(p, time.Now())
		}
	})
	return func() {
		end()
		pp.finish()
	}
}

// every runs ask every progressEvery, each call bounded by
// client.DefaultProgressTimeout, until the returned stop is called (which
// waits for the call under way).
func every(ctx context.Context, ask func(ctx context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		for {
			qctx, qcancel := context.WithTimeout(ctx, client.DefaultProgressTimeout)
			ask(qctx)
			qcancel()
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		cancel()
		wg.Wait()
	}
}
