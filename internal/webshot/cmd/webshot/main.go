// Command webshot saves a screenshot of a web page once it shows given
// texts, with headless Chromium (package internal/webshot). `make
// screenshots` uses it for the README's pictures of the Temporal Web UI.
//
//	webshot -url URL -out FILE.png [-wait TEXT]... [-local-storage KEY=VALUE]...
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/backupcycle/backupcycle/internal/webshot"
)

// list is a repeatable flag.
type list []string

func (l *list) String() string     { return strings.Join(*l, ", ") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "webshot: %s\n", strings.TrimPrefix(err.Error(), "webshot: "))
		os.Exit(1)
	}
}

func run() error {
	var waits, storage list
	pageURL := flag.String("url", "", "page to capture")
	out := flag.String("out", "", "PNG file to write")
	flag.Var(&waits, "wait", "capture only once the page's text contains this (repeatable)")
	flag.Var(&storage, "local-storage", "KEY=VALUE to put in the page origin's localStorage before loading it, as the app would have saved it (repeatable)")
	width := flag.Int("width", 1600, "viewport width")
	height := flag.Int("height", 1000, "viewport height")
	timeout := flag.Duration("timeout", time.Minute, "give up when the page has not shown the -wait texts by then")
	settle := flag.Duration("settle", time.Second, "wait this long after the texts appear (transitions, late requests)")
	minBytes := flag.Int("min-bytes", 20<<10, "refuse a PNG smaller than this: a blank page")
	chromium := flag.String("chromium", "", "browser binary (default: chromium on PATH)")
	flag.Parse()
	if *pageURL == "" || *out == "" || flag.NArg() > 0 {
		flag.Usage()
		return errors.New("give -url and -out")
	}
	items := map[string]string{}
	for _, kv := range storage {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("-local-storage %q: want KEY=VALUE", kv)
		}
		items[k] = v
	}

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	b, err := webshot.Start(ctx, webshot.Options{Chromium: *chromium, Width: *width, Height: *height})
	if err != nil {
		return err
	}
	defer b.Close()
	if len(items) > 0 {
		if err := b.SetLocalStorage(ctx, *pageURL, items); err != nil {
			return err
		}
	}
	if err := b.Navigate(ctx, *pageURL); err != nil {
		return err
	}
	if err := b.WaitText(ctx, waits); err != nil {
		return err
	}
	select {
	case <-time.After(*settle):
	case <-ctx.Done():
		return ctx.Err()
	}
	png, err := b.Screenshot(ctx)
	if err != nil {
		return err
	}
	if err := webshot.CheckPNG(png, *minBytes); err != nil {
		return err
	}
	if err := os.WriteFile(*out, png, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", *out, err)
	}
	fmt.Printf("%s: %d KiB, %s\n", *out, len(png)>>10, *pageURL)
	return nil
}
