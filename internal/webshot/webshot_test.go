package webshot

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// page is a single-page app in miniature: its text appears only after a
// while, part of it inside a same-origin iframe, and it shows the column
// choice it finds in localStorage, as the Temporal Web UI does.
const page = `<!doctype html><html><body style="background: linear-gradient(90deg, #c33, #33c); color: #fff">
<div id="app">Loading</div><iframe src="/frame"></iframe>
<script>
setTimeout(() => {
	document.getElementById("app").innerHTML =
		"<h1><span>16</span>\n<span>Workflows</span></h1><p>columns: " + (localStorage.getItem("table-columns") || "default") + "</p>";
}, 400);
</script></body></html>`

const frame = `<!doctype html><html><body><p>backup-sql01-Sales</p><p>bak02</p></body></html>`

func site(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(page)) })
	mux.HandleFunc("/frame", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(frame)) })
	srv := httptest.NewServer(mux) // 127.0.0.1
	t.Cleanup(srv.Close)
	return srv
}

func start(t *testing.T) *Browser {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := Start(ctx, Options{Width: 800, Height: 600})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return b
}

// The whole capture on headless Chromium: the saved column choice reaches
// the app through localStorage, the texts are waited for (inside the
// iframe too, across the line breaks innerText puts between elements), and
// the PNG is refused for a blank page, accepted for the rendered one.
func TestCapture(t *testing.T) {
	srv := site(t)
	b := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	if err := b.Navigate(ctx, "about:blank"); err != nil {
		t.Fatal(err)
	}
	blank, err := b.Screenshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckPNG(blank, 0); err == nil || !strings.Contains(err.Error(), "looks blank") {
		t.Errorf("a blank page's screenshot: %v, want refused as blank", err)
	}

	if err := b.SetLocalStorage(ctx, srv.URL+"/namespaces/default/workflows", map[string]string{"table-columns": "BackupServer"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Navigate(ctx, srv.URL+"/namespaces/default/workflows"); err != nil {
		t.Fatal(err)
	}
	if err := b.WaitText(ctx, []string{"16 Workflows", "columns: BackupServer", "backup-sql01-Sales bak02"}); err != nil {
		t.Fatal(err)
	}
	shot, err := b.Screenshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckPNG(shot, 1<<10); err != nil {
		t.Errorf("the rendered page's screenshot: %v", err)
	}
	if img, err := png.Decode(bytes.NewReader(shot)); err != nil || img.Bounds().Dx() != 800 || img.Bounds().Dy() != 600 {
		t.Errorf("screenshot %v (%v), want 800x600", img.Bounds(), err)
	}

	// A text that never comes: the error names it and shows the page.
	short, cancel2 := context.WithTimeout(ctx, time.Second)
	defer cancel2()
	err = b.WaitText(short, []string{"16 Workflows", "verified 9"})
	if err == nil || !strings.Contains(err.Error(), `never showed ["verified 9"]`) || !strings.Contains(err.Error(), "16 Workflows") {
		t.Errorf("WaitText for a missing text: %v", err)
	}
}

// A page whose server is down fails the navigation with the browser's
// reason, and a script error is reported, not swallowed.
func TestNavigateAndEvalErrors(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + l.Addr().String() + "/"
	l.Close()
	b := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.Navigate(ctx, down); err == nil || !strings.Contains(err.Error(), "ERR_CONNECTION_REFUSED") ||
		!strings.Contains(err.Error(), "is the server up?") {
		t.Errorf("navigate to a closed port: %v", err)
	}
	var n int
	if err := b.Eval(ctx, "6 * 7", &n); err != nil || n != 42 {
		t.Errorf("Eval(6 * 7) = %d, %v", n, err)
	}
	if err := b.Eval(ctx, "Promise.resolve(5)", &n); err != nil || n != 5 {
		t.Errorf("Eval of a promise = %d, %v; want it awaited", n, err)
	}
	if err := b.Eval(ctx, "nosuchfunction()", nil); err == nil || !strings.Contains(err.Error(), "nosuchfunction") {
		t.Errorf("Eval of a failing script: %v", err)
	}
}

func TestCheckPNG(t *testing.T) {
	encode := func(img image.Image) []byte {
		var buf bytes.Buffer
		if err := png.Encode(&buf, img); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	blank := image.NewRGBA(image.Rect(0, 0, 400, 300))
	for i := range blank.Pix {
		blank.Pix[i] = 0xff
	}
	page := image.NewRGBA(image.Rect(0, 0, 400, 300))
	for y := 0; y < 300; y++ {
		for x := 0; x < 400; x++ {
			page.Set(x, y, color.RGBA{uint8(x), uint8(y), uint8(x ^ y), 0xff})
		}
	}
	if err := CheckPNG(encode(blank), 0); err == nil || !strings.Contains(err.Error(), "looks blank") {
		t.Errorf("blank page: %v", err)
	}
	if err := CheckPNG(encode(page), 0); err != nil {
		t.Errorf("varied page: %v", err)
	}
	if err := CheckPNG(encode(page), 10<<20); err == nil || !strings.Contains(err.Error(), "want at least") {
		t.Errorf("too small: %v", err)
	}
	if err := CheckPNG(bytes.Repeat([]byte("x"), 100), 10); err == nil || !strings.Contains(err.Error(), "not a PNG") {
		t.Errorf("not a PNG: %v", err)
	}
}
