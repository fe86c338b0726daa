// Package webshot drives a headless Chromium (with chromedp, over the
// DevTools protocol) to take screenshots of a single-page app (the Temporal
// Web UI for the README's pictures): navigate, set the app's saved
// preferences in localStorage, wait until the page shows given texts,
// capture a PNG, and refuse one that looks blank.
package webshot

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"net/url"
	"os/exec"
	"strings"
	"time"

	"github.com/chromedp/chromedp"
)

// Options configure Start.
type Options struct {
	// Chromium is the browser binary; default the first of chromium,
	// chromium-browser, google-chrome on PATH.
	Chromium string
	// Width and Height of the viewport in CSS pixels; default 1600x1000.
	Width, Height int
	// Stderr receives the browser's own log; default discarded (it is
	// noisy about D-Bus in containers).
	Stderr io.Writer
}

// Browser is one headless Chromium with one page.
type Browser struct {
	ctx         context.Context // the page's chromedp context
	cancel      context.CancelFunc
	cancelAlloc context.CancelFunc // ends the process, removes its profile
}

// Start launches the browser and opens its page; ctx bounds the start only.
func Start(ctx context.Context, o Options) (*Browser, error) {
	if o.Width == 0 {
		o.Width, o.Height = 1600, 1000
	}
	if o.Chromium == "" {
		for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
			if p, err := exec.LookPath(name); err == nil {
				o.Chromium = p
				break
			}
		}
		if o.Chromium == "" {
			return nil, errors.New("webshot: no chromium on PATH: install Debian's package (apt-get install chromium) or give its path")
		}
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(o.Chromium),
		chromedp.WindowSize(o.Width, o.Height),
		chromedp.DisableGPU,
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("mute-audio", true),
	)
	if o.Stderr != nil {
		opts = append(opts, chromedp.CombinedOutput(o.Stderr))
	}
	// The browser lives as long as these contexts, not as long as ctx.
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancel := chromedp.NewContext(actx)
	b := &Browser{ctx: bctx, cancel: cancel, cancelAlloc: cancelAlloc}
	stop := context.AfterFunc(ctx, cancel)
	// The first action starts the browser; the viewport is the page's size
	// at scale 1, whatever the window manager would have made of it.
	err := chromedp.Do(bctx, chromedp.EmulateViewport(int64(o.Width), int64(o.Height)))
	stop()
	if err != nil {
		_ = b.Close()
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return nil, fmt.Errorf("webshot: start %s: %w", o.Chromium, err)
	}
	return b, nil
}

// Close ends the browser and removes its profile.
func (b *Browser) Close() error {
	tctx, tcancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer tcancel()
	err := chromedp.Cancel(tctx) // closes the browser gracefully
	b.cancel()
	b.cancelAlloc() // waits for the process and removes the profile
	if errors.Is(err, context.Canceled) {
		err = nil // it had stopped already (a failed start)
	}
	return err
}

// run runs a on the page, given up when ctx ends.
func run[T any](ctx context.Context, b *Browser, a chromedp.Action[T]) (T, error) {
	// Derived from the page's context: ending it ends this action only.
	rctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	v, err := chromedp.Run(rctx, a)
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("no answer from the browser: %w", ctx.Err())
	}
	return v, err
}

// Navigate loads u in the page and waits for its load event.
func (b *Browser) Navigate(ctx context.Context, u string) error {
	_, err := run(ctx, b, chromedp.Navigate(u))
	var le *chromedp.LoadError
	if errors.As(err, &le) {
		return fmt.Errorf("webshot: load %s: %s (is the server up?)", u, le.ErrorText)
	}
	if err != nil {
		return fmt.Errorf("webshot: load %s: %w", u, err)
	}
	return nil
}

// Eval runs a JavaScript expression in the page (awaiting a promise) and
// stores its JSON value in out (when not nil).
func (b *Browser) Eval(ctx context.Context, expr string, out any) error {
	raw, err := run(ctx, b, chromedp.Evaluate[[]byte](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		return fmt.Errorf("webshot: script %.80q: %w", expr, err)
	}
	if out == nil || len(raw) == 0 {
		return nil
	}
	return json.Unmarshal(raw, out)
}

// SetLocalStorage stores items in the localStorage of pageURL's origin
// (loading that origin's root first), as the app itself would have saved
// them; the next Navigate to that origin reads them.
func (b *Browser) SetLocalStorage(ctx context.Context, pageURL string, items map[string]string) error {
	u, err := url.Parse(pageURL)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return fmt.Errorf("webshot: %q is not an absolute URL", pageURL)
	}
	if err := b.Navigate(ctx, u.Scheme+"://"+u.Host+"/"); err != nil {
		return err
	}
	for k, v := range items {
		kq, _ := json.Marshal(k)
		vq, _ := json.Marshal(v)
		if err := b.Eval(ctx, fmt.Sprintf("localStorage.setItem(%s, %s)", kq, vq), nil); err != nil {
			return err
		}
	}
	return nil
}

// pageText is the visible text of the page and of its same-origin frames
// (the Temporal Web UI renders Markdown, e.g. a workflow's details, in an
// iframe).
const pageText = `[document, ...Array.from(document.querySelectorAll("iframe"), f => {
	try { return f.contentDocument } catch (e) { return null }
})].map(d => d && d.body ? d.body.innerText : "").join("\n")`

// WaitText waits until the page's visible text contains every one of
// texts, polling. Runs of white space count as one space on both sides
// (innerText puts line breaks between elements that render on one line,
// e.g. "9" and "Workflows" in a heading). On timeout the error names the
// missing ones and shows the start of what the page does show.
func (b *Browser) WaitText(ctx context.Context, texts []string) error {
	var shown string
	for {
		err := b.Eval(ctx, pageText, &shown)
		if err != nil && ctx.Err() == nil {
			return err
		}
		shown = oneLine(shown)
		var missing []string
		for _, t := range texts {
			if !strings.Contains(shown, oneLine(t)) {
				missing = append(missing, t)
			}
		}
		if len(missing) == 0 && err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("webshot: the page never showed %q (it shows: %.300q): %w", missing, shown, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// Screenshot captures the viewport as PNG.
func (b *Browser) Screenshot(ctx context.Context) ([]byte, error) {
	data, err := run(ctx, b, chromedp.CaptureScreenshot())
	if err != nil {
		return nil, fmt.Errorf("webshot: screenshot: %w", err)
	}
	return data, nil
}

// CheckPNG refuses an image that is too small in bytes or nearly one
// colour: what a screenshot of a page that had not rendered yet looks like.
func CheckPNG(data []byte, minBytes int) error {
	if len(data) < minBytes {
		return fmt.Errorf("webshot: the screenshot is %d bytes, want at least %d: the page looks blank", len(data), minBytes)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("webshot: the screenshot is not a PNG: %w", err)
	}
	if n := colours(img, 64); n < 16 {
		return fmt.Errorf("webshot: the screenshot has %d colours, want at least 16: the page looks blank", n)
	}
	return nil
}

// colours counts the distinct colours on a grid of step x step pixels.
func colours(img image.Image, step int) int {
	seen := map[[4]uint32]bool{}
	bd := img.Bounds()
	for y := bd.Min.Y; y < bd.Max.Y; y += max(1, bd.Dy()/step) {
		for x := bd.Min.X; x < bd.Max.X; x += max(1, bd.Dx()/step) {
			r, g, b, a := img.At(x, y).RGBA()
			seen[[4]uint32{r, g, b, a}] = true
		}
	}
	return len(seen)
}
