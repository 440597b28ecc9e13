package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"io"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"
)

// browser is headless Chromium driven over the DevTools protocol on a
// pipe (--remote-debugging-pipe: JSON messages ended by a NUL byte, in on
// its fd 3, out on its fd 4), for pages that change while they are looked
// at: no WebSocket client and no npm needed.
type browser struct {
	t      *testing.T
	cmd    *exec.Cmd
	in     io.WriteCloser
	exited chan struct{}

	mu      sync.Mutex
	nextID  int
	pending map[int]chan cdpMessage
	console []string
}

type cdpMessage struct {
	ID        int             `json:"id,omitempty"`
	Method    string          `json:"method,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *struct {
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

// tab is one page of the browser.
type tab struct {
	b       *browser
	session string
}

// startBrowser starts Chromium with the headless flags checkReportInChromium
// uses; it is stopped when the test ends.
func startBrowser(t *testing.T, chromium string) *browser {
	t.Helper()
	toBrowser, toBrowserW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	fromBrowser, fromBrowserW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(chromium, append(chromiumFlags(t), "--remote-debugging-pipe")...)
	cmd.ExtraFiles = []*os.File{toBrowser, fromBrowserW} // its fds 3 and 4
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	toBrowser.Close()
	fromBrowserW.Close()
	b := &browser{t: t, cmd: cmd, in: toBrowserW, exited: make(chan struct{}), pending: map[int]chan cdpMessage{}}
	go func() { _ = cmd.Wait(); close(b.exited) }()
	go b.read(fromBrowser)
	t.Cleanup(func() {
		b.in.Close()
		_ = cmd.Process.Kill()
		<-b.exited
		if t.Failed() {
			t.Logf("chromium's stderr:\n%s", stderr.String())
		}
	})
	return b
}

// read hands answers to their callers and keeps the console messages and
// page errors, until the browser closes the pipe.
func (b *browser) read(r io.ReadCloser) {
	defer r.Close()
	messages := bufio.NewReader(r)
	for {
		raw, err := messages.ReadBytes(0)
		if err != nil {
			return
		}
		var m cdpMessage
		if json.Unmarshal(bytes.TrimSuffix(raw, []byte{0}), &m) != nil {
			continue
		}
		b.mu.Lock()
		if ch, ok := b.pending[m.ID]; ok && m.ID != 0 {
			delete(b.pending, m.ID)
			ch <- m
		}
		switch m.Method {
		case "Runtime.consoleAPICalled", "Runtime.exceptionThrown", "Log.entryAdded":
			b.console = append(b.console, m.Method+" "+string(m.Params))
		}
		b.mu.Unlock()
	}
}

// call sends one command (to a tab when session is set) and decodes its
// result into out.
func (b *browser) call(session, method string, params, out any) error {
	b.mu.Lock()
	b.nextID++
	id := b.nextID
	ch := make(chan cdpMessage, 1)
	b.pending[id] = ch
	b.mu.Unlock()
	msg := map[string]any{"id": id, "method": method, "params": params}
	if session != "" {
		msg["sessionId"] = session
	}
	data, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	if _, err := b.in.Write(append(data, 0)); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			return fmt.Errorf("%s: %s", method, m.Error.Message)
		}
		if out != nil {
			return json.Unmarshal(m.Result, out)
		}
		return nil
	case <-b.exited:
		return fmt.Errorf("%s: chromium exited", method)
	case <-time.After(30 * time.Second):
		return fmt.Errorf("%s: no answer in 30s", method)
	}
}

// consoleMessages returns what the pages logged so far.
func (b *browser) consoleMessages() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.console...)
}

// open opens url in a new tab of width×height pixels.
func (b *browser) open(url string, width, height int) *tab {
	b.t.Helper()
	var target struct {
		TargetID string `json:"targetId"`
	}
	if err := b.call("", "Target.createTarget", map[string]any{"url": "about:blank"}, &target); err != nil {
		b.t.Fatal(err)
	}
	var attached struct {
		SessionID string `json:"sessionId"`
	}
	if err := b.call("", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &attached); err != nil {
		b.t.Fatal(err)
	}
	tb := &tab{b: b, session: attached.SessionID}
	for _, step := range []struct {
		method string
		params map[string]any
	}{
		{"Runtime.enable", nil},
		{"Log.enable", nil},
		{"Page.enable", nil},
		{"Emulation.setDeviceMetricsOverride", map[string]any{"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}},
		{"Page.navigate", map[string]any{"url": url}},
	} {
		if err := b.call(tb.session, step.method, step.params, nil); err != nil {
			b.t.Fatal(err)
		}
	}
	return tb
}

// eval evaluates a JavaScript expression in the page and decodes its value.
func (tb *tab) eval(expression string, out any) error {
	var res struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		Exception *struct {
			Text string `json:"text"`
		} `json:"exceptionDetails"`
	}
	if err := tb.b.call(tb.session, "Runtime.evaluate", map[string]any{"expression": expression, "returnByValue": true}, &res); err != nil {
		return err
	}
	if res.Exception != nil {
		return fmt.Errorf("evaluate %q: %s", expression, res.Exception.Text)
	}
	if out == nil || len(res.Result.Value) == 0 {
		return nil
	}
	return json.Unmarshal(res.Result.Value, out)
}

// waitFor evaluates a boolean expression until it is true.
func (tb *tab) waitFor(what, expression string, timeout time.Duration) {
	tb.b.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var ok bool
		err := tb.eval(expression, &ok)
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			var text string
			_ = tb.eval(`document.body ? document.body.innerText.slice(0, 3000) : ""`, &text)
			tb.b.t.Fatalf("waited %s for %s (%v); the page shows:\n%s", timeout, what, err, text)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// screenshot captures the tab's viewport as a PNG into path.
func (tb *tab) screenshot(path string) image.Image {
	tb.b.t.Helper()
	var shot struct {
		Data string `json:"data"`
	}
	if err := tb.b.call(tb.session, "Page.captureScreenshot", map[string]any{"format": "png"}, &shot); err != nil {
		tb.b.t.Fatal(err)
	}
	data, err := base64.StdEncoding.DecodeString(shot.Data)
	if err != nil {
		tb.b.t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		tb.b.t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		tb.b.t.Fatalf("screenshot: %v", err)
	}
	return img
}

// rect is an element's box in the viewport, in pixels.
func (tb *tab) rect(selector string) image.Rectangle {
	tb.b.t.Helper()
	var r struct{ X, Y, W, H float64 }
	expr := fmt.Sprintf(`(() => { const b = document.querySelector(%q).getBoundingClientRect(); return {X: b.x, Y: b.y, W: b.width, H: b.height}; })()`, selector)
	if err := tb.eval(expr, &r); err != nil {
		tb.b.t.Fatal(err)
	}
	return image.Rect(int(r.X), int(r.Y), int(r.X+r.W), int(r.Y+r.H))
}

// chromiumFlags are the headless flags every Chromium of the tests runs
// with, with a fresh profile.
func chromiumFlags(t *testing.T) []string {
	return []string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir(), "--enable-logging=stderr", "--v=0",
	}
}

// differingPixels counts the pixels of r that differ between two images.
func differingPixels(a, b image.Image, r image.Rectangle) int {
	n := 0
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			r1, g1, b1, _ := a.At(x, y).RGBA()
			r2, g2, b2, _ := b.At(x, y).RGBA()
			if r1 != r2 || g1 != g2 || b1 != b2 {
				n++
			}
		}
	}
	return n
}

// cropped returns the part of img inside r.
func cropped(img image.Image, r image.Rectangle) image.Image {
	return img.(interface {
		SubImage(image.Rectangle) image.Image
	}).SubImage(r)
}
