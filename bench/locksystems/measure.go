package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
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
func measureUncontended(ctx context.Context, s system, srv *server, n int) (uncontended, error) {
	l, err := s.newLocker()
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
		if err := unlock(); err != nil {
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

// childSpec is what a contending child process is told.
type childSpec struct {
	System     string        `json:"system"`
	Endpoints  endpoints     `json:"endpoints"`
	Index      int           `json:"index"` // of the process: its goroutines' keys follow
	Goroutines int           `json:"goroutines"`
	Keys       int           `json:"keys"`
	Duration   time.Duration `json:"duration"`
	Shared     string        `json:"shared"` // the sharedcheck file
}

// childResult is what a child process did.
type childResult struct {
	Acquired int64 `json:"acquired"`
	Errors   int64 `json:"errors"`
}

// measureProcesses runs cfg.procs child processes of cfg.goroutines
// goroutines on keys keys (goroutine g of process p on key (p·G+g) mod
// keys), started together once every child is connected, and sums what
// they did; the server's CPU is read around it.
func measureProcesses(ctx context.Context, cfg config, ep endpoints, name string, srv *server, keys int, dir string) (contended, error) {
	shared := filepath.Join(dir, "shared")
	check, err := sharedcheck.Create(shared)
	if err != nil {
		return contended{}, err
	}
	defer check.Close()
	self, err := os.Executable()
	if err != nil {
		return contended{}, err
	}
	type proc struct {
		cmd   *exec.Cmd
		start io.WriteCloser
		lines *bufio.Scanner
	}
	procs := make([]proc, cfg.procs)
	defer func() {
		for _, p := range procs {
			if p.cmd != nil && p.cmd.ProcessState == nil {
				_ = p.cmd.Process.Kill()
				_ = p.cmd.Wait()
			}
		}
	}()
	for i := range procs {
		spec, err := json.Marshal(childSpec{System: name, Endpoints: ep, Index: i, Goroutines: cfg.goroutines, Keys: keys, Duration: cfg.duration, Shared: shared})
		if err != nil {
			return contended{}, err
		}
		cmd := exec.CommandContext(ctx, self, "-child", string(spec))
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return contended{}, err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return contended{}, err
		}
		if err := cmd.Start(); err != nil {
			return contended{}, err
		}
		procs[i] = proc{cmd: cmd, start: stdin, lines: bufio.NewScanner(stdout)}
	}
	for i, p := range procs {
		if !p.lines.Scan() || p.lines.Text() != "ready" {
			return contended{}, fmt.Errorf("child %d did not get ready: %v", i, p.lines.Err())
		}
	}
	cpuBefore := srv.cpu()
	start := time.Now()
	for _, p := range procs {
		if _, err := io.WriteString(p.start, "go\n"); err != nil {
			return contended{}, err
		}
	}
	var total childResult
	for i, p := range procs {
		if !p.lines.Scan() {
			return contended{}, fmt.Errorf("child %d: no result: %v", i, p.lines.Err())
		}
		var res childResult
		if err := json.Unmarshal(p.lines.Bytes(), &res); err != nil {
			return contended{}, fmt.Errorf("child %d: %w", i, err)
		}
		if err := p.cmd.Wait(); err != nil {
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

// child is one contending process: it connects, says "ready", waits for
// "go", runs its goroutines for the spec's duration and prints its result.
func child(ctx context.Context, cfg config) error {
	var spec childSpec
	if err := json.Unmarshal([]byte(cfg.child), &spec); err != nil {
		return fmt.Errorf("child spec: %w", err)
	}
	check, err := sharedcheck.Open(spec.Shared)
	if err != nil {
		return err
	}
	defer check.Close()
	systems, closeSystems, err := newSystems(ctx, spec.Endpoints)
	defer closeSystems()
	if err != nil {
		return err
	}
	i := slices.IndexFunc(systems, func(s system) bool { return s.name == spec.System })
	if i < 0 {
		return fmt.Errorf("no system %q", spec.System)
	}
	lockers := make([]locker, spec.Goroutines)
	for g := range lockers {
		if lockers[g], err = systems[i].newLocker(); err != nil {
			return err
		}
		defer lockers[g].close()
	}
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return fmt.Errorf("wait for go: %w", err)
	}
	res := contend(ctx, spec, lockers, check)
	return json.NewEncoder(os.Stdout).Encode(res)
}

// contend runs the goroutines: lock, mark the key's critical section in
// the shared page, unlock, as fast as they can.
func contend(ctx context.Context, spec childSpec, lockers []locker, check *sharedcheck.Check) childResult {
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
				if err := unlock(); err != nil {
					failures.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return childResult{Acquired: acquired.Load(), Errors: failures.Load()}
}
