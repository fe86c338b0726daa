package storage

import (
	"context"
	"sync"
)

// EachFile runs fn for the files 0..n-1 of a copy, at most limit at once
// (at least one). The first that fails cancels the context of the others,
// which end with what they have (their progress stays resumable). It
// returns each file's error: ctx's error for a file that never started.
func EachFile(ctx context.Context, n, limit int, fn func(ctx context.Context, i int) error) []error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, n)
	sem := make(chan struct{}, max(limit, 1))
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
			case <-ctx.Done():
				errs[i] = ctx.Err()
				return
			}
			if errs[i] = fn(ctx, i); errs[i] != nil {
				cancel()
			}
		})
	}
	wg.Wait()
	return errs
}
