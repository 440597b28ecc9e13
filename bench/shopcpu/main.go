// Command shopcpu measures what one shop replica spends per sale, as issue
// 37 states it: one shop process (cmd/shop, built from this tree) on its
// own redis-server, loaded by wrk with 1 thread × 32 connections, its CPU
// per successful request read from /proc before and after each round, for
// /healthz, atomic, atomic with an Idempotency-Key per request, and
// watchdog; then, through nginx (nginx/nginx.conf, one upstream: that shop),
// atomic's sales/s against /healthz's with wrk 2 threads × 64 connections,
// in alternating rounds. Every figure is compared inside the run: the
// machine is shared, and its load moves the absolute figures.
//
// It starts and stops everything itself and is bounded in time (its rounds
// and, with -profile, one profile per workload):
//
//	go run ./bench/shopcpu -rounds 3 -round 3s
//	go run ./bench/shopcpu -rounds 1 -profile /tmp/shopcpu   # and the profiles' breakdown
//	go run ./bench/shopcpu -shop /tmp/shop-after -baseline /tmp/shop-before
//
// It needs wrk, redis-server and nginx on PATH (scripts/install-deps.sh).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/lockstep/lockstep/internal/launch"
)

type config struct {
	rounds       int
	round        time.Duration
	warmup       time.Duration
	shopBin      string
	baseline     string
	nginxWorkers int
	noNginx      bool
	profileDir   string
	profileTime  time.Duration
}

func main() {
	var cfg config
	flag.IntVar(&cfg.rounds, "rounds", 3, "rounds of each workload (the workloads alternate within a round)")
	flag.DurationVar(&cfg.round, "round", 3*time.Second, "length of one workload's wrk run")
	flag.DurationVar(&cfg.warmup, "warmup", time.Second, "wrk run of each workload before the measured rounds")
	flag.StringVar(&cfg.shopBin, "shop", "", "shop binary to measure (empty: go build ./cmd/shop from the current directory)")
	flag.StringVar(&cfg.baseline, "baseline", "", "a second shop binary, measured in the same rounds as the first (each workload on one, then the other), for a before/after comparison inside one run")
	flag.IntVar(&cfg.nginxWorkers, "nginx-workers", 1, "nginx worker processes (the workshop runs 1)")
	flag.BoolVar(&cfg.noNginx, "no-nginx", false, "skip the rounds through nginx")
	flag.StringVar(&cfg.profileDir, "profile", "", "after the rounds, write a CPU profile of the shop under each direct workload into this directory")
	flag.DurationVar(&cfg.profileTime, "profile-time", 15*time.Second, "length of each profile (whole seconds)")
	flag.Parse()
	if cfg.rounds < 1 || cfg.round < time.Second {
		fmt.Fprintln(os.Stderr, "shopcpu: -rounds at least 1 and -round at least 1s")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "shopcpu:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg config) (err error) {
	dir, err := os.MkdirTemp("", "shopcpu-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if cfg.shopBin == "" {
		cfg.shopBin = filepath.Join(dir, "shop")
		if err := launch.BuildShop(ctx, cfg.shopBin); err != nil {
			return fmt.Errorf("%w(run from the lockstep checkout, or give -shop)", err)
		}
	}
	env, err := startEnv(ctx, cfg, dir)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, env.stop()) }()

	fmt.Printf("shopcpu %s, %s; load average %s\n", time.Now().UTC().Format("2006-01-02 15:04:05 UTC"), revision(), loadAverage())
	for _, s := range env.shops {
		fmt.Printf("%s: %s, pid %d\n", s.name("shop"), s.bin, s.proc.Pid())
	}
	fmt.Printf("on their own redis-server (pid %d); %d rounds of %v per workload, warm-up %v\n\n", env.redis.Pid(), cfg.rounds, cfg.round, cfg.warmup)

	direct := directWorkloads(env.shops)
	if err := measure(ctx, cfg, env, direct, directLoad); err != nil {
		return err
	}
	printDirect(direct, env.shops)
	if !cfg.noNginx {
		viaNginx := nginxWorkloads(env.shops)
		if err := measure(ctx, cfg, env, viaNginx, nginxLoad); err != nil {
			return err
		}
		printNginx(viaNginx, env.shops, cfg.nginxWorkers)
	}
	if cfg.profileDir != "" {
		var own []*workload // the measured shop's: the profiles are of it
		for _, w := range direct {
			if w.shop == env.shops[0] {
				own = append(own, w)
			}
		}
		if err := profileAll(ctx, cfg, env, own); err != nil {
			return err
		}
	}
	fmt.Printf("\nload average at the end %s\n", loadAverage())
	return env.audit(ctx)
}

// loadAverage is /proc/loadavg's three figures.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}
