package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/launch"
	"github.com/lockstep/lockstep/internal/loadgen/plan"
	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/internal/proc"
	"github.com/lockstep/lockstep/internal/redistest"
)

// testBinaries builds the workshop and the shop once for the package; the
// directory is removed by TestMain.
var testBinaries = sync.OnceValues(func() (binaries, error) {
	dir, err := os.MkdirTemp("", "workshop-test-bin-")
	if err != nil {
		return binaries{}, err
	}
	// One go build for both: their shared packages compile once, in parallel.
	b := binaries{dir: dir, workshop: filepath.Join(dir, "workshop"), shop: filepath.Join(dir, "shop")}
	if msg, err := exec.Command("go", "build", "-o", dir+"/", ".", launch.ShopPackage).CombinedOutput(); err != nil {
		return b, fmt.Errorf("go build: %w\n%s", err, msg)
	}
	return b, nil
})

type binaries struct{ dir, workshop, shop string }

func TestMain(m *testing.M) {
	code := m.Run()
	if b, err := testBinaries(); err == nil {
		os.RemoveAll(b.dir)
	}
	os.Exit(code)
}

func buildBinaries(t *testing.T) binaries {
	t.Helper()
	b, err := testBinaries()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// require fails under CI=true (the test command installs what is missing)
// and skips elsewhere when a system binary is not installed.
func require(t *testing.T, name string, candidates ...string) string {
	t.Helper()
	for _, c := range candidates {
		if path, err := exec.LookPath(c); err == nil {
			return path
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s not installed (CI=true: the test command must install it)", name)
	}
	t.Skipf("%s not installed (run `make test`, which installs it)", name)
	return ""
}

// syncBuffer collects a child's output while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// runWorkshop runs the workshop to its end and returns its report, stdout
// and stderr; args must hold --out.
func runWorkshop(t *testing.T, timeout time.Duration, args ...string) (*report.Report, string, string) {
	t.Helper()
	bins := buildBinaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bins.workshop, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	// Expectations not met is a status of its own; the tests check the
	// report's verdict themselves.
	var exit *exec.ExitError
	if err := cmd.Run(); err != nil && !(errors.As(err, &exit) && exit.ExitCode() == report.ExitExpectationsNotMet) {
		t.Fatalf("workshop: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	t.Logf("workshop ran in %s", time.Since(start).Round(time.Millisecond))
	out := args[slices.Index(args, "--out")+1]
	rep, err := report.ReadReport(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	return rep, stdout.String(), stderr.String()
}

// TestWorkshopShowsTheArticlesTable runs the whole workshop (real
// redis-server, three shop processes, nginx) on a small scenario and checks
// the SPEC's "default workshop run" table on report.json, then opens
// report.html in headless Chromium.
func TestWorkshopShowsTheArticlesTable(t *testing.T) {
	redistest.Binary(t)
	require(t, "nginx", "nginx", "/usr/sbin/nginx")
	bins := buildBinaries(t)
	out := filepath.Join(t.ArtifactDir(), "report")
	rep, stdout, _ := runWorkshop(t, 150*time.Second, "--shop-bin", bins.shop, "--scenario", "testdata/e2e.yaml", "--out", out)
	t.Logf("report in %s; table:\n%s", out, stdout)
	if rep.Redis.Kind != "redis-server" || rep.Proxy.Kind != "nginx" || rep.Params.Replicas != 3 {
		t.Fatalf("set-up: redis %+v proxy %+v replicas %d; want redis-server, nginx, 3", rep.Redis, rep.Proxy, rep.Params.Replicas)
	}
	rows := map[string]*report.StageRun{}
	for i := range rep.Stages {
		r := &rep.Stages[i]
		key := r.Stage
		if r.Via == plan.ViaOneReplica {
			key += "/1"
		}
		rows[key] = r
		if r.Error != "" || r.Skipped != "" {
			t.Fatalf("%s: error %q skipped %q", key, r.Error, r.Skipped)
		}
		want := 3
		if r.Via == plan.ViaOneReplica {
			want = 1
		}
		if r.Replicas != want || r.Sales == 0 {
			t.Errorf("%s: %d replicas answered, %d sales; want %d and some sales", key, r.Replicas, r.Sales, want)
		}
	}
	foreign := func(r *report.StageRun) int {
		if r.ForeignUnlocks == nil {
			t.Fatalf("%s: foreign unlocks not reported", r.Stage)
		}
		return *r.ForeignUnlocks
	}
	within := func(r *report.StageRun, limitMS float64) bool {
		return r.RecoveryMS != nil && *r.RecoveryMS <= limitMS
	}

	if r := rows["naive"]; r.Oversold == 0 {
		t.Errorf("naive: oversold 0, want > 0")
	}
	if r := rows["synchronized/1"]; r.Oversold != 0 || !r.Consistent {
		t.Errorf("synchronized on one replica: oversold %d consistent %t, want 0 and consistent", r.Oversold, r.Consistent)
	}
	if r := rows["synchronized"]; r.Oversold == 0 {
		t.Errorf("synchronized on 3 replicas: oversold 0, want > 0")
	}
	if r := rows["setnx"]; r.Oversold != 0 || r.Stuck == nil || !*r.Stuck || r.Crash == nil || r.Crash.Busy == 0 {
		t.Errorf("setnx: oversold %d stuck %v crash %+v; want 0, stuck, every request after the crash busy", r.Oversold, r.Stuck, r.Crash)
	} else {
		noTTL := len(r.Crash.LockKeys) > 0 && r.Crash.LockKeys[0].TTLMS == -1
		if !noTTL || r.Crash.SaleAfterReset == nil || !*r.Crash.SaleAfterReset {
			t.Errorf("setnx after the crash: lock keys %+v, sale after reset %v; want a lock without TTL and a sale once reset", r.Crash.LockKeys, r.Crash.SaleAfterReset)
		}
	}
	if r := rows["setnx-expire"]; !within(r, 500) || (r.Oversold == 0 && foreign(r) == 0) {
		t.Errorf("setnx-expire: recovery %v ms, oversold %d, foreign unlocks %d; want recovery within the 200ms TTL (+slack) and an oversell or a foreign unlock", r.RecoveryMS, r.Oversold, foreign(r))
	}
	if r := rows["uuid-lua"]; foreign(r) != 0 || r.Oversold == 0 {
		t.Errorf("uuid-lua: foreign unlocks %d oversold %d; want 0 and > 0", foreign(r), r.Oversold)
	}
	watchdog := rows["watchdog"]
	if watchdog.Oversold != 0 || !watchdog.Consistent || !within(watchdog, 500) {
		t.Errorf("watchdog: oversold %d consistent %t recovery %v ms; want 0, consistent, within the 200ms watchdog timeout (+slack)", watchdog.Oversold, watchdog.Consistent, watchdog.RecoveryMS)
	}
	if r := rows["segmented"]; r.Oversold != 0 || !r.Consistent || r.SalesPerSec < 3*watchdog.SalesPerSec {
		t.Errorf("segmented: oversold %d consistent %t, %.0f sales/s vs watchdog %.0f; want 0, consistent, several times faster", r.Oversold, r.Consistent, r.SalesPerSec, watchdog.SalesPerSec)
	}
	atomic := rows["atomic"]
	if atomic.Oversold != 0 || !atomic.Consistent {
		t.Errorf("atomic: oversold %d consistent %t", atomic.Oversold, atomic.Consistent)
	}
	for _, r := range rep.Stages {
		if r.Stage != "atomic" && r.SalesPerSec >= atomic.SalesPerSec {
			t.Errorf("%s sold %.0f/s, atomic only %.0f/s; atomic must be the fastest", r.Stage, r.SalesPerSec, atomic.SalesPerSec)
		}
	}
	if !rep.ExpectationsMet {
		t.Errorf("the report's own checks failed:\n%s", stdout)
	}
	for _, want := range []string{"sales/s", "oversold", "naive", "segmented", "report: "} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}

	t.Run("report.html in Chromium", func(t *testing.T) {
		checkReportInChromium(t, filepath.Join(out, "report.html"), len(rep.Stages))
	})
}

// checkReportInChromium opens the report from disk in headless Chromium,
// keeps a screenshot as an artifact and checks the charts rendered, in the
// DOM and in pixels, with nothing on the console.
func checkReportInChromium(t *testing.T, htmlPath string, stageRuns int) {
	chromium := require(t, "chromium", "chromium", "chromium-browser")
	artifacts := t.ArtifactDir()

	// The console check must be able to fail: a page that logs is caught.
	bad := filepath.Join(t.TempDir(), "bad.html")
	if err := os.WriteFile(bad, []byte(`<!DOCTYPE html><p>x</p><script>console.error("boom")</script>`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, console := runChromium(t, chromium, bad, "--dump-dom"); len(console) == 0 {
		t.Fatal("console check is blind: a page calling console.error logged nothing")
	}

	shot := filepath.Join(artifacts, "report.png")
	_, console := runChromium(t, chromium, htmlPath, "--window-size=1280,3200", "--screenshot="+shot)
	dom, domConsole := runChromium(t, chromium, htmlPath, "--dump-dom")
	t.Logf("screenshot: %s", shot)
	if console = append(console, domConsole...); len(console) > 0 {
		t.Errorf("console messages while showing the report:\n%s", strings.Join(console, "\n"))
	}
	for chart, want := range map[string]int{"sales-per-sec": 1, "oversold": 1, "latency": 1, "timeline": stageRuns} {
		if got := strings.Count(dom, `data-chart="`+chart+`"`); got != want {
			t.Errorf("DOM has %d %s charts, want %d", got, chart, want)
		}
	}
	if n := strings.Count(dom, "<rect"); n < 4*stageRuns {
		t.Errorf("DOM has %d bars, want at least %d", n, 4*stageRuns)
	}
	if !strings.Contains(dom, `class="event crash"`) {
		t.Error("no crash marked on any sales-over-time chart")
	}

	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	// The charts' colours (report.html.tmpl): sales bars, oversold bars,
	// bars of stages that did not oversell. How many pixels each takes
	// depends on the run's figures (bars scale to the largest), so the bar
	// is "drawn at all", not a size.
	for name, rgb := range map[string][3]uint32{"blue sales bars": {0x2f, 0x6f, 0xc6}, "red oversold bars": {0xc6, 0x2f, 0x2f}, "green bars": {0x1f, 0x8a, 0x4c}} {
		if n := countColour(img, rgb); n < 50 {
			t.Errorf("screenshot has %d pixels of the %s, want the chart drawn", n, name)
		}
	}
}

// runChromium runs one headless Chromium action on a file and returns its
// stdout and the console messages it logged.
func runChromium(t *testing.T, chromium, path string, action ...string) (string, []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := append(chromiumFlags(t), action...)
	cmd := exec.CommandContext(ctx, chromium, append(args, "file://"+path)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", action, err, stderr.String())
	}
	var console []string
	for _, line := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(line, ":CONSOLE") {
			console = append(console, line)
		}
	}
	return stdout.String(), console
}

func countColour(img image.Image, rgb [3]uint32) int {
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if near(r>>8, rgb[0]) && near(g>>8, rgb[1]) && near(bl>>8, rgb[2]) {
				n++
			}
		}
	}
	return n
}

func near(a, b uint32) bool { return a+4 >= b && b+4 >= a }

// TestInterruptStopsEveryProcess sends SIGINT to a workshop in the middle of
// a stage, and to one left running with --keep, and checks that no
// redis-server, shop or nginx process it started is left, nor its work
// directory. It lets the workshop build the shop itself, so that path is
// exercised too.
func TestInterruptStopsEveryProcess(t *testing.T) {
	redistest.Binary(t)
	require(t, "nginx", "nginx", "/usr/sbin/nginx")
	for _, tc := range []struct {
		name string
		args []string
		// waitFor is printed once the moment to interrupt has come.
		waitFor string
		end     ending
	}{
		{"mid-stage", []string{"--scenario", "testdata/interrupt.yaml"}, "[1/1] atomic", bySIGINT},
		{"kept running", []string{"--scenario", "testdata/keep.yaml", "--keep"}, "press Enter to stop", bySIGINT},
		{"kept running, ended with Enter", []string{"--scenario", "testdata/keep.yaml", "--keep"}, "  live page: http", byEnter},
		{"kept running, killed outright", []string{"--scenario", "testdata/keep.yaml", "--keep"}, "press Enter to stop", bySIGKILL},
	} {
		t.Run(tc.name, func(t *testing.T) { interruptWorkshop(t, tc.args, tc.waitFor, tc.end) })
	}
}

// runHint runs each command of a --keep run's hint as printed, through
// the shell, and checks each one's answer: the restock makes the deduct
// that follows sell.
func runHint(t *testing.T, stderr string) {
	t.Helper()
	var commands []string
	for _, line := range strings.Split(stderr, "\n") {
		if c, ok := strings.CutPrefix(line, "  curl "); ok {
			commands = append(commands, "curl -f "+c)
		}
	}
	if len(commands) != 4 {
		t.Fatalf("the hint has %d curl commands, want 4 (stages, restock, deduct, audit):\n%s", len(commands), stderr)
	}
	wants := []string{`"naive"`, `"stock":100`, `"remaining":99`, `"sold":1`}
	for i, c := range commands {
		out, err := exec.Command("sh", "-c", c).CombinedOutput()
		if err != nil || !strings.Contains(string(out), wants[i]) {
			t.Errorf("the hint's %s: %v, want an answer with %s:\n%s", c, err, wants[i], out)
		}
	}
}

// ending is how a test ends a workshop.
type ending int

const (
	bySIGINT ending = iota
	// byEnter: Enter, after running the commands the --keep hint prints.
	byEnter
	// bySIGKILL: the workshop cannot stop anything; its children's
	// parent-death signal (SIGTERM) must.
	bySIGKILL
)

func interruptWorkshop(t *testing.T, args []string, waitFor string, end ending) {
	bins := buildBinaries(t)
	out := t.TempDir()
	var stderr syncBuffer
	cmd := exec.Command(bins.workshop, append(args, "--out", out)...)
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { // on an early failure, still let it clean up
		select {
		case <-exited:
		default:
			_ = cmd.Process.Signal(syscall.SIGINT)
			select {
			case <-exited:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
			}
		}
	})

	// The state file is written before the scenario starts.
	deadline := time.Now().Add(90 * time.Second)
	for !strings.Contains(stderr.String(), waitFor) {
		select {
		case <-exited:
			t.Fatalf("workshop exited early: %v\n%s", waitErr, stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("workshop did not print %q in time:\n%s", waitFor, stderr.String())
		}
	}
	var st state
	data, err := os.ReadFile(filepath.Join(out, "workshop.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	pids := map[int]string{}
	for _, pid := range st.Redis.PIDs {
		pids[pid] = "redis-server"
	}
	for _, r := range st.Replicas {
		pids[r.PID] = r.Name
	}
	for _, pid := range st.Proxy.PIDs {
		pids[pid] = "nginx"
	}
	lockServers := 0
	for kind, list := range st.LockServers {
		for _, pid := range list {
			pids[pid] = kind
			lockServers++
		}
	}
	if os.Getenv("CI") == "true" && (len(st.LockServers["etcd"]) != 3 || len(st.LockServers["mariadb"]) != 1 || len(st.LockServers["zookeeper"]) != 3) {
		t.Fatalf("lock servers %v: want 3 etcd members, a MariaDB server and 3 ZooKeeper members (CI installs them)", st.LockServers)
	}
	if len(st.Redis.PIDs) != 3 || len(st.Replicas) != 3 || st.Proxy.Kind != "nginx" || len(st.Proxy.PIDs) < 2 {
		t.Fatalf("state %+v: want 3 redis-servers, 3 replicas, an nginx master and worker", st)
	}
	for pid, name := range pids {
		if !proc.Alive(pid) {
			t.Fatalf("%s (pid %d) is not running before the interrupt", name, pid)
		}
	}
	// The shops (built there), nginx's master (-p) and the lock servers
	// (their data there); redis-server rewrites its command line, so it is
	// checked by pid only.
	if left, want := processesUnder(st.WorkDir), len(st.Replicas)+1+lockServers; len(left) != want {
		t.Fatalf("%d processes found running from the work dir before the interrupt, want %d: %v", len(left), want, left)
	}

	status, signal := 130, syscall.SIGINT
	switch end {
	case byEnter:
		runHint(t, stderr.String())
		if _, err := io.WriteString(stdin, "\n"); err != nil {
			t.Fatal(err)
		}
		status, signal = 0, 0
	case bySIGKILL:
		status, signal = -1, syscall.SIGKILL               // ExitCode: -1, ended by a signal
		t.Cleanup(func() { _ = os.RemoveAll(st.WorkDir) }) // nobody else can
	}
	if signal != 0 {
		if err := cmd.Process.Signal(signal); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-exited:
		got := 0
		var exitErr *exec.ExitError
		if errors.As(waitErr, &exitErr) {
			got = exitErr.ExitCode()
		} else if waitErr != nil {
			got = -1
		}
		if got != status {
			t.Errorf("workshop exit: %v, want status %d", waitErr, status)
		}
		if end == byEnter && strings.Contains(stderr.String(), "interrupted") {
			t.Errorf("a kept run ended with Enter says it was interrupted:\n%s", stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("workshop still running 30s after it was asked to stop:\n%s", stderr.String())
	}
	// A workshop killed outright stopped nothing: its children stop on their
	// parent-death signal, each in its own time.
	gone := time.Now().Add(30 * time.Second)
	for pid, name := range pids {
		for proc.Alive(pid) && end == bySIGKILL && time.Now().Before(gone) {
			time.Sleep(50 * time.Millisecond)
		}
		if proc.Alive(pid) {
			t.Errorf("%s (pid %d) still running after the workshop exited", name, pid)
		}
	}
	if left := processesUnder(st.WorkDir); len(left) > 0 {
		t.Errorf("processes still running from %s: %v", st.WorkDir, left)
	}
	if end == bySIGKILL {
		return // nothing removes the work dir of a killed workshop; the test does
	}
	if _, err := os.Stat(st.WorkDir); !os.IsNotExist(err) {
		t.Errorf("work dir %s left behind (stat: %v)", st.WorkDir, err)
	}
}

// processesUnder lists live processes whose command line mentions dir: the
// shop binary built there, nginx -p dir/nginx.
func processesUnder(dir string) []string {
	entries, _ := os.ReadDir("/proc")
	var found []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !proc.Alive(pid) {
			continue
		}
		if line, err := proc.Cmdline(pid); err == nil && strings.Contains(line, dir) {
			found = append(found, fmt.Sprintf("%d %s", pid, line))
		}
	}
	return found
}

// TestFallbacksEmbeddedRedisAndGoProxy runs the workshop on its fallbacks:
// the embedded Redis (announced loudly) and the Go round-robin proxy.
func TestFallbacksEmbeddedRedisAndGoProxy(t *testing.T) {
	bins := buildBinaries(t)
	out := t.TempDir()
	rep, _, stderr := runWorkshop(t, 60*time.Second, "--shop-bin", bins.shop, "--redis", "embedded", "--proxy", "go",
		"--scenario", "testdata/embedded.yaml", "--out", out)
	// A run without --keep leaves no workshop.json: its PIDs are dead and
	// its admin token void.
	if _, err := os.Stat(filepath.Join(out, "workshop.json")); !os.IsNotExist(err) {
		t.Errorf("workshop.json left after a run without --keep (stat: %v)", err)
	}
	if !strings.Contains(stderr, "TIMINGS ARE NOT REPRESENTATIVE") {
		t.Errorf("no loud warning about the embedded Redis:\n%s", stderr)
	}
	if rep.Redis.Kind != "embedded miniredis" || !strings.Contains(rep.Redis.Note, "not representative") || rep.Proxy.Kind != "go round-robin proxy" {
		t.Errorf("report names redis %+v and proxy %+v", rep.Redis, rep.Proxy)
	}
	naive, watchdog := rep.Stages[0], rep.Stages[1]
	if naive.Oversold == 0 || naive.Replicas != 3 {
		t.Errorf("naive through the Go proxy: oversold %d over %d replicas; want > 0 over 3", naive.Oversold, naive.Replicas)
	}
	if watchdog.Oversold != 0 || watchdog.RecoveryMS == nil || *watchdog.RecoveryMS > 500 {
		t.Errorf("watchdog on the embedded Redis: oversold %d recovery %v ms; want 0 and the lock expiring on time", watchdog.Oversold, watchdog.RecoveryMS)
	}
}

// A run whose expectations are not met exits with status 3, so scripts and
// CI can tell it from a run that broke (1).
func TestUnmetExpectationsExitWithStatus3(t *testing.T) {
	bins := buildBinaries(t)
	cmd := exec.Command(bins.workshop, "--shop-bin", bins.shop, "--redis", "embedded", "--proxy", "go",
		"--lock-servers", "off", "--scenario", "testdata/unmet.yaml", "--out", t.TempDir())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != report.ExitExpectationsNotMet || !strings.Contains(stderr.String(), "expectations not met: atomic") {
		t.Fatalf("workshop with an unmet expectation: %v, want exit status 3 naming the row\n%s", err, stderr.String())
	}
}

// TestWorkshopOnARedisCluster runs stages with --redis cluster (six
// redis-server processes, three masters): results as on one Redis, and the
// per-shard figures show atomic's one key piling on one master while
// segmented's segments spread over all three.
func TestWorkshopOnARedisCluster(t *testing.T) {
	redistest.Binary(t)
	require(t, "nginx", "nginx", "/usr/sbin/nginx")
	require(t, "redis-cli", "redis-cli")
	bins := buildBinaries(t)
	out := filepath.Join(t.ArtifactDir(), "cluster")
	rep, stdout, _ := runWorkshop(t, 150*time.Second, "--shop-bin", bins.shop, "--redis", "cluster", "--lock-servers", "off",
		"--scenario", "testdata/e2e.yaml", "--only", "naive,segmented,atomic", "--out", out)
	t.Logf("report in %s:\n%s", out, stdout)
	if !strings.Contains(rep.Redis.Note, "Redis Cluster") || !strings.Contains(stdout, "per shard") {
		t.Fatalf("no cluster in the report: redis %+v", rep.Redis)
	}
	rows := map[string]*report.StageRun{}
	for i := range rep.Stages {
		rows[rep.Stages[i].Stage] = &rep.Stages[i]
	}
	if r := rows["naive"]; r == nil || r.Oversold == 0 {
		t.Errorf("naive on a cluster: %+v, want an oversell", r)
	}
	for _, stage := range []string{"segmented", "atomic"} {
		r := rows[stage]
		if r == nil || r.Oversold != 0 || !r.Consistent || r.Sales == 0 {
			t.Fatalf("%s on a cluster: %+v", stage, r)
		}
	}
	if busiest, masters := rows["atomic"].BusiestShare(); masters != 3 || busiest < 0.9 {
		t.Errorf("atomic: busiest master %.0f%% of the commands over %d masters; want one key's master to carry them", 100*busiest, masters)
	}
	if busiest, masters := rows["segmented"].BusiestShare(); masters != 3 || busiest > 0.5 {
		t.Errorf("segmented: busiest master %.0f%% of the commands over %d masters; want the segments spread", 100*busiest, masters)
	}
	var placed []int
	for _, s := range rows["segmented"].Shards {
		placed = append(placed, len(s.Segments))
	}
	if len(placed) != 3 || slices.Max(placed)-slices.Min(placed) > 1 || placed[0]+placed[1]+placed[2] != 16 {
		t.Errorf("segmented's 16 segments per master: %v, want 6/5/5 in some order", placed)
	}
}

// runAsyncScenario runs scenario (a built-in name or a file) on the whole
// stack an async stage needs: redis-server, three shops behind nginx,
// MariaDB and the two order workers; out keeps the report.
func runAsyncScenario(t *testing.T, scenario, out string) (*report.Report, string) {
	t.Helper()
	require(t, "redis-server", "redis-server")
	require(t, "nginx", "nginx", "/usr/sbin/nginx")
	require(t, "mariadbd", "mariadbd")
	bins := buildBinaries(t)
	rep, stdout, _ := runWorkshop(t, 4*time.Minute, "--shop-bin", bins.shop, "--scenario", scenario, "--out", out)
	return rep, stdout
}
