// Command frontdoor measures issue 38's two targets side by side, in one
// run on one redis-server, each shop process behind an nginx of its own
// (nginx/nginx.conf, one worker), loaded by wrk 2 threads × 64
// connections, the workloads alternating within each round:
//
//   - after the sell-out, the sold-out answers per second through nginx
//     of a shop with the sold-out mark (answered from memory), against
//     /healthz through the same nginx: the target is ≥ 0.9; and the same
//     answers of a shop without the mark (each a Redis round trip), for
//     comparison;
//   - atomic's sales per second through nginx of a shop behind limit-redis
//     (limits high enough to refuse nothing: the cost of its one EVALSHA),
//     against a shop without a limiter: the target is ≥ 0.8.
//
// Each sale names one of 10 000 buyers (?user=), as a spike's would.
//
//	go run ./bench/frontdoor -rounds 3 -round 3s
//
// It needs wrk, redis-server and nginx on PATH (scripts/install-deps.sh).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lockstep/lockstep/internal/launch"
	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/lockstep/lockstep/nginx"
)

// The shops: each a process with its front door's flags, behind its nginx.
var shops = []struct{ name, flags string }{
	{"plain", ""},
	{"mark", "--soldout-mark-ttl 1h"},
	{"limit-redis", "--limiter limit-redis --limit-buyer 1000000 --limit-buyer-burst 1000000 --limit-global 100000000 --limit-global-burst 1000000"},
}

// A workload is one wrk run's target: a shop, a path, and what it counts.
type workload struct {
	name, shop, method, path string
	// sales: count the 200s (atomic's sales); else every answer.
	sales bool
	done  int64
	took  time.Duration
}

const (
	stock       = 1_000_000_000
	soldOutSKU  = "sku-gone"
	saleSKU     = "sku-1"
	wrkThreads  = 2
	wrkConns    = 64
	buyersCount = 10_000
)

func workloads() []*workload {
	deduct := func(sku string) string { return "/api/stages/atomic/deduct?sku=" + sku + "&qty=1" }
	return []*workload{
		{name: "healthz via nginx (mark's)", shop: "mark", method: "GET", path: "/healthz"},
		{name: "sold out via nginx, mark", shop: "mark", method: "POST", path: deduct(soldOutSKU)},
		{name: "sold out via nginx, no mark", shop: "plain", method: "POST", path: deduct(soldOutSKU)},
		{name: "atomic sales via nginx, no limiter", shop: "plain", method: "POST", path: deduct(saleSKU), sales: true},
		{name: "atomic sales via nginx, limit-redis", shop: "limit-redis", method: "POST", path: deduct(saleSKU), sales: true},
	}
}

func main() {
	rounds := flag.Int("rounds", 3, "rounds of every workload, alternating within a round")
	round := flag.Duration("round", 3*time.Second, "one wrk run (whole seconds)")
	shopBin := flag.String("shop", "", "shop binary (empty: go build ./cmd/shop)")
	flag.Parse()
	if *rounds < 1 || *round < time.Second {
		fmt.Fprintln(os.Stderr, "frontdoor: -rounds at least 1, -round at least 1s")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *rounds, *round, *shopBin); err != nil {
		fmt.Fprintln(os.Stderr, "frontdoor:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, rounds int, round time.Duration, bin string) (err error) {
	dir, err := os.MkdirTemp("", "frontdoor-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if bin == "" {
		bin = filepath.Join(dir, "shop")
		if err := launch.BuildShop(ctx, bin); err != nil {
			return err
		}
	}
	nginxBin, err := launch.NginxBinary()
	if err != nil {
		return err
	}
	redis, err := redistest.StartMain(dir)
	if err != nil {
		return err
	}
	defer redis.Stop()
	var children []stopper
	defer func() {
		for _, c := range children {
			c.stop()
		}
	}()
	front := map[string]string{}
	var plain string // the plain shop's own URL: admin calls go to it directly
	for _, s := range shops {
		addr, err := launch.FreeAddr()
		if err != nil {
			return err
		}
		if s.name == "plain" {
			plain = "http://" + addr
		}
		args := append([]string{"--addr", addr, "--redis-addr", redis.Addr, "--replica", s.name, "--log-level", "warn"}, strings.Fields(s.flags)...)
		shop, err := launch.Start(s.name, bin, args, nil, filepath.Join(dir, s.name+".log"))
		if err != nil {
			return err
		}
		children = append(children, stopper{shop, syscall.SIGTERM})
		if err := launch.WaitHTTPReady(ctx, "http://"+addr+"/readyz", shop.Running); err != nil {
			return fmt.Errorf("shop %s: %w", s.name, err)
		}
		n, err := launch.StartNginx(ctx, nginxBin, filepath.Join(dir, "nginx-"+s.name), nginx.Config{Upstreams: []string{addr}, WorkerProcesses: 1})
		if err != nil {
			return fmt.Errorf("nginx %s: %w", s.name, err)
		}
		children = append(children, stopper{n.Process, syscall.SIGQUIT})
		front[s.name] = n.URL
	}
	// One shop resets the stock every shop shares; the sold-out SKU is sold
	// out once through each, so the mark has learned it.
	for sku, n := range map[string]int{saleSKU: stock, soldOutSKU: 0} {
		if err := post(ctx, plain+"/api/stages/atomic/reset", fmt.Sprintf(`{"sku":%q,"stock":%d}`, sku, n), http.StatusOK); err != nil {
			return err
		}
	}
	for _, url := range front {
		if err := post(ctx, url+"/api/stages/atomic/deduct?sku="+soldOutSKU+"&qty=1", "", http.StatusConflict); err != nil {
			return err
		}
	}
	fmt.Printf("frontdoor %s; load average %s; %d rounds of %v, wrk -t%d -c%d, through nginx (1 worker) per shop\n\n",
		time.Now().UTC().Format("2006-01-02 15:04:05 UTC"), loadAverage(), rounds, round, wrkThreads, wrkConns)
	ws := workloads()
	for _, w := range ws { // warm-up
		if _, _, err := wrk(ctx, front[w.shop], w, time.Second); err != nil {
			return err
		}
	}
	for range rounds {
		for _, w := range ws {
			done, took, err := wrk(ctx, front[w.shop], w, round)
			if err != nil {
				return err
			}
			w.done += done
			w.took += took
		}
	}
	rate := func(i int) float64 { return float64(ws[i].done) / ws[i].took.Seconds() }
	for i, w := range ws {
		fmt.Printf("%-38s %10.0f /s\n", w.name, rate(i))
	}
	fmt.Printf("\nsold out with the mark / healthz:       %.2f (target ≥ 0.9)\n", rate(1)/rate(0))
	fmt.Printf("sold out without the mark / healthz:    %.2f\n", rate(2)/rate(0))
	fmt.Printf("atomic with limit-redis / without:      %.2f (target ≥ 0.8)\n", rate(4)/rate(3))
	fmt.Printf("\nload average at the end %s\n", loadAverage())
	return nil
}

var (
	wrkTotal = regexp.MustCompile(`(\d+) requests in ([\d.]+)(us|ms|s|m),`)
	wrkNon2x = regexp.MustCompile(`Non-2xx or 3xx responses: (\d+)`)
	wrkSock  = regexp.MustCompile(`Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)`)
)

// wrk runs w for d and returns the answers it counts and the time taken.
// Every answer must be the workload's own: sales all 200, the sold-out
// answers all 409, /healthz all 200; a socket error fails the run.
func wrk(ctx context.Context, base string, w *workload, d time.Duration) (int64, time.Duration, error) {
	script := fmt.Sprintf(`n = 0
request = function()
  n = n + 1
  return wrk.format(%q, %q .. "&user=u" .. (n %% %d))
end`, w.method, w.path, buyersCount)
	if w.method == "GET" {
		script = fmt.Sprintf("wrk.method = %q\n", w.method)
	}
	f, err := os.CreateTemp("", "frontdoor-*.lua")
	if err != nil {
		return 0, 0, err
	}
	defer os.Remove(f.Name())
	_, werr := f.WriteString(script + "\n")
	if err := errors.Join(werr, f.Close()); err != nil {
		return 0, 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, d+10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "wrk", "-t", strconv.Itoa(wrkThreads), "-c", strconv.Itoa(wrkConns),
		"-d", fmt.Sprintf("%ds", int(d.Seconds())), "-s", f.Name(), base+w.path).CombinedOutput()
	if err != nil {
		return 0, 0, fmt.Errorf("wrk %s: %w\n%s", w.name, err, out)
	}
	m := wrkTotal.FindStringSubmatch(string(out))
	if m == nil {
		return 0, 0, fmt.Errorf("wrk %s: no request count:\n%s", w.name, out)
	}
	total, _ := strconv.ParseInt(m[1], 10, 64)
	took, err := time.ParseDuration(m[2] + m[3])
	if err != nil {
		return 0, 0, err
	}
	if s := wrkSock.FindStringSubmatch(string(out)); s != nil {
		return 0, 0, fmt.Errorf("wrk %s: socket errors:\n%s", w.name, out)
	}
	var non2xx int64
	if n := wrkNon2x.FindStringSubmatch(string(out)); n != nil {
		non2xx, _ = strconv.ParseInt(n[1], 10, 64)
	}
	soldOut := strings.Contains(w.path, soldOutSKU)
	if (soldOut && non2xx != total) || (!soldOut && non2xx != 0) {
		return 0, 0, fmt.Errorf("wrk %s: %d of %d answers not 2xx:\n%s", w.name, non2xx, total, out)
	}
	return total, took, nil
}

// stopper stops a child with its polite signal (nginx's graceful one is
// SIGQUIT).
type stopper struct {
	*launch.Process
	sig syscall.Signal
}

func (s stopper) stop() { s.Stop(s.sig) }

func post(ctx context.Context, url, body string, want int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		return fmt.Errorf("POST %s: %d, want %d", url, resp.StatusCode, want)
	}
	return nil
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}
