package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockstep/lockstep/internal/sharedcheck"
)

type uncontended struct {
	p50, p99        time.Duration
	requestsPerPair float64
}

// measureUncontended times n lock+unlock pairs one after another, and
// counts the server requests they cost.
func measureUncontended(ctx context.Context, conn connection, srv *server, n int) (uncontended, error) {
	l, err := conn.newLocker()
	if err != nil {
		return uncontended{}, err
	}
	defer l.close()
	before, err := srv.requests(ctx)
	if err != nil {
		return uncontended{}, fmt.Errorf("server requests: %w", err)
	}
	lat := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		unlock, err := l.lock(ctx, "uncontended")
		if err != nil {
			return uncontended{}, err
		}
		if err := unlock(ctx); err != nil {
			return uncontended{}, err
		}
		lat = append(lat, time.Since(start))
	}
	after, err := srv.requests(ctx)
	if err != nil {
		return uncontended{}, fmt.Errorf("server requests: %w", err)
	}
	slices.Sort(lat)
	return uncontended{p50: lat[n/2], p99: lat[n*99/100], requestsPerPair: float64(after-before) / float64(n)}, nil
}

type contended struct {
	perSec, cpuPerThousand float64
	overlaps, errors       int64
}

// childResult is what a contending child process did.
type childResult struct {
	Acquired int64 `json:"acquired"`
	Errors   int64 `json:"errors"`
}

// measureProcesses runs cfg.procs child processes of cfg.goroutines
// goroutines on keys keys (goroutine g of process p on key (p·G+g) mod
// keys), started together once every child is connected, and sums what
// they did; the server's CPU is read around it.
func measureProcesses(ctx context.Context, r *run, s system, keys int) (contended, error) {
	check, shared, err := r.sharedCheck()
	if err != nil {
		return contended{}, err
	}
	defer check.Close()
	procs := make([]*childProcess, 0, r.cfg.procs)
	defer func() {
		for _, p := range procs {
			p.stop()
		}
	}()
	for i := range r.cfg.procs {
		p, err := startChild(ctx, childSpec{Role: roleContend, System: s.name, Endpoints: r.servers.endpoints, Lease: steadyLease,
			Shared: shared, Index: i, Goroutines: r.cfg.goroutines, Keys: keys, Duration: r.cfg.duration})
		if err != nil {
			return contended{}, err
		}
		procs = append(procs, p)
	}
	for i, p := range procs {
		if _, err := p.expect(evReady); err != nil {
			return contended{}, fmt.Errorf("child %d did not get ready: %w", i, err)
		}
	}
	srv := r.servers.of(s.name)
	cpuBefore := srv.cpu()
	start := time.Now()
	for _, p := range procs {
		if err := p.send(wordGo); err != nil {
			return contended{}, err
		}
	}
	var total childResult
	for i, p := range procs {
		var res childResult
		if err := p.decode(&res); err != nil {
			return contended{}, fmt.Errorf("child %d: %w", i, err)
		}
		if err := p.wait(); err != nil {
			return contended{}, fmt.Errorf("child %d: %w", i, err)
		}
		total.Acquired += res.Acquired
		total.Errors += res.Errors
	}
	elapsed := time.Since(start)
	c := contended{perSec: float64(total.Acquired) / elapsed.Seconds(), overlaps: check.Overlaps(), errors: total.Errors}
	if total.Acquired > 0 {
		c.cpuPerThousand = float64((srv.cpu() - cpuBefore).Milliseconds()) / float64(total.Acquired) * 1000
	}
	return c, nil
}

// contend is a contending child: its lockers, "ready", then on "go" its
// goroutines for the spec's duration, and its result.
func contend(ctx context.Context, spec childSpec, conn connection, check *sharedcheck.Check, c *childIO) error {
	lockers := make([]locker, spec.Goroutines)
	for g := range lockers {
		l, err := conn.newLocker()
		if err != nil {
			return err
		}
		defer l.close()
		lockers[g] = l
	}
	if err := c.readyForGo(); err != nil {
		return err
	}
	return c.events.Encode(contendFor(ctx, spec, lockers, check))
}

// contendFor runs the goroutines: lock, mark the key's critical section in
// the shared check, unlock, as fast as they can.
func contendFor(ctx context.Context, spec childSpec, lockers []locker, check *sharedcheck.Check) childResult {
	var acquired, failures atomic.Int64
	runCtx, cancel := context.WithTimeout(ctx, spec.Duration)
	defer cancel()
	var wg sync.WaitGroup
	for g, l := range lockers {
		slot := (spec.Index*spec.Goroutines + g) % spec.Keys
		key := fmt.Sprintf("key-%d-%d", spec.Keys, slot)
		wg.Go(func() {
			for runCtx.Err() == nil {
				unlock, err := l.lock(runCtx, key)
				if err != nil {
					// A server too busy to answer in time (etcd's request
					// timeout) is a figure, not the end of the run.
					if runCtx.Err() == nil {
						failures.Add(1)
						slog.Warn("lock", "system", spec.System, "err", err)
						time.Sleep(10 * time.Millisecond)
					}
					continue
				}
				check.Enter(slot % sharedcheck.Slots)
				acquired.Add(1)
				check.Leave(slot % sharedcheck.Slots)
				if err := unlock(context.WithoutCancel(runCtx)); err != nil {
					failures.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return childResult{Acquired: acquired.Load(), Errors: failures.Load()}
}
