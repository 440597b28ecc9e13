package main

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen"
)

func startTestLive(t *testing.T, step bool) *live {
	t.Helper()
	lv, err := startLive("127.0.0.1:0", "test", 1, step, "", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lv.close)
	return lv
}

// waitingStage starts a stage that waits for "run this stage"; the
// channel says when it started.
func waitingStage(t *testing.T, lv *live) <-chan error {
	t.Helper()
	started := make(chan error, 1)
	go func() {
		started <- lv.StageStarting(context.Background(), loadgen.StageStart{Stage: "naive", Label: "naive", Runs: 1}, &loadgen.LiveStage{})
	}()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		lv.mu.Lock()
		waiting := lv.waiting != nil
		lv.mu.Unlock()
		if waiting {
			return started
		}
		if time.Now().After(deadline) {
			t.Fatal("the stage never waited")
		}
	}
}

func postRun(t *testing.T, lv *live, token string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, lv.url+"run", nil)
	if token != "" {
		req.Header.Set("X-Run-Token", token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// A click that lands after the stage says it waits but before it selects
// (CI caught a 409 there) is kept for that stage, and a second one is
// refused rather than left to start the stage after it.
func TestAClickBeforeTheStageSelectsIsKept(t *testing.T) {
	lv := startTestLive(t, true)
	lv.mu.Lock()
	lv.waiting = &loadgen.StageStart{Stage: "naive", Label: "naive", Runs: 1}
	lv.mu.Unlock()
	if status := postRun(t, lv, lv.pageToken()); status != http.StatusNoContent {
		t.Fatalf("POST /run while the stage waits = %d, want 204", status)
	}
	if status := postRun(t, lv, lv.pageToken()); status != http.StatusConflict {
		t.Fatalf("a second POST /run for the same stage = %d, want 409", status)
	}
	select {
	case <-lv.run:
	default:
		t.Fatal("the click was not kept for the waiting stage")
	}
}

// With --step, "run this stage" takes the run's token, which only the live
// page itself carries: a POST /run from any other page (it cannot read the
// page, nor send the header without a preflight the page does not allow)
// is refused, and the stage keeps waiting. The page answers only under its
// own address, so a rebound host name cannot read the token either.
func TestRunNeedsThePagesToken(t *testing.T) {
	lv := startTestLive(t, true)
	res, err := http.Get(lv.url)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	m := regexp.MustCompile(`<meta name="run-token" content="([0-9a-f]{32})">`).FindSubmatch(page)
	if m == nil {
		t.Fatalf("the page carries no run token:\n%s", page)
	}
	token := string(m[1])

	started := waitingStage(t, lv)
	rebound, _ := http.NewRequest(http.MethodGet, lv.url, nil)
	rebound.Host = "attacker.example:" + strings.TrimSuffix(lv.url[strings.LastIndex(lv.url, ":")+1:], "/")
	res, err = http.DefaultClient.Do(rebound)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("the page under another host name (DNS rebinding): %s, want 403", res.Status)
	}
	for _, wrong := range []string{"", "0123456789abcdef0123456789abcdef"} {
		if status := postRun(t, lv, wrong); status != http.StatusForbidden {
			t.Fatalf("POST /run with token %q = %d, want 403", wrong, status)
		}
	}
	select {
	case err := <-started:
		t.Fatalf("the stage started without the token (%v)", err)
	case <-time.After(100 * time.Millisecond):
	}
	if status := postRun(t, lv, token); status != http.StatusNoContent {
		t.Fatalf("POST /run with the page's token = %d, want 204", status)
	}
	if err := <-started; err != nil {
		t.Fatal(err)
	}
}

// The page is rendered once per tick and shared by every open page, not
// once per page: ten pages cost what one does.
func TestLivePageRendersOncePerTick(t *testing.T) {
	lv := startTestLive(t, false)
	const pages = 10
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	firsts := make(chan error, pages)
	for range pages {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, lv.url+"events", nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		go func() {
			lines := bufio.NewReader(res.Body)
			line, err := lines.ReadString('\n')
			if err == nil && !strings.HasPrefix(line, "data: ") {
				err = io.ErrUnexpectedEOF
			}
			firsts <- err
			_, _ = io.Copy(io.Discard, lines) // the page stays open
		}()
	}
	for range pages {
		if err := <-firsts; err != nil {
			t.Fatalf("a page got no first event: %v", err)
		}
	}
	before := lv.renders.Load()
	const window = 2 * time.Second
	time.Sleep(window)
	renders := lv.renders.Load() - before
	if most := int64(window/liveEvery) + 2; renders > most {
		t.Fatalf("%d renders in %s with %d pages open, want at most %d (one per tick)", renders, window, pages, most)
	}
	t.Logf("%d renders in %s with %d pages open", renders, window, pages)
}

// With --live-room the page answers under any name (a room's browsers use
// the presenter's address) and carries no token: "run this stage" needs
// the admin token, which a student's browser does not have.
func TestARoomsPageNeedsTheAdminToken(t *testing.T) {
	const admin = "the-admin-token"
	lv, err := startLive("127.0.0.1:0", "test", 1, true, admin, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lv.close)
	req, _ := http.NewRequest(http.MethodGet, lv.url, nil)
	req.Host = "presenter.example:8555"
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(page), `<meta name="run-token" content="">`) {
		t.Fatalf("the room's page under the presenter's name: %s, want 200 and no token in it:\n%s", res.Status, page)
	}
	started := waitingStage(t, lv)
	for _, wrong := range []string{"", lv.pageToken(), "0123456789abcdef0123456789abcdef"} {
		if status := postRun(t, lv, wrong); status != http.StatusForbidden {
			t.Fatalf("POST /run with token %q = %d, want 403", wrong, status)
		}
	}
	if status := postRun(t, lv, admin); status != http.StatusNoContent {
		t.Fatalf("POST /run with the admin token = %d, want 204", status)
	}
	if err := <-started; err != nil {
		t.Fatal(err)
	}
}

// The live counters are sampled during the stage, crash step included,
// and the results row is the audit after it: the page says so beside the
// counters, and that "as predicted" waits for the end of the run.
func TestLivePageSaysWhyItsFiguresDifferFromTheTable(t *testing.T) {
	lv := startTestLive(t, false)
	if err := lv.StageStarting(context.Background(), loadgen.StageStart{Stage: "naive", Label: "naive", Runs: 1}, &loadgen.LiveStage{}); err != nil {
		t.Fatal(err)
	}
	page, err := lv.render()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"data-live-note", "audit read from Redis once its load ended", "data-results-note", "judged when the whole run ends"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("the live page does not say %q:\n%s", want, page)
		}
	}
}
