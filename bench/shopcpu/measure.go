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

// workload is one kind of request to one shop, and what its rounds added
// up to.
type workload struct {
	name, kind, url, script string
	shop                    *shop
	front                   bool // through the shop's nginx

	ok, other int64 // 200 answers and the rest
	elapsed   time.Duration
	shopCPU   time.Duration // CPU of the shop process
	redis     time.Duration // of redis-server
	nginx     time.Duration // of nginx's processes
	rates     []float64     // ok/s of each round
}

// directWorkloads are the workloads sent to the shops themselves, each
// kind to every shop in turn.
func directWorkloads(shops []*shop) []*workload {
	var ws []*workload
	for _, k := range []struct{ kind, path, script string }{
		{"healthz", "/healthz", plainGET},
		{"atomic", "/api/stages/atomic/deduct", plainPOST},
		{"atomic-keyed", "/api/stages/atomic/deduct", keyedPOST},
		{"watchdog", "/api/stages/watchdog/deduct", plainPOST},
	} {
		for _, s := range shops {
			ws = append(ws, &workload{name: s.name(k.kind), kind: k.kind, url: s.url + k.path, script: k.script, shop: s})
		}
	}
	return ws
}

// nginxWorkloads are /healthz and atomic through each shop's nginx.
func nginxWorkloads(shops []*shop) []*workload {
	var ws []*workload
	for _, k := range []struct{ kind, path, script string }{
		{"healthz", "/healthz", plainGET},
		{"atomic", "/api/stages/atomic/deduct", plainPOST},
	} {
		for _, s := range shops {
			ws = append(ws, &workload{name: s.name(k.kind), kind: k.kind, url: s.frontURL + k.path, script: k.script, shop: s, front: true})
		}
	}
	return ws
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
	shop0, redis0, nginx0, err := e.cpus(w)
	if err != nil {
		return err
	}
	res, err := runWrk(ctx, w, l, cfg.round)
	if err != nil {
		return err
	}
	shop1, redis1, nginx1, err := e.cpus(w)
	if err != nil {
		return err
	}
	w.ok += res.ok
	w.other += res.other
	w.elapsed += res.elapsed
	w.shopCPU += shop1 - shop0
	w.redis += redis1 - redis0
	w.nginx += nginx1 - nginx0
	w.rates = append(w.rates, float64(res.ok)/res.elapsed.Seconds())
	return nil
}

// cpus reads the CPU time of w's shop, redis-server and, through nginx,
// w's nginx.
func (e *env) cpus(w *workload) (shop, redis, front time.Duration, err error) {
	if shop, err = cpuOf(w.shop.proc); err != nil {
		return
	}
	if redis, err = e.redisCPU(); err != nil {
		return
	}
	if w.front {
		front, err = cpuOf(w.shop.nginx)
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

// find is the workload of kind on s.
func find(ws []*workload, kind string, s *shop) *workload {
	for _, w := range ws {
		if w.kind == kind && w.shop == s {
			return w
		}
	}
	panic("shopcpu: no workload " + s.name(kind)) // the tables name only workloads this file lists
}

func printDirect(ws []*workload, shops []*shop) {
	fmt.Printf("Direct to the shop, wrk %d thread × %d connections (CPU from /proc, per 200 answer)\n\n", directLoad.threads, directLoad.conns)
	fmt.Println("| workload | 200 answers | other answers | per s | shop CPU µs | × /healthz's | redis-server CPU µs |")
	fmt.Println("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, w := range ws {
		health := find(ws, "healthz", w.shop)
		shop := perOK(w.shopCPU, w.ok)
		fmt.Printf("| %s | %d | %d | %.0f | %.1f | %.2f | %.1f |\n", w.name, w.ok, w.other, w.rate(), shop, shop/perOK(health.shopCPU, health.ok), perOK(w.redis, w.ok))
	}
	fmt.Println()
	for _, s := range shops {
		atomic, keyed := find(ws, "atomic", s), find(ws, "atomic-keyed", s)
		fmt.Printf("%s: the Idempotency-Key costs %.1f µs of shop CPU per sale (atomic-keyed − atomic)\n",
			s.name("shop"), perOK(keyed.shopCPU, keyed.ok)-perOK(atomic.shopCPU, atomic.ok))
	}
	fmt.Println("Targets (quiet machine, /healthz at 18 µs): atomic ≤ 25 µs (×1.39 of /healthz), watchdog ≤ 80 µs (×4.44)")
	if len(shops) == 2 {
		fmt.Println("\nThe shop against the baseline, shop CPU per 200 answer, same rounds:")
		for _, w := range ws {
			if w.shop == shops[0] {
				b := find(ws, w.kind, shops[1])
				fmt.Printf("  %-13s %6.1f µs against %6.1f µs: ×%.2f\n", w.kind, perOK(w.shopCPU, w.ok), perOK(b.shopCPU, b.ok), perOK(w.shopCPU, w.ok)/perOK(b.shopCPU, b.ok))
			}
		}
	}
	fmt.Println()
}

func printNginx(ws []*workload, shops []*shop, workers int) {
	fmt.Printf("Through nginx (%d worker, keepalive to the shop), wrk %d threads × %d connections, alternating rounds\n\n", workers, nginxLoad.threads, nginxLoad.conns)
	fmt.Println("| workload | 200 answers | other answers | per s | per s by round | shop CPU µs | nginx CPU µs | redis-server CPU µs |")
	fmt.Println("| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: |")
	for _, w := range ws {
		rounds := make([]string, len(w.rates))
		for i, r := range w.rates {
			rounds[i] = strconv.FormatFloat(r, 'f', 0, 64)
		}
		fmt.Printf("| %s | %d | %d | %.0f | %s | %.1f | %.1f | %.1f |\n", w.name, w.ok, w.other, w.rate(), strings.Join(rounds, ", "),
			perOK(w.shopCPU, w.ok), perOK(w.nginx, w.ok), perOK(w.redis, w.ok))
	}
	fmt.Println()
	for _, s := range shops {
		health, atomic := find(ws, "healthz", s), find(ws, "atomic", s)
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
		fmt.Printf("%s: atomic ÷ /healthz through nginx %.3f (rounds %.3f–%.3f); target ≥ 0.85\n", s.name("shop"), atomic.rate()/health.rate(), lo, hi)
	}
}

// profileAll writes a CPU profile of the shop under each workload, with
// the shop binary beside them, prints each one's top entries, then the
// breakdown of every workload's CPU per answer by part.
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
	shares, perSale := make(map[string][]float64), make(map[string]float64)
	for _, w := range ws {
		path := filepath.Join(cfg.profileDir, w.name+".pprof")
		if perSale[w.name], err = e.profile(ctx, cfg, w, path); err != nil {
			return err
		}
		top, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-nodecount", "25", bin, path).CombinedOutput()
		if err != nil {
			return fmt.Errorf("go tool pprof %s: %w\n%s", path, err, top)
		}
		fmt.Printf("\nProfile of %s (%s):\n%s", w.name, path, top)
		if shares[w.name], err = breakdown(ctx, bin, path); err != nil {
			return err
		}
	}
	printBreakdown(ws, shares, perSale)
	return nil
}

// profile loads the shop with w while its profiler records, writes the
// profile to path, and returns the shop's CPU per 200 answer meanwhile.
func (e *env) profile(ctx context.Context, cfg config, w *workload, path string) (float64, error) {
	seconds := int(cfg.profileTime.Seconds())
	type result struct {
		res wrkResult
		err error
	}
	done := make(chan result, 1)
	shop0, err := cpuOf(w.shop.proc)
	if err != nil {
		return 0, err
	}
	go func() {
		res, err := runWrk(ctx, w, directLoad, time.Duration(seconds)*time.Second)
		done <- result{res, err}
	}()
	url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", w.shop.pprofURL, seconds)
	body, perr := callWithin(ctx, time.Duration(seconds+10)*time.Second, http.MethodGet, url, "")
	r := <-done
	shop1, err := cpuOf(w.shop.proc)
	switch {
	case r.err != nil:
		return 0, r.err
	case perr != nil:
		return 0, perr
	case err != nil:
		return 0, err
	}
	if err := os.WriteFile(path, body, 0o644); err != nil {
		return 0, err
	}
	return perOK(shop1-shop0, r.res.ok), nil
}
