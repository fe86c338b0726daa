// Package webshot drives a headless Chromium over the DevTools protocol to
// take screenshots of a single-page app (the Temporal Web UI for the
// README's pictures): navigate, set the app's saved preferences in
// localStorage, wait until the page shows given texts, capture a PNG.
//
// It speaks the protocol over --remote-debugging-pipe (NUL-terminated JSON
// messages on the browser's file descriptors 3 and 4), so it needs only the
// standard library and Debian's chromium package, no WebSocket client.
package webshot

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
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
	cmd     *exec.Cmd
	dataDir string
	conn    *conn
	session string // the page's flattened session id
	width   int
	height  int
}

// Start launches the browser and opens its page.
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
	dataDir, err := os.MkdirTemp("", "webshot-profile-")
	if err != nil {
		return nil, fmt.Errorf("webshot: profile directory: %w", err)
	}
	// The browser reads commands from fd 3 and writes replies to fd 4.
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("webshot: pipe: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("webshot: pipe: %w", err)
	}
	cmd := exec.Command(o.Chromium,
		"--headless", "--remote-debugging-pipe", "--user-data-dir="+dataDir,
		"--no-sandbox", // root in a container has no user namespace for the sandbox
		"--disable-gpu", "--hide-scrollbars", "--mute-audio", "--no-first-run", "--no-default-browser-check",
		"--disable-extensions", "--disable-background-networking",
		fmt.Sprintf("--window-size=%d,%d", o.Width, o.Height), "about:blank")
	cmd.ExtraFiles = []*os.File{cmdR, outW}
	cmd.Stderr = o.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("webshot: start %s: %w", o.Chromium, err)
	}
	cmdR.Close()
	outW.Close()
	b := &Browser{cmd: cmd, dataDir: dataDir, conn: newConn(outR, cmdW), width: o.Width, height: o.Height}
	if err := b.open(ctx); err != nil {
		_ = b.Close()
		return nil, err
	}
	return b, nil
}

// open creates the page, attaches to it and sets its viewport.
func (b *Browser) open(ctx context.Context) error {
	var created struct {
		TargetID string `json:"targetId"`
	}
	if err := b.conn.call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank"}, &created); err != nil {
		return err
	}
	var attached struct {
		SessionID string `json:"sessionId"`
	}
	if err := b.conn.call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": created.TargetID, "flatten": true}, &attached); err != nil {
		return err
	}
	b.session = attached.SessionID
	if err := b.call(ctx, "Page.enable", nil, nil); err != nil {
		return err
	}
	return b.call(ctx, "Emulation.setDeviceMetricsOverride", map[string]any{
		"width": b.width, "height": b.height, "deviceScaleFactor": 1, "mobile": false}, nil)
}

func (b *Browser) call(ctx context.Context, method string, params, result any) error {
	return b.conn.call(ctx, b.session, method, params, result)
}

// Close ends the browser and removes its profile.
func (b *Browser) Close() error {
	b.conn.close()
	done := make(chan error, 1)
	go func() { done <- b.cmd.Wait() }()
	select {
	case <-done: // closing its pipe makes Chromium exit
	case <-time.After(5 * time.Second):
		_ = b.cmd.Process.Kill()
		<-done
	}
	return os.RemoveAll(b.dataDir)
}

// Navigate loads u in the page.
func (b *Browser) Navigate(ctx context.Context, u string) error {
	var r struct {
		ErrorText string `json:"errorText"`
	}
	if err := b.call(ctx, "Page.navigate", map[string]any{"url": u}, &r); err != nil {
		return err
	}
	if r.ErrorText != "" {
		return fmt.Errorf("webshot: load %s: %s (is the server up?)", u, r.ErrorText)
	}
	return nil
}

// Eval runs a JavaScript expression in the page (awaiting a promise) and
// stores its JSON value in out (when not nil).
func (b *Browser) Eval(ctx context.Context, expr string, out any) error {
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	if err := b.call(ctx, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}, &r); err != nil {
		return err
	}
	if e := r.ExceptionDetails; e != nil {
		return fmt.Errorf("webshot: script %.80q: %s %s", expr, e.Text, e.Exception.Description)
	}
	if out == nil || len(r.Result.Value) == 0 {
		return nil
	}
	return json.Unmarshal(r.Result.Value, out)
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
// e.g. "9" and "Workflows" in a heading). On timeout the error names the missing ones and shows the
// start of what the page does show.
func (b *Browser) WaitText(ctx context.Context, texts []string) error {
	var shown string
	for {
		if err := b.Eval(ctx, pageText, &shown); err != nil {
			return err
		}
		shown = oneLine(shown)
		var missing []string
		for _, t := range texts {
			if !strings.Contains(shown, oneLine(t)) {
				missing = append(missing, t)
			}
		}
		if len(missing) == 0 {
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
	var r struct {
		Data string `json:"data"`
	}
	if err := b.call(ctx, "Page.captureScreenshot", map[string]any{"format": "png"}, &r); err != nil {
		return nil, err
	}
	data, err := base64.StdEncoding.DecodeString(r.Data)
	if err != nil {
		return nil, fmt.Errorf("webshot: screenshot data: %w", err)
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

// conn is the DevTools protocol on a pair of pipes: one call at a time,
// events (messages without an id) dropped.
type conn struct {
	w      io.WriteCloser
	msgs   chan message
	mu     sync.Mutex // one call at a time
	nextID int64
	err    error // why msgs was closed
}

type message struct {
	ID     int64           `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

func newConn(r io.Reader, w io.WriteCloser) *conn {
	c := &conn{w: w, msgs: make(chan message, 16)}
	go func() {
		br := bufio.NewReader(r)
		for {
			raw, err := br.ReadBytes(0)
			if err != nil {
				c.err = fmt.Errorf("webshot: the browser closed its pipe: %w", err)
				close(c.msgs)
				return
			}
			var m message
			if err := json.Unmarshal(raw[:len(raw)-1], &m); err != nil {
				c.err = fmt.Errorf("webshot: a message from the browser is not JSON: %w", err)
				close(c.msgs)
				return
			}
			if m.ID != 0 {
				c.msgs <- m
			}
		}
	}()
	return c
}

func (c *conn) call(ctx context.Context, session, method string, params, result any) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nextID++
	id := c.nextID
	req := map[string]any{"id": id, "method": method}
	if params != nil {
		req["params"] = params
	}
	if session != "" {
		req["sessionId"] = session
	}
	data, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("webshot: %s: %w", method, err)
	}
	if _, err := c.w.Write(append(data, 0)); err != nil {
		return fmt.Errorf("webshot: send %s to the browser: %w", method, err)
	}
	for {
		select {
		case m, ok := <-c.msgs:
			if !ok {
				return fmt.Errorf("webshot: %s: %w", method, c.err)
			}
			if m.ID != id {
				continue // the late reply of a call whose context ended
			}
			if m.Error != nil {
				return fmt.Errorf("webshot: %s: %s (code %d)", method, m.Error.Message, m.Error.Code)
			}
			if result == nil || len(m.Result) == 0 {
				return nil
			}
			if err := json.Unmarshal(m.Result, result); err != nil {
				return fmt.Errorf("webshot: %s's result: %w", method, err)
			}
			return nil
		case <-ctx.Done():
			return fmt.Errorf("webshot: %s: no answer from the browser: %w", method, ctx.Err())
		}
	}
}

func (c *conn) close() { _ = c.w.Close() }
