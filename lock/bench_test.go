package lock

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// BenchmarkUncontended is one goroutine's Lock+Unlock on a free lock: two
// script round trips. BenchmarkTwoEvalSha is the floor it is measured
// against.
func BenchmarkUncontended(b *testing.B) {
	srv := redistest.Start(b)
	c := New(srv.Client(b))
	defer c.Close()
	ctx := context.Background()
	m := c.Mutex("bench-uncontended")
	for b.Loop() {
		if err := m.Lock(ctx); err != nil {
			b.Fatal(err)
		}
		if err := m.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTwoEvalSha(b *testing.B) {
	srv := redistest.Start(b)
	rdb := srv.Client(b)
	ctx := context.Background()
	script := redis.NewScript("return 1")
	for b.Loop() {
		for range 2 {
			if err := script.Run(ctx, rdb, []string{"{bench}"}).Err(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkUncontendedSideBySide times, in the same iterations and so in the
// same loopback weather, what BenchmarkUncontended and BenchmarkTwoEvalSha
// time one after the other, and between them the floor of Redisson's data
// model: the Mutex's own lock and release scripts sent directly, with none
// of the Client's work. One iteration is a block of sideBySideBlock of each
// in turn, as bench/peers does. It reports each one's mean µs and its ratio
// to the two bare EVALSHA (mean and median). It runs on a go-redis client
// that never re-sends a request (MaxRetries -1, the shop's), and on one
// with go-redis's default options, whose releases keep a latch.
func BenchmarkUncontendedSideBySide(b *testing.B) {
	srv := redistest.Start(b)
	b.Run("client=MaxRetries-1", func(b *testing.B) { benchUncontendedSideBySide(b, srv.Client(b)) })
	b.Run("client=defaults", func(b *testing.B) {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
		defer rdb.Close()
		benchUncontendedSideBySide(b, rdb)
	})
}

func benchUncontendedSideBySide(b *testing.B, rdb *redis.Client) {
	c := New(rdb)
	defer c.Close()
	ctx := context.Background()
	bare := redis.NewScript("return 1")
	m := c.Mutex("bench-side-by-side")
	scriptKeys := newCohort(c, "{bench-side-by-side-scripts}", "").keys
	variants := []*sideBySide{
		{name: "2evalsha", op: func() error {
			if err := bare.Run(ctx, rdb, nil).Err(); err != nil {
				return err
			}
			return bare.Run(ctx, rdb, nil).Err()
		}},
		{name: "scripts", op: func() error {
			token := c.newToken()
			if err := lockScript.Run(ctx, rdb, scriptKeys, c.watchdogTTLArg, c.idArg, argZero, token, argOne).Err(); err != nil {
				return err
			}
			return releaseScript.Run(ctx, rdb, scriptKeys, c.idArg, c.watchdogTTLArg, releaseGive, "{bench-side-by-side-scripts}:channel", c.publishArg,
				token, c.latchTTLArg).Err()
		}},
		{name: "lock", op: func() error {
			if err := m.Lock(ctx); err != nil {
				return err
			}
			return m.Unlock(ctx)
		}},
		{name: "lockctx", op: func() error {
			if _, err := m.LockContext(ctx); err != nil {
				return err
			}
			return m.Unlock(ctx)
		}},
	}
	runSideBySide(b, variants)
}

// sideBySide is one contender of a side-by-side benchmark: op is one
// operation; taken collects how long each took.
type sideBySide struct {
	name  string
	op    func() error
	taken []time.Duration
}

// runSideBySide warms each contender, then times them in the same
// iterations, in blocks of 50, each going first in turn, and reports each
// one's mean µs and its mean and median ratio to the first (the floor).
func runSideBySide(b *testing.B, variants []*sideBySide) {
	b.Helper()
	const block = 50
	for _, v := range variants { // warm: scripts loaded, connection open
		if err := v.op(); err != nil {
			b.Fatalf("%s: %v", v.name, err)
		}
	}
	turn := 0
	for b.Loop() {
		turn++
		for i := range variants {
			v := variants[(turn+i)%len(variants)] // each goes first in turn
			for range block {
				start := time.Now()
				if err := v.op(); err != nil {
					b.Fatalf("%s: %v", v.name, err)
				}
				v.taken = append(v.taken, time.Since(start))
			}
		}
	}
	b.StopTimer()
	mean := func(d []time.Duration) float64 {
		var sum time.Duration
		for _, x := range d {
			sum += x
		}
		return float64(sum) / float64(len(d))
	}
	median := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2])
	}
	baseMean, baseMedian := mean(variants[0].taken), median(variants[0].taken)
	for _, v := range variants {
		b.ReportMetric(mean(v.taken)/1e3, v.name+"-µs")
		if v != variants[0] {
			b.ReportMetric(mean(v.taken)/baseMean, v.name+"-x")
			b.ReportMetric(median(v.taken)/baseMedian, v.name+"-p50-x")
		}
	}
}

// BenchmarkContended is 64 goroutines of one process on one key, each
// looping lock → INCR → unlock; one op is one acquisition. It reports the
// p99 time spent waiting in Lock and checks that no two were ever inside.
func BenchmarkContended(b *testing.B) {
	for _, tc := range []struct {
		name string
		opts []Option
	}{
		{"cohort", nil},
		{"no-cohort", []Option{WithMaxLocalPasses(0)}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			srv := redistest.Start(b)
			rdb := srv.Client(b)
			c := New(rdb, tc.opts...)
			defer c.Close()
			benchContended(b, c, rdb, 64)
		})
	}
}

func benchContended(b *testing.B, c *Client, rdb *redis.Client, workers int) {
	ctx := context.Background()
	runContended(b, workers, 1, func() func() (func() error, error) {
		m := c.Mutex("bench-contended")
		return func() (func() error, error) {
			if err := m.Lock(ctx); err != nil {
				return nil, err
			}
			return func() error {
				if err := rdb.Incr(ctx, "bench-contended-counter").Err(); err != nil {
					return err
				}
				return m.Unlock(ctx)
			}, nil
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "acq/s")
}

// runContended runs b.N acquisitions over workers goroutines, each looping
// acquire → release with the acquire its newWorker returns (one handle per
// goroutine). It fails when more than limit were ever held at once, and
// reports the p99 time spent in acquire.
func runContended(b *testing.B, workers int, limit int64, newWorker func() func() (release func() error, err error)) {
	b.Helper()
	var (
		left, held, most atomic.Int64
		mu               sync.Mutex
		waits            []time.Duration
		wg               sync.WaitGroup
	)
	left.Store(int64(b.N))
	b.ResetTimer()
	for range workers {
		wg.Add(1)
		acquire := newWorker()
		go func() {
			defer wg.Done()
			local := make([]time.Duration, 0, b.N/workers+1)
			for left.Add(-1) >= 0 {
				start := time.Now()
				release, err := acquire()
				if err != nil {
					b.Error(err)
					return
				}
				local = append(local, time.Since(start))
				h := held.Add(1)
				for m := most.Load(); h > m && !most.CompareAndSwap(m, h); m = most.Load() {
				}
				held.Add(-1)
				if err := release(); err != nil {
					b.Error(err)
					return
				}
			}
			mu.Lock()
			waits = append(waits, local...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	b.StopTimer()
	if most.Load() > limit {
		b.Fatalf("%d held at once, at most %d allowed", most.Load(), limit)
	}
	slices.Sort(waits)
	if len(waits) > 0 {
		b.ReportMetric(float64(waits[len(waits)*99/100])/1e3, "p99-wait-µs")
	}
}
