// Command locksystems measures the locks of the seed's systems side by side
// in one run on this machine, each server on loopback: Redis (SET NX PX with
// a Lua release, and the Redisson-style watchdog Mutex), etcd
// (concurrency.Mutex on a 3-member cluster), MySQL (《常见分布式锁方案对比》's unique-index
// row, on MariaDB) and ZooKeeper (the zookeeper stage's recipe,
// internal/zklock, on a 3-member ensemble).
//
// For each: uncontended lock+unlock latency and the server requests one
// pair costs; acquisitions per second with -procs processes of -goroutines
// goroutines each, all on one key and then spread over -keys keys, with the
// servers' CPU per thousand acquisitions and their resident memory; then
// three faults, each with real processes: a holder killed with SIGKILL
// (how long until another process acquires), a holder frozen with SIGSTOP
// past its lease and continued (how many holders at once), and the
// leader or master killed under a held lock (how many holders at once, and
// how long no lock was served). A file every process maps
// (internal/sharedcheck) counts the critical sections under way at once.
//
//	go run ./bench/locksystems -duration 3s -procs 3 -goroutines 8 -keys 16
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/lockstep/lockstep/internal/sharedcheck"
)

type config struct {
	duration    time.Duration
	procs       int
	goroutines  int
	keys        int
	uncontended int
	faultWait   time.Duration
	attempt     time.Duration
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if spec, ok := os.LookupEnv(childEnv); ok {
		if err := runChild(ctx, spec, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "locksystems child:", err)
			os.Exit(1)
		}
		return
	}
	var cfg config
	flag.DurationVar(&cfg.duration, "duration", 3*time.Second, "length of each contended measurement")
	flag.IntVar(&cfg.procs, "procs", 3, "contending processes")
	flag.IntVar(&cfg.goroutines, "goroutines", 8, "contending goroutines per process")
	flag.IntVar(&cfg.keys, "keys", 16, "keys of the spread-out measurement")
	flag.IntVar(&cfg.uncontended, "uncontended", 1000, "lock+unlock pairs of the uncontended measurement")
	flag.DurationVar(&cfg.faultWait, "fault-wait", 5*time.Second, "how long another process tries for the lock after a crash, in a pause and after a failover")
	flag.DurationVar(&cfg.attempt, "attempt", time.Second, "deadline of each lock request in the faults, retried 20 ms after it fails until -fault-wait: how etcd's and ZooKeeper's clients are advised to run through a failover (0: one request for the whole wait)")
	flag.Parse()
	fmt.Printf("%d processes × %d goroutines, %v per contended run, %d keys spread, %d uncontended pairs, faults waited on %v in requests of at most %v each, retried; servers on loopback\n\n",
		cfg.procs, cfg.goroutines, cfg.duration, cfg.keys, cfg.uncontended, cfg.faultWait, cfg.attempt)
	printHeader(cfg)
	if err := measureAll(ctx, cfg, printRow); err != nil {
		fmt.Fprintln(os.Stderr, "locksystems:", err)
		os.Exit(1)
	}
}

// run is one run's servers and scratch directory.
type run struct {
	cfg     config
	servers *servers
	dir     string
}

// sharedCheck zeroes the run's shared check file and maps it; a
// measurement's children map it too.
func (r *run) sharedCheck() (*sharedcheck.Check, string, error) {
	path := filepath.Join(r.dir, "shared")
	c, err := sharedcheck.Create(path)
	return c, path, err
}

// faultBudget bounds one fault measurement, children and all.
func (r *run) faultBudget() time.Duration { return 6*r.cfg.faultWait + 30*time.Second }

// probeBound bounds the wait for a lock after a leader was killed.
func (r *run) probeBound() time.Duration { return 3 * r.cfg.faultWait }

// row is one system's figures.
type row struct {
	name       string
	unc        uncontended
	one, many  contended
	rss        int64
	faultLease time.Duration
	crash      crashed
	pause      paused
	failover   failedOver
}

// measureAll starts the servers, measures every system and hands each row
// to report as it is done.
func measureAll(ctx context.Context, cfg config, report func(row)) error {
	if cfg.procs < 1 || cfg.goroutines < 1 || cfg.keys < 1 || cfg.uncontended < 1 || cfg.faultWait <= 0 {
		return fmt.Errorf("-procs, -goroutines, -keys and -uncontended must be at least 1, -fault-wait positive")
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
	r := &run{cfg: cfg, servers: servers, dir: dir}
	for _, s := range systems() {
		row, err := measureSystem(ctx, r, s)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		report(row)
	}
	return nil
}

// measureSystem measures one system; the failover comes last, as it may
// leave the servers a member short.
func measureSystem(ctx context.Context, r *run, s system) (row, error) {
	conn, err := s.connect(ctx, r.servers.endpoints, steadyLease)
	if err != nil {
		return row{}, err
	}
	defer conn.close()
	w := row{name: s.name, faultLease: s.faultLease}
	srv := r.servers.of(s.name)
	if w.unc, err = measureUncontended(ctx, conn, srv, r.cfg.uncontended); err != nil {
		return w, fmt.Errorf("uncontended: %w", err)
	}
	if w.one, err = measureProcesses(ctx, r, s, 1); err != nil {
		return w, fmt.Errorf("one key: %w", err)
	}
	if w.many, err = measureProcesses(ctx, r, s, r.cfg.keys); err != nil {
		return w, fmt.Errorf("%d keys: %w", r.cfg.keys, err)
	}
	w.rss = srv.rss()
	if w.crash, err = measureCrash(ctx, r, s, conn); err != nil {
		return w, fmt.Errorf("crash: %w", err)
	}
	if w.pause, err = measurePause(ctx, r, s); err != nil {
		return w, fmt.Errorf("pause: %w", err)
	}
	if w.failover, err = measureFailover(ctx, r, s); err != nil {
		return w, fmt.Errorf("failover: %w", err)
	}
	return w, nil
}
