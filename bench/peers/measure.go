package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// bench holds what every measurement shares: the server, and a go-redis
// client of our own (not counted as any contender's) that sends the critical
// section's INCR, reads INFO and runs the EVALSHA baseline.
type bench struct {
	work     *redis.Client
	baseline *redis.Script
	// stallLimit is how long past its planned end a phase may run before
	// the contender is reported as stalled: a Lock on a free lock, or an
	// Unlock, that does not return.
	stallLimit time.Duration
	stacks     io.Writer // where a stall dumps the goroutines' stacks
}

// baselineScript is the cheapest script there is: two EVALSHA round trips of
// it are the floor for a lock that needs one script to lock and one to unlock.
const baselineScript = "return 1"

func newBench(ctx context.Context, addr string) (*bench, error) {
	b := &bench{
		work:       redis.NewClient(&redis.Options{Addr: addr}),
		baseline:   redis.NewScript(baselineScript),
		stallLimit: 10 * time.Second,
		stacks:     os.Stderr,
	}
	if err := b.baseline.Load(ctx, b.work).Err(); err != nil {
		b.work.Close()
		return nil, fmt.Errorf("load baseline script: %w", err)
	}
	return b, nil
}

func (b *bench) Close() error { return b.work.Close() }

// contendedRun is one contended measurement: goroutines looping
// lock → INCR → unlock on one key until the duration is over.
type contendedRun struct {
	acquisitions int64
	elapsed      time.Duration
	waits        []time.Duration // time spent in Lock, per acquisition
	cutWaits     []time.Duration // waits still open when the run ended
	perGoroutine []int64         // acquisitions of each goroutine
	overlaps     int64           // entries that found another goroutine inside
	counter      int64           // the INCR counter at the end
	commands     commandDelta
	requests     int64   // commands the contender's client(s) wrote
	perProcess   []int64 // acquisitions of each process, in a multi-process run
}

// contended runs the workload once in this process. Each goroutine owns one
// locker. The critical section and unlock run to completion even when the
// run ends while they are under way, so the counter can be compared with the
// acquisitions.
func (b *bench) contended(ctx context.Context, s session, requests *requestCounter, key string, goroutines int, d time.Duration) (*contendedRun, error) {
	counterKey := key + ":counter"
	if err := b.work.Del(ctx, counterKey).Err(); err != nil {
		return nil, fmt.Errorf("reset counter: %w", err)
	}
	lockers := make([]locker, goroutines)
	for i := range lockers {
		lockers[i] = s.Locker(key)
	}
	before, err := b.stats(ctx)
	if err != nil {
		return nil, err
	}
	requestsBefore := requests.Load()
	var check inProcessCheck
	loop, err := b.loop(ctx, lockers, &check, counterKey, time.Now().Add(d))
	if err != nil {
		return nil, err
	}
	run := &contendedRun{
		elapsed:      loop.end.Sub(loop.start),
		waits:        loop.waits,
		cutWaits:     loop.cutWaits,
		perGoroutine: loop.perGoroutine,
		overlaps:     check.overlaps.Load(),
		requests:     requests.Load() - requestsBefore,
	}
	after, err := b.stats(ctx)
	if err != nil {
		return nil, err
	}
	run.commands = after.minus(before)
	run.acquisitions = int64(len(run.waits))
	if run.counter, err = b.counter(ctx, counterKey); err != nil {
		return nil, err
	}
	return run, nil
}

func (b *bench) counter(ctx context.Context, counterKey string) (int64, error) {
	n, err := b.work.Get(ctx, counterKey).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, fmt.Errorf("read counter: %w", err)
	}
	return n, nil
}

// exclusionCheck is how a critical section learns whether another one is
// under way: enter reports an overlap when someone else is inside.
type exclusionCheck interface {
	enter()
	leave()
}

// inProcessCheck sees the goroutines of one process.
type inProcessCheck struct{ inside, overlaps atomic.Int64 }

func (c *inProcessCheck) enter() {
	if c.inside.Add(1) != 1 {
		c.overlaps.Add(1)
	}
}

func (c *inProcessCheck) leave() { c.inside.Add(-1) }

// loopRun is what the goroutines of one process did in a contended run.
type loopRun struct {
	start, end   time.Time
	waits        []time.Duration // time spent in Lock, per acquisition
	cutWaits     []time.Duration // waits still open when the run ended
	perGoroutine []int64         // acquisitions of each goroutine
}

// loop runs lock → INCR → unlock on every locker, one goroutine each, until
// deadline. The critical section and unlock run to completion even when the
// run ends while they are under way, so the counter can be compared with the
// acquisitions.
func (b *bench) loop(ctx context.Context, lockers []locker, check exclusionCheck, counterKey string, deadline time.Time) (*loopRun, error) {
	runCtx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		run  = &loopRun{}
		errs []error
	)
	finish := context.WithoutCancel(ctx)
	run.start = time.Now()
	for _, l := range lockers {
		wg.Go(func() {
			var waits []time.Duration
			var cut time.Duration
			err := func() error {
				for runCtx.Err() == nil {
					t0 := time.Now()
					if err := l.Lock(runCtx); err != nil {
						if runCtx.Err() != nil {
							cut = time.Since(t0)
							return nil
						}
						return fmt.Errorf("lock: %w", err)
					}
					waits = append(waits, time.Since(t0))
					check.enter()
					incrErr := b.work.Incr(finish, counterKey).Err()
					check.leave()
					if err := l.Unlock(finish); err != nil {
						return fmt.Errorf("unlock: %w", err)
					}
					if incrErr != nil {
						return fmt.Errorf("incr: %w", incrErr)
					}
				}
				return nil
			}()
			mu.Lock()
			defer mu.Unlock()
			run.waits = append(run.waits, waits...)
			run.perGoroutine = append(run.perGoroutine, int64(len(waits)))
			if cut > 0 {
				run.cutWaits = append(run.cutWaits, cut)
			}
			if err != nil {
				errs = append(errs, err)
				cancel()
			}
		})
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(time.Until(deadline.Add(b.stallLimit))):
		// A goroutine stuck in a library cannot be stopped; show where it is
		// and leave it behind: the command exits after the report.
		b.dumpGoroutines()
		return nil, fmt.Errorf("stalled: goroutines still in Lock or Unlock %v after the run ended (stacks on stderr)", b.stallLimit)
	}
	run.end = time.Now()
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return run, nil
}

// uncontendedRun is one goroutine's Lock+Unlock latency, measured in short
// blocks that alternate with blocks of the baseline (two EVALSHA round trips
// of baselineScript on the bench's client), so that both see the same
// loopback weather, which changes from one millisecond to the next.
type uncontendedRun struct {
	ops, baseline []time.Duration
	elapsed       time.Duration // time spent in the contender's blocks
	commands      commandDelta
	requests      int64
}

func (b *bench) dumpGoroutines() {
	_ = pprof.Lookup("goroutine").WriteTo(b.stacks, 1)
}

// uncontendedBlock is the number of operations timed in a row before
// switching between the contender and the baseline.
const uncontendedBlock = 50

func (b *bench) uncontended(ctx context.Context, s session, requests *requestCounter, key string, d time.Duration) (*uncontendedRun, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type outcome struct {
		run *uncontendedRun
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		run, err := b.uncontendedRounds(ctx, s, requests, key, d)
		done <- outcome{run, err}
	}()
	select {
	case o := <-done:
		return o.run, o.err
	case <-time.After(d + b.stallLimit):
		// As in contended: show where it is stuck, cancel, and leave it.
		b.dumpGoroutines()
		return nil, fmt.Errorf("stalled: Lock or Unlock of a free lock still running %v after the run's end (stacks on stderr)", b.stallLimit)
	}
}

func (b *bench) uncontendedRounds(ctx context.Context, s session, requests *requestCounter, key string, d time.Duration) (*uncontendedRun, error) {
	l := s.Locker(key)
	lockUnlock := func() error {
		if err := l.Lock(ctx); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		if err := l.Unlock(ctx); err != nil {
			return fmt.Errorf("unlock: %w", err)
		}
		return nil
	}
	twoEvalSHA := func() error {
		for range 2 {
			if err := b.baseline.EvalSha(ctx, b.work, nil).Err(); err != nil {
				return fmt.Errorf("baseline evalsha: %w", err)
			}
		}
		return nil
	}
	timed := func(into *[]time.Duration, op func() error) (time.Duration, error) {
		var spent time.Duration
		for range uncontendedBlock {
			t0 := time.Now()
			if err := op(); err != nil {
				return 0, err
			}
			took := time.Since(t0)
			*into = append(*into, took)
			spent += took
		}
		return spent, nil
	}
	var warm []time.Duration
	if _, err := timed(&warm, lockUnlock); err != nil {
		return nil, err
	}
	if _, err := timed(&warm, twoEvalSHA); err != nil {
		return nil, err
	}
	before, err := b.stats(ctx)
	if err != nil {
		return nil, err
	}
	requestsBefore := requests.Load()
	run := &uncontendedRun{}
	start := time.Now()
	for round := 0; time.Since(start) < d; round++ {
		// Alternate which goes first, so neither always follows the other.
		for i := range 2 {
			if (round+i)%2 == 0 {
				spent, err := timed(&run.ops, lockUnlock)
				if err != nil {
					return nil, err
				}
				run.elapsed += spent
			} else if _, err := timed(&run.baseline, twoEvalSHA); err != nil {
				return nil, err
			}
		}
	}
	run.requests = requests.Load() - requestsBefore
	after, err := b.stats(ctx)
	if err != nil {
		return nil, err
	}
	run.commands = after.minus(before)
	return run, nil
}

// serverStats is what INFO says about the commands Redis has processed.
// Redis 7 counts every command a Lua script runs with redis.call in both
// total_commands_processed and commandstats, besides the EVALSHA itself.
type serverStats struct {
	total int64
	calls map[string]int64 // commandstats calls by command name
}

// commandDelta is the difference of two serverStats taken by this bench with
// one INFO each: the delta includes exactly one INFO (the first; the second
// reports the counts from before itself).
type commandDelta serverStats

func (b *bench) stats(ctx context.Context) (serverStats, error) {
	text, err := b.work.Info(ctx, "stats", "commandstats").Result()
	if err != nil {
		return serverStats{}, fmt.Errorf("info: %w", err)
	}
	return parseStats(text)
}

func parseStats(text string) (serverStats, error) {
	s := serverStats{total: -1, calls: map[string]int64{}}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		name, value, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok {
			continue
		}
		if name == "total_commands_processed" {
			n, err := strconv.ParseInt(value, 10, 64)
			if err != nil {
				return s, fmt.Errorf("total_commands_processed %q: %w", value, err)
			}
			s.total = n
			continue
		}
		command, found := strings.CutPrefix(name, "cmdstat_")
		if !found {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(value, "calls="), ",")
		n, err := strconv.ParseInt(calls, 10, 64)
		if err != nil {
			return s, fmt.Errorf("%s calls %q: %w", name, calls, err)
		}
		s.calls[command] = n
	}
	if s.total < 0 {
		return s, errors.New("info stats without total_commands_processed")
	}
	return s, nil
}

func (s serverStats) minus(before serverStats) commandDelta {
	d := commandDelta{total: s.total - before.total, calls: map[string]int64{}}
	for name, n := range s.calls {
		if n -= before.calls[name]; n != 0 {
			d.calls[name] = n
		}
	}
	return d
}

// lockCommands is what the contender's locking cost the server: the total
// minus the bench's own commands, which are the delta's one INFO, the
// critical sections' INCRs and the baseline's EVALSHAs (baselineScript calls
// nothing inside; commandstats cannot tell its EVALSHAs from a contender's,
// so the caller passes their count).
func (d commandDelta) lockCommands(baselineEvalSHAs int64) int64 {
	return d.total - d.calls["info"] - d.calls["incr"] - baselineEvalSHAs
}

// breakdown lists the contender's commands per op, most frequent first,
// without the bench's INFO and INCR.
func (d commandDelta) breakdown(ops int64, baselineEvalSHAs int64) []commandShare {
	var shares []commandShare
	for name, n := range d.calls {
		switch name {
		case "info", "incr":
			continue
		case "evalsha":
			n -= baselineEvalSHAs
		}
		if n > 0 {
			shares = append(shares, commandShare{Command: name, PerOp: float64(n) / float64(ops)})
		}
	}
	slices.SortFunc(shares, func(a, b commandShare) int {
		if a.PerOp != b.PerOp {
			return cmpDesc(a.PerOp, b.PerOp)
		}
		return strings.Compare(a.Command, b.Command)
	})
	return shares
}

type commandShare struct {
	Command string  `json:"command"`
	PerOp   float64 `json:"per_op"`
}

func cmpDesc(a, b float64) int {
	if a > b {
		return -1
	}
	return 1
}

// jainIndex is Jain's fairness index of the goroutines' acquisitions:
// (Σx)² / (n·Σx²), 1 when all got the same share, 1/n when one got all.
func jainIndex(counts []int64) float64 {
	var sum, squares float64
	for _, c := range counts {
		sum += float64(c)
		squares += float64(c) * float64(c)
	}
	if squares == 0 {
		return 0
	}
	return sum * sum / (float64(len(counts)) * squares)
}

// quantile returns the q-quantile of sorted by the nearest-rank method.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(i, 0)]
}

func mean(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return sum(ds) / time.Duration(len(ds))
}

func sum(ds []time.Duration) time.Duration {
	var total time.Duration
	for _, d := range ds {
		total += d
	}
	return total
}
