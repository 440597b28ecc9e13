package main

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/redistest"
)

// TestLivePageFollowsTheRun runs the workshop with --step on a short
// scenario and watches its live page in headless Chromium: each stage
// waits for "run this stage" (or Enter), the sales chart moves while a stage runs,
// naive's oversold counter turns red before its stage ends, the watchdog's
// renewals are counted, the results fill in, the watchdog's traced sale
// lists its lock script, its release and a renewal, and a page opened
// mid-run or after the run catches up. Nothing is logged on the console.
// The screenshots are kept as artifacts.
func TestLivePageFollowsTheRun(t *testing.T) {
	redistest.Binary(t)
	require(t, "nginx", "nginx", "/usr/sbin/nginx")
	chromium := require(t, "chromium", "chromium", "chromium-browser")
	bins := buildBinaries(t)
	artifacts := t.ArtifactDir()

	var stdout, stderr syncBuffer
	cmd := exec.Command(bins.workshop, "--shop-bin", bins.shop, "--scenario", "testdata/live.yaml",
		"--out", filepath.Join(artifacts, "live"), "--keep", "--step")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	stdin, err := cmd.StdinPipe() // the workshop's terminal: Enter runs a stage
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		stdin.Close()
		if t.Failed() {
			t.Logf("workshop stderr:\n%s", stderr.String())
		}
	})

	firstLine := regexp.MustCompile(`^workshop: live page: (http://127\.0\.0\.1:\d+/)\n`)
	var url string
	for deadline := time.Now().Add(30 * time.Second); url == ""; time.Sleep(20 * time.Millisecond) {
		if m := firstLine.FindStringSubmatch(stderr.String()); m != nil {
			url = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("the live page's URL is not the first thing printed:\n%s", stderr.String())
		}
	}

	b := startBrowser(t, chromium)
	page := b.open(url, 1280, 1500)
	// run runs the stage once it waits: with the page's button, or with
	// Enter on the workshop's terminal.
	run := func(stage string, enter bool) {
		t.Helper()
		page.waitFor(stage+" waiting to run", `!!document.querySelector('section.step[data-step="`+stage+`"] button[data-run]')`, 120*time.Second)
		if enter {
			if _, err := stdin.Write([]byte("\n")); err != nil {
				t.Fatal(err)
			}
		} else if err := page.eval(`document.querySelector('button[data-run]').click()`, nil); err != nil {
			t.Fatal(err)
		}
		page.waitFor(stage+" running", `!!document.querySelector('section.now[data-stage="`+stage+`"]')`, 60*time.Second)
	}

	t.Run("step mode waits for the button", func(t *testing.T) {
		page.waitFor("naive waiting to run", `!!document.querySelector('section.step[data-step="naive"] button[data-run]')`, 120*time.Second)
		time.Sleep(2 * time.Second)
		var status string
		if err := page.eval(`document.querySelector('[data-status]').dataset.status`, &status); err != nil {
			t.Fatal(err)
		}
		if status != "waiting" || strings.Contains(stderr.String(), "[1/3] naive via") {
			t.Fatalf("2s after naive was announced: status %q; want it still waiting, no load sent:\n%s", status, stderr.String())
		}
		page.screenshot(filepath.Join(artifacts, "live-step.png"))
	})

	t.Run("naive: the chart moves, oversold turns red before the stage ends", func(t *testing.T) {
		run("naive", false)
		page.waitFor("naive's first sales", `Number(document.querySelector('[data-counter="sales"] b').textContent) > 0`, 30*time.Second)
		chart := `section.now svg[data-chart="timeline"]`
		var before, after string
		_ = page.eval(`document.querySelector('`+chart+` path.sales-area').getAttribute('d')`, &before)
		chartBox := page.rect(chart)
		shotBefore := page.screenshot(filepath.Join(artifacts, "live-naive-early.png"))
		time.Sleep(time.Second)
		_ = page.eval(`document.querySelector('`+chart+` path.sales-area').getAttribute('d')`, &after)
		shotAfter := page.screenshot(filepath.Join(artifacts, "live-naive-later.png"))
		if before == after || before == "" {
			t.Errorf("the sales chart's path did not change in a second of load: %q", after)
		}
		if n := differingPixels(shotBefore, shotAfter, chartBox); n < 200 {
			t.Errorf("%d pixels of the sales chart changed in a second of load, want it redrawn", n)
		}

		// The counter exists only while naive runs: the DOM condition holds
		// before the stage ends, and the screenshot, taken next, shows it.
		counter := `section.now[data-stage="naive"] [data-counter="oversold"]`
		page.waitFor("naive's oversold counter red and above 0",
			`(() => { const c = document.querySelector('`+counter+`'); return !!c && c.classList.contains('bad') && Number(c.querySelector('b').textContent) > 0; })()`,
			30*time.Second)
		box := page.rect(counter + " b")
		shot := page.screenshot(filepath.Join(artifacts, "live-naive-oversold.png"))
		var stillRunning bool
		if err := page.eval(`!!document.querySelector('`+counter+`')`, &stillRunning); err != nil || !stillRunning {
			t.Logf("naive ended while the screenshot was taken (%v)", err)
		}
		red := [3]uint32{0xc6, 0x2f, 0x2f}
		if n := countColour(cropped(shot, box), red); n < 30 {
			t.Errorf("the oversold counter has %d red pixels, want it drawn red", n)
		}
	})

	t.Run("a page opened mid-run catches up", func(t *testing.T) {
		run("watchdog", false)
		late := b.open(url, 1280, 1500)
		late.waitFor("the running stage and the finished row",
			`!!document.querySelector('section.now[data-stage="watchdog"]') && !!document.querySelector('tr[data-row="naive"]')`, 30*time.Second)
		// Half its sales outlive a third of the lease: the replicas renew.
		late.waitFor("the watchdog's renewals counted",
			`Number((document.querySelector('section.now[data-stage="watchdog"] [data-counter="renewals"] b') || {}).textContent) > 0`, 30*time.Second)
	})

	t.Run("the run ends; its traces list the lock scripts", func(t *testing.T) {
		run("segmented", true)
		page.waitFor("the run's end", `document.querySelector('[data-status]').dataset.status === "finished"`, 120*time.Second)
		var rows int
		if err := page.eval(`document.querySelectorAll('tr[data-row]').length`, &rows); err != nil || rows != 3 {
			t.Errorf("%d result rows (%v), want 3", rows, err)
		}
		var watchdog, segmented string
		_ = page.eval(`(document.querySelector('section[data-done="watchdog"] .trace') || {}).textContent || ""`, &watchdog)
		_ = page.eval(`(document.querySelector('section[data-done="segmented"] .trace') || {}).textContent || ""`, &segmented)
		if !strings.Contains(watchdog, "lock.lua") || !(strings.Contains(watchdog, "release.lua") || strings.Contains(watchdog, "unlock.lua")) {
			t.Errorf("the watchdog's trace lacks its lock script and release:\n%s", watchdog)
		}
		if !strings.Contains(watchdog, "renew.lua") {
			t.Errorf("the watchdog's trace shows no renewal:\n%s", watchdog)
		}
		// Walking past a segment takes another replica holding the one
		// the sale tried first: likely, not certain.
		t.Logf("segmented trace walked past a segment: %t", strings.Contains(segmented, "walked past"))

		end := b.open(url, 1280, 2600)
		// Its first event has replaced the content it loaded with: the
		// details opened next stay open.
		end.waitFor("the finished run, streamed", `document.body.dataset.updates >= 1 && document.querySelector('[data-status]').dataset.status === "finished" && document.querySelectorAll('tr[data-row]').length === 3`, 30*time.Second)
		if err := end.eval(`document.querySelector('section[data-done="watchdog"] details').open = true`, nil); err != nil {
			t.Fatal(err)
		}
		end.screenshot(filepath.Join(artifacts, "live-end.png"))
		if report := filepath.Join(artifacts, "live", "report.html"); !strings.Contains(stdout.String(), report) {
			t.Errorf("no report at %s:\n%s", report, stdout.String())
		}
	})

	if console := b.consoleMessages(); len(console) > 0 {
		t.Errorf("console messages on the live page:\n%s", strings.Join(console, "\n"))
	}
}
