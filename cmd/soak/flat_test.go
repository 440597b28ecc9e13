package main

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"
)

func TestJudgeFlat(t *testing.T) {
	const n = 60
	series := func(f func(i int) float64) []float64 {
		out := make([]float64, n)
		for i := range out {
			out[i] = f(i)
		}
		return out
	}
	mib := float64(1 << 20)
	tol := tolerance{Rel: 0.10, Abs: 2 * mib}
	for _, tc := range []struct {
		name   string
		values []float64
		flat   bool
	}{
		{"constant", series(func(int) float64 { return 40 * mib }), true},
		// A garbage-collected heap: a sawtooth between 20 and 40 MiB.
		{"sawtooth", series(func(i int) float64 { return 20*mib + float64(i%7)*20*mib/6 }), true},
		{"noise around a level", series(func(i int) float64 { return 40*mib + 3*mib*math.Sin(float64(i)) }), true},
		{"warm-up bump in the middle", series(func(i int) float64 {
			if i > 25 && i < 35 {
				return 46 * mib
			}
			return 40 * mib
		}), true},
		// 2 KiB per sample over 60 samples: 40 → 40.1 MiB, a slow leak well
		// inside 10% — flat by the rules (the soak's length is what makes a
		// leak show).
		{"tiny drift", series(func(i int) float64 { return 40*mib + float64(i)*2048 }), true},
		{"leak", series(func(i int) float64 { return 40*mib + float64(i)*0.5*mib }), false},
		// Inside the 10% + 2 MiB of a step, but rising through all three
		// thirds: only half of that is allowed.
		{"steady growth under the step limit", series(func(i int) float64 { return 40*mib + float64(i)*0.08*mib }), false},
		{"step up", series(func(i int) float64 {
			if i >= 40 {
				return 60 * mib
			}
			return 40 * mib
		}), false},
		{"too few samples", []float64{1, 1, 1, 1, 1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := judgeFlat(tc.name, tc.values, tol)
			if v.Flat != tc.flat {
				t.Errorf("flat = %t, want %t: %+v", v.Flat, tc.flat, v)
			}
			if !v.Flat && v.Why == "" {
				t.Errorf("not flat without a reason: %+v", v)
			}
		})
	}
}

// The shops' Redis pools and the proxy's keep-alive connections grow in
// steps with each new peak of concurrency and stay open: a short look's
// Redis clients went 18 → 24 → 29 and a shop's goroutines 21 → 28 → 30,
// which judged as they are failed. Net of the idle pooled connections and
// the open HTTP connections they are flat; a connection or goroutine that
// is never given back still fails.
func TestJudgeSamplesNetOfConnections(t *testing.T) {
	o := options{rate: 200, sample: time.Second, warmup: 7 * time.Second}
	// steps is 0 before 33 s, 1 before 46 s, 2 after: the peaks of a
	// recorded minute.
	steps := func(at int) float64 {
		switch {
		case at < 33:
			return 0
		case at < 46:
			return 1
		}
		return 2
	}
	look := func(leakedClients, leakedGoroutines float64) []sample {
		var out []sample
		for at := range 60 {
			s := sample{At: float64(at), Redis: redisSample{Clients: int64(18 + 5.5*steps(at) + leakedClients*float64(at))}}
			for i := range 3 {
				idle := 4 + 5.5*steps(at)/3
				conns := 5 + 4*steps(at)
				s.Shops = append(s.Shops, shopSample{
					Name: fmt.Sprintf("shop-%d", i+1), RSS: 40 << 20, HeapGoal: 10 << 20,
					Goroutines: 16 + conns + leakedGoroutines*float64(at), HTTPConns: conns, PoolIdle: idle,
				})
			}
			out = append(out, s)
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		samples []sample
		notFlat []string
	}{
		{"pools and keep-alive connections warming up", look(0, 0), nil},
		{"a Redis connection never closed every 2 s", look(0.5, 0), []string{"redis clients in use"}},
		{"a goroutine that never ends every 2 s", look(0, 0.5), []string{"shop-1 goroutines but connections'", "shop-2 goroutines but connections'", "shop-3 goroutines but connections'"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var notFlat []string
			for _, v := range judgeSamples(tc.samples, o) {
				if !v.Flat {
					notFlat = append(notFlat, v.Series)
				}
			}
			if !slices.Equal(notFlat, tc.notFlat) {
				t.Errorf("not flat: %q, want %q", notFlat, tc.notFlat)
			}
		})
	}
}
