// Command locksystems measures the locks of the seed's systems side by side
// in one run on this machine, each server on loopback: Redis (SET NX PX with
// a Lua release, and the Redisson-style watchdog Mutex), etcd
// (concurrency.Mutex on a 3-member cluster), MySQL (seed 003's unique-index
// row, on MariaDB) and ZooKeeper (Curator's recipe, go-zookeeper's Lock, on
// a 3-member ensemble). For each: uncontended lock+unlock latency and the
// server requests one pair costs, then acquisitions per second with -procs
// processes of -goroutines goroutines each, all on one key and then spread
// over -keys keys, with the servers' CPU per thousand acquisitions and
// their resident memory. A page every process maps (internal/sharedcheck)
// checks that no two holders of one key ever overlapped, in any process.
//
//	go run ./bench/locksystems -duration 3s -procs 3 -goroutines 8 -keys 16
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

type config struct {
	duration    time.Duration
	procs       int
	goroutines  int
	keys        int
	uncontended int
	child       string // the JSON childSpec of a child process; "" in the parent
}

func main() {
	var cfg config
	flag.DurationVar(&cfg.duration, "duration", 3*time.Second, "length of each contended measurement")
	flag.IntVar(&cfg.procs, "procs", 3, "contending processes")
	flag.IntVar(&cfg.goroutines, "goroutines", 8, "contending goroutines per process")
	flag.IntVar(&cfg.keys, "keys", 16, "keys of the spread-out measurement")
	flag.IntVar(&cfg.uncontended, "uncontended", 1000, "lock+unlock pairs of the uncontended measurement")
	flag.StringVar(&cfg.child, "child", "", "internal: run as a contending child process with this JSON spec")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	run := parent
	if cfg.child != "" {
		run = child
	}
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "locksystems:", err)
		os.Exit(1)
	}
}

func parent(ctx context.Context, cfg config) error {
	if cfg.procs < 1 || cfg.goroutines < 1 || cfg.keys < 1 || cfg.uncontended < 1 {
		return fmt.Errorf("-procs, -goroutines, -keys and -uncontended must be at least 1")
	}
	dir, err := os.MkdirTemp("", "locksystems-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	servers, err := startServers(ctx, dir)
	defer servers.stop()
	if err != nil {
		return err
	}
	systems, closeSystems, err := newSystems(ctx, servers.endpoints)
	defer closeSystems()
	if err != nil {
		return err
	}
	fmt.Printf("%d processes × %d goroutines, %v per contended run, %d keys spread, %d uncontended pairs; servers on loopback\n\n",
		cfg.procs, cfg.goroutines, cfg.duration, cfg.keys, cfg.uncontended)
	fmt.Printf("| lock | uncontended p50 | p99 | server requests / pair | one key acq/s | server CPU ms / 1000 acq | %d keys acq/s | server RSS MB | overlaps | errors |\n", cfg.keys)
	fmt.Println("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	for _, s := range systems {
		srv := servers.of(s.name)
		u, err := measureUncontended(ctx, s, srv, cfg.uncontended)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		one, err := measureProcesses(ctx, cfg, servers.endpoints, s.name, srv, 1, dir)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		many, err := measureProcesses(ctx, cfg, servers.endpoints, s.name, srv, cfg.keys, dir)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		fmt.Printf("| %s | %s | %s | %.1f | %.0f | %.1f | %.0f | %.0f | %d | %d |\n", s.name, round(u.p50), round(u.p99), u.requestsPerPair,
			one.perSec, one.cpuPerThousand, many.perSec, float64(srv.rss())/(1<<20), one.overlaps+many.overlaps, one.errors+many.errors)
	}
	return nil
}

func round(d time.Duration) string { return d.Round(10 * time.Microsecond).String() }
