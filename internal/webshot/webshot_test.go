package webshot

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"io"
	"strings"
	"testing"
	"time"
)

// fakeBrowser answers the protocol on a pair of pipes the way Chromium
// does: NUL-terminated JSON, an event before each reply. answer gives the
// result (or error message) of each call.
func fakeBrowser(t *testing.T, answer func(method string, params json.RawMessage) (any, string)) (*conn, *[]map[string]any) {
	t.Helper()
	toBrowserR, toBrowserW := io.Pipe()
	fromBrowserR, fromBrowserW := io.Pipe()
	var got []map[string]any
	go func() {
		defer fromBrowserW.Close()
		br := bufio.NewReader(toBrowserR)
		for {
			raw, err := br.ReadBytes(0)
			if err != nil {
				return
			}
			var req struct {
				ID        int64           `json:"id"`
				Method    string          `json:"method"`
				SessionID string          `json:"sessionId"`
				Params    json.RawMessage `json:"params"`
			}
			if err := json.Unmarshal(raw[:len(raw)-1], &req); err != nil {
				t.Errorf("request is not JSON: %q", raw)
				return
			}
			got = append(got, map[string]any{"method": req.Method, "session": req.SessionID})
			result, errMsg := answer(req.Method, req.Params)
			reply := map[string]any{"id": req.ID, "result": result}
			if errMsg != "" {
				reply = map[string]any{"id": req.ID, "error": map[string]any{"code": -32000, "message": errMsg}}
			}
			for _, m := range []any{map[string]any{"method": "Page.frameNavigated", "params": map[string]any{}}, reply} {
				data, _ := json.Marshal(m)
				if _, err := fromBrowserW.Write(append(data, 0)); err != nil {
					return
				}
			}
		}
	}()
	c := newConn(fromBrowserR, toBrowserW)
	t.Cleanup(c.close)
	return c, &got
}

func TestCallSkipsEventsAndReportsErrors(t *testing.T) {
	c, got := fakeBrowser(t, func(method string, _ json.RawMessage) (any, string) {
		if method == "Page.navigate" {
			return nil, "Cannot navigate to invalid URL"
		}
		return map[string]any{"targetId": "T1"}, ""
	})
	ctx := context.Background()
	var r struct {
		TargetID string `json:"targetId"`
	}
	if err := c.call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank"}, &r); err != nil || r.TargetID != "T1" {
		t.Fatalf("createTarget: %+v, %v; want T1 past the event", r, err)
	}
	err := c.call(ctx, "S1", "Page.navigate", map[string]any{"url": "x"}, nil)
	if err == nil || !strings.Contains(err.Error(), "Page.navigate: Cannot navigate to invalid URL") {
		t.Errorf("navigate error: %v", err)
	}
	if len(*got) != 2 || (*got)[0]["session"] != "" || (*got)[1]["session"] != "S1" {
		t.Errorf("requests %v: want the second on session S1", *got)
	}
	c.close()
	if err := c.call(ctx, "", "Browser.getVersion", nil, nil); err == nil {
		t.Error("call after the browser closed its pipe succeeded")
	}
}

func TestCallGivesUpWithTheContext(t *testing.T) {
	c, _ := fakeBrowser(t, func(string, json.RawMessage) (any, string) {
		time.Sleep(time.Second)
		return nil, ""
	})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := c.call(ctx, "", "Page.enable", nil, nil); err == nil || !strings.Contains(err.Error(), "no answer from the browser") {
		t.Errorf("call past its deadline: %v", err)
	}
}

// WaitText matches across the line breaks innerText puts between
// elements, and on timeout names what is missing.
func TestWaitText(t *testing.T) {
	polls := 0
	c, _ := fakeBrowser(t, func(method string, params json.RawMessage) (any, string) {
		if method != "Runtime.evaluate" || !strings.Contains(string(params), "iframe") {
			return nil, "unexpected " + method
		}
		polls++
		text := "Loading"
		if polls >= 3 {
			text = "16\nWorkflows\n\nbackup-sql01-Sales\tbak02"
		}
		return map[string]any{"result": map[string]any{"type": "string", "value": text}}, ""
	})
	b := &Browser{conn: c, session: "S"}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.WaitText(ctx, []string{"16 Workflows", "backup-sql01-Sales bak02"}); err != nil || polls != 3 {
		t.Fatalf("WaitText after %d polls: %v", polls, err)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 600*time.Millisecond)
	defer cancel2()
	err := b.WaitText(ctx2, []string{"16 Workflows", "verified 9"})
	if err == nil || !strings.Contains(err.Error(), `never showed ["verified 9"]`) || !strings.Contains(err.Error(), "16 Workflows backup-sql01-Sales") {
		t.Errorf("WaitText for a missing text: %v", err)
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
