package main

import (
	"fmt"
	"math"
)

// tolerance is how much a series may grow over a soak and still count as
// flat: Rel of its level plus Abs.
type tolerance struct {
	Rel float64 `json:"rel"`
	Abs float64 `json:"abs"`
}

// verdict is one series' flatness over the soak after the warm-up.
type verdict struct {
	Series string    `json:"series"`
	First  float64   `json:"first_third_mean"`
	Middle float64   `json:"middle_third_mean"`
	Last   float64   `json:"last_third_mean"`
	Limit  float64   `json:"limit"` // the largest last-third mean that counts as flat
	Tol    tolerance `json:"tolerance"`
	Flat   bool      `json:"flat"`
	Why    string    `json:"why,omitempty"`
}

// minFlatSamples is the fewest samples a flatness verdict is drawn from:
// two per third.
const minFlatSamples = 6

// judgeFlat splits values (sampled at a steady rate after the warm-up) into
// thirds. The series is flat when
//   - the last third's mean is within tol of the first third's:
//     last <= first*(1+Rel) + Abs, and
//   - it does not grow monotonically: a series whose thirds rise
//     first < middle < last may grow only half that much.
//
// A leak adds the same amount per request, so at a steady rate it grows
// linearly: its thirds rise steadily and it fails by either rule, however
// noisy the samples (a garbage-collected heap saws up and down; the thirds'
// means smooth that out).
func judgeFlat(series string, values []float64, tol tolerance) verdict {
	v := verdict{Series: series, Tol: tol}
	if len(values) < minFlatSamples {
		v.Why = fmt.Sprintf("only %d samples after the warm-up; need %d", len(values), minFlatSamples)
		return v
	}
	n := len(values) / 3
	v.First, v.Middle, v.Last = mean(values[:n]), mean(values[n:len(values)-n]), mean(values[len(values)-n:])
	allowed := v.First*tol.Rel + tol.Abs
	rising := v.First < v.Middle && v.Middle < v.Last
	if rising {
		allowed /= 2
	}
	v.Limit = v.First + allowed
	v.Flat = v.Last <= v.Limit
	switch {
	case !v.Flat && rising:
		v.Why = fmt.Sprintf("grows steadily: thirds %.4g < %.4g < %.4g, past %.4g", v.First, v.Middle, v.Last, v.Limit)
	case !v.Flat:
		v.Why = fmt.Sprintf("last third %.4g is over %.4g (first third %.4g + %.0f%% + %.4g)", v.Last, v.Limit, v.First, tol.Rel*100, tol.Abs)
	}
	return v
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}
