package main

import (
	"math"
	"testing"
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
