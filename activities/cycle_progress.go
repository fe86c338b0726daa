package activities

import (
	"context"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.uber.org/zap"
)

// reporter carries a long activity's progress to its heartbeats and, as the
// ProgressSignal, to its workflow's `progress` query.
type reporter struct {
	a    *Activities
	ctx  context.Context
	step string
	seq  int64
	// quiet: heartbeats only, no ProgressSignal (a workflow without the
	// `progress` query, such as the log chain's, would only pile them up
	// in its history).
	quiet bool

	mu         sync.Mutex
	percent    float64
	bytes      int64
	lastSignal time.Time
	lastPct    float64
}

// signalEvery bounds the signals a step sends (each is a history event).
const signalEvery = time.Minute

// A step starts without a signal: the workflow shows it at 0 % from its
// start, and a signal (a history event and a workflow task each) would
// tell it nothing. The first goes once the percent moved by 10 or after
// signalEvery, so a small database's steps send none.
func (a *Activities) newReporter(ctx context.Context, step string, seq int64) *reporter {
	return &reporter{a: a, ctx: ctx, step: step, seq: seq, lastSignal: time.Now()}
}

// newQuietReporter is a reporter that never signals its workflow.
func (a *Activities) newQuietReporter(ctx context.Context, step string, seq int64) *reporter {
	r := a.newReporter(ctx, step, seq)
	r.quiet = true
	return r
}

func (r *reporter) setPercent(p float64) {
	r.mu.Lock()
	r.percent = p
	r.mu.Unlock()
	r.maybeSignal()
}

func (r *reporter) set(p float64, b int64) {
	r.mu.Lock()
	r.percent, r.bytes = p, b
	r.mu.Unlock()
}

func (r *reporter) get() (float64, int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.percent, r.bytes
}

// maybeSignal signals the workflow when the percent moved by 10 or more, or
// signalEvery passed.
func (r *reporter) maybeSignal() {
	if r.quiet || r.a.Cycle.Signal == nil || !activity.IsActivity(r.ctx) {
		return
	}
	r.mu.Lock()
	p := StepProgress{Step: r.step, Sequence: r.seq, Percent: r.percent, Bytes: r.bytes}
	due := r.percent-r.lastPct >= 10 || time.Since(r.lastSignal) >= signalEvery
	if due {
		r.lastSignal, r.lastPct = time.Now(), r.percent
	}
	r.mu.Unlock()
	if !due {
		return
	}
	info := activity.GetInfo(r.ctx)
	ctx, cancel := context.WithTimeout(r.ctx, 5*time.Second)
	defer cancel()
	if err := r.a.Cycle.Signal(ctx, info.WorkflowExecution.ID, info.WorkflowExecution.RunID, ProgressSignal, p); err != nil {
		// Progress display only: never fail the step for it.
		r.a.loggerFor(r.ctx).Debug("progress signal not sent", zap.Error(err))
	}
}

// every heartbeats now and then every interval until stop: bytes (when
// given) refreshes the byte count first, details (when given) builds the
// heartbeat details, else StepProgress. Heartbeats also carry a quiet
// statement (CHECKDB sends nothing for minutes) past HeartbeatTimeout.
func (r *reporter) every(interval time.Duration, bytes func() int64, details func(percent float64, bytes int64) any) (stop func()) {
	beat := func() {
		if bytes != nil {
			b := bytes()
			r.mu.Lock()
			r.bytes = b
			r.mu.Unlock()
		}
		p, b := r.get()
		var d any = StepProgress{Step: r.step, Sequence: r.seq, Percent: p, Bytes: b}
		if details != nil {
			d = details(p, b)
		}
		heartbeat(r.ctx, d)
		r.maybeSignal()
	}
	beat()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-r.ctx.Done():
				return
			case <-t.C:
				beat()
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			wg.Wait()
		})
	}
}
