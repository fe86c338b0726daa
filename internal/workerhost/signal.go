package workerhost

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// SignalContext ends at the first SIGINT or SIGTERM, which stops the worker
// gracefully; after it the default action is restored, so a second signal
// kills a shutdown that hangs.
func SignalContext() context.Context {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	return ctx
}
