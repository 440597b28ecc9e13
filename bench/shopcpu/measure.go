package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// load is a wrk set-up.
type load struct{ threads, conns int }

var (
	directLoad = load{threads: 1, conns: 32}
	nginxLoad  = load{threads: 2, conns: 64}
)

// The wrk scripts of the workloads. keyedPOST gives every request an
// Idempotency-Key of its own: the run's prefix (wrk's argument), the
// thread and a counter.
const (
	plainGET  = `wrk.method = "GET"`
	plainPOST = `wrk.method = "POST"`
	keyedPOST = `wrk.method = "POST"
local threads = 0
function setup(thread) threads = threads + 1; thread:set("tid", threads) end
local prefix, n = "", 0
function init(args) prefix = args[1] .. "-" .. tostring(tid) .. "-" end
function request() n = n + 1; return wrk.format(nil, nil, {["Idempotency-Key"] = prefix .. n}) end`
)

// workload is one kind of request and what its rounds added up to.
type workload struct {
	name, url, script string

	ok, other int64 // 200 answers and the rest
	elapsed   time.Duration
	shop      time.Duration // CPU of the shop process
	redis     time.Duration // of redis-server
	nginx     time.Duration // of nginx's processes
	rates     []float64     // ok/s of each round
}

func directWorkloads(shop string) []*workload {
	deduct := func(stage string) string { return shop + "/api/stages/" + stage + "/deduct" }
	return []*workload{
		{name: "healthz", url: shop + "/healthz", script: plainGET},
		{name: "atomic", url: deduct("atomic"), script: plainPOST},
		{name: "atomic-keyed", url: deduct("atomic"), script: keyedPOST},
		{name: "watchdog", url: deduct("watchdog"), script: plainPOST},
	}
}

func nginxWorkloads(front string) []*workload {
	return []*workload{
		{name: "healthz", url: front + "/healthz", script: plainGET},
		{name: "atomic", url: front + "/api/stages/atomic/deduct", script: plainPOST},
	}
}

// measure runs a warm-up of every workload, then cfg.rounds rounds in
// which the workloads alternate (in reverse order every other round, so
// each sees as much of the machine's drift as the others).
func measure(ctx context.Context, cfg config, e *env, workloads []*workload, l load) error {
	for _, w := range workloads {
		if _, err := runWrk(ctx, w, l, cfg.warmup); err != nil {
			return err
		}
	}
	for r := range cfg.rounds {
		for i := range workloads {
			w := workloads[i]
			if r%2 == 1 {
				w = workloads[len(workloads)-1-i]
			}
			if err := e.round(ctx, cfg, w, l); err != nil {
				return err
			}
		}
	}
	return nil
}

// round is one measured wrk run of w, with the CPU every process used.
func (e *env) round(ctx context.Context, cfg config, w *workload, l load) error {
	shop0, redis0, nginx0, err := e.cpus()
	if err != nil {
		return err
	}
	res, err := runWrk(ctx, w, l, cfg.round)
	if err != nil {
		return err
	}
	shop1, redis1, nginx1, err := e.cpus()
	if err != nil {
		return err
	}
	w.ok += res.ok
	w.other += res.other
	w.elapsed += res.elapsed
	w.shop += shop1 - shop0
	w.redis += redis1 - redis0
	w.nginx += nginx1 - nginx0
	w.rates = append(w.rates, float64(res.ok)/res.elapsed.Seconds())
	return nil
}

func (e *env) cpus() (shop, redis, front time.Duration, err error) {
	if shop, err = e.shop.cpu(); err != nil {
		return
	}
	if redis, err = e.redisCPU(); err != nil {
		return
	}
	if e.nginx != nil {
		front, err = e.nginx.cpu()
	}
	return
}

// wrkResult is what one wrk run counted.
type wrkResult struct {
	ok, other int64
	elapsed   time.Duration
}

var (
	wrkTotal = regexp.MustCompile(`(\d+) requests in ([\d.]+)(us|ms|s|m),`)
	wrkNon2x = regexp.MustCompile(`Non-2xx or 3xx responses: (\d+)`)
	wrkSock  = regexp.MustCompile(`Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)`)
)

// runWrk runs wrk with w's script for d (bounded by d and 10 s more).
func runWrk(ctx context.Context, w *workload, l load, d time.Duration) (wrkResult, error) {
	script, err := os.CreateTemp("", "shopcpu-*.lua")
	if err != nil {
		return wrkResult{}, err
	}
	defer os.Remove(script.Name())
	if _, err := script.WriteString(w.script + "\n"); err != nil {
		return wrkResult{}, err
	}
	script.Close()
	ctx, cancel := context.WithTimeout(ctx, d+10*time.Second)
	defer cancel()
	prefix := strconv.FormatInt(time.Now().UnixNano(), 36)
	out, err := exec.CommandContext(ctx, "wrk", "-t", strconv.Itoa(l.threads), "-c", strconv.Itoa(l.conns),
		"-d", fmt.Sprintf("%ds", int(d.Seconds())) /* wrk takes whole seconds */, "-s", script.Name(), w.url, "--", prefix).CombinedOutput()
	if err != nil {
		return wrkResult{}, fmt.Errorf("wrk %s: %w\n%s", w.name, err, out)
	}
	return parseWrk(string(out))
}

func parseWrk(out string) (wrkResult, error) {
	m := wrkTotal.FindStringSubmatch(out)
	if m == nil {
		return wrkResult{}, fmt.Errorf("wrk: no request count in its output:\n%s", out)
	}
	total, _ := strconv.ParseInt(m[1], 10, 64)
	elapsed, err := time.ParseDuration(m[2] + m[3])
	if err != nil || elapsed <= 0 {
		return wrkResult{}, fmt.Errorf("wrk: duration %q: %v", m[2]+m[3], err)
	}
	var res wrkResult
	res.elapsed = elapsed
	if n := wrkNon2x.FindStringSubmatch(out); n != nil {
		res.other, _ = strconv.ParseInt(n[1], 10, 64)
	}
	if s := wrkSock.FindStringSubmatch(out); s != nil {
		for _, f := range s[1:] {
			n, _ := strconv.ParseInt(f, 10, 64)
			res.other += n
		}
	}
	res.ok = total - res.other
	if res.ok <= 0 {
		return wrkResult{}, fmt.Errorf("wrk: no successful request:\n%s", out)
	}
	return res, nil
}

// perOK is a CPU time per successful request, in µs.
func perOK(d time.Duration, ok int64) float64 {
	return float64(d.Nanoseconds()) / 1e3 / float64(ok)
}

func (w *workload) rate() float64 { return float64(w.ok) / w.elapsed.Seconds() }

func find(ws []*workload, name string) *workload {
	for _, w := range ws {
		if w.name == name {
			return w
		}
	}
	panic("shopcpu: no workload " + name) // the tables name only workloads this file lists
}

func printDirect(ws []*workload) {
	fmt.Printf("Direct to the shop, wrk %d thread × %d connections (CPU from /proc, per 200 answer)\n\n", directLoad.threads, directLoad.conns)
	fmt.Println("| workload | 200 answers | other answers | per s | shop CPU µs | × /healthz's | redis-server CPU µs |")
	fmt.Println("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
	health := perOK(find(ws, "healthz").shop, find(ws, "healthz").ok)
	for _, w := range ws {
		shop := perOK(w.shop, w.ok)
		fmt.Printf("| %s | %d | %d | %.0f | %.1f | %.2f | %.1f |\n", w.name, w.ok, w.other, w.rate(), shop, shop/health, perOK(w.redis, w.ok))
	}
	atomic, keyed := find(ws, "atomic"), find(ws, "atomic-keyed")
	fmt.Printf("\nThe Idempotency-Key costs %.1f µs of shop CPU per sale (atomic-keyed − atomic); targets: atomic ≤ 25 µs, watchdog ≤ 80 µs\n\n",
		perOK(keyed.shop, keyed.ok)-perOK(atomic.shop, atomic.ok))
}

func printNginx(ws []*workload, workers int) {
	fmt.Printf("Through nginx (%d worker, keepalive to the shop), wrk %d threads × %d connections, alternating rounds\n\n", workers, nginxLoad.threads, nginxLoad.conns)
	fmt.Println("| workload | 200 answers | other answers | per s | per s by round | shop CPU µs | nginx CPU µs | redis-server CPU µs |")
	fmt.Println("| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: |")
	for _, w := range ws {
		rounds := make([]string, len(w.rates))
		for i, r := range w.rates {
			rounds[i] = strconv.FormatFloat(r, 'f', 0, 64)
		}
		fmt.Printf("| %s | %d | %d | %.0f | %s | %.1f | %.1f | %.1f |\n", w.name, w.ok, w.other, w.rate(), strings.Join(rounds, ", "),
			perOK(w.shop, w.ok), perOK(w.nginx, w.ok), perOK(w.redis, w.ok))
	}
	health, atomic := find(ws, "healthz"), find(ws, "atomic")
	lo, hi := 0.0, 0.0
	for i := range atomic.rates {
		// Round i of atomic ran next to round i of /healthz.
		r := atomic.rates[i] / health.rates[i]
		if i == 0 || r < lo {
			lo = r
		}
		if i == 0 || r > hi {
			hi = r
		}
	}
	fmt.Printf("\natomic ÷ /healthz through nginx: %.3f (rounds %.3f–%.3f); target ≥ 0.85\n", atomic.rate()/health.rate(), lo, hi)
}

// profileAll writes a CPU profile of the shop under each workload, with
// the shop binary beside them, and prints each one's top entries.
func profileAll(ctx context.Context, cfg config, e *env, ws []*workload) error {
	if err := os.MkdirAll(cfg.profileDir, 0o755); err != nil {
		return err
	}
	bin := filepath.Join(cfg.profileDir, "shop")
	raw, err := os.ReadFile(cfg.shopBin)
	if err != nil {
		return err
	}
	if err := os.WriteFile(bin, raw, 0o755); err != nil {
		return err
	}
	for _, w := range ws {
		done := make(chan error, 1)
		go func() { _, err := runWrk(ctx, w, directLoad, cfg.profileTime+time.Second); done <- err }()
		time.Sleep(500 * time.Millisecond)
		url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", e.pprofURL, int(cfg.profileTime.Seconds()))
		body, perr := callWithin(ctx, cfg.profileTime+10*time.Second, http.MethodGet, url, "")
		if err := <-done; err != nil {
			return err
		}
		if perr != nil {
			return perr
		}
		path := filepath.Join(cfg.profileDir, w.name+".pprof")
		if err := os.WriteFile(path, body, 0o644); err != nil {
			return err
		}
		top, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-nodecount", "25", bin, path).CombinedOutput()
		if err != nil {
			return fmt.Errorf("go tool pprof %s: %w\n%s", path, err, top)
		}
		fmt.Printf("\nProfile of %s (%s):\n%s", w.name, path, top)
	}
	return nil
}
