// Package segments is the policy of segmented stock (seed 000's closing
// idea, after ConcurrentHashMap's lock striping): split a SKU's stock into N
// segments, each with its own lock, so N sales can hold a lock at once;
// pick a random segment to spread the load, move on to the next while one
// is busy, and when it cannot serve a sale walk the others in order, so the
// last units still sell and "sold out" is only answered when no segment can
// serve it.
//
// The package holds no state and does no I/O: the inventory package applies
// it to Redis, with per-segment hash tags so segments spread over a Redis
// Cluster's shards.
package segments

import (
	"fmt"
	"iter"
	"math/rand/v2"
	"strconv"
)

const (
	// DefaultCount is the number of segments a SKU gets unless told.
	DefaultCount = 16
	// MaxCount bounds the segments of one SKU: each costs keys and a lock.
	MaxCount = 1024
)

// Split divides total into n shares that differ by at most one unit, the
// larger shares first, so they add up to total exactly.
func Split(total int64, n int) ([]int64, error) {
	if n < 1 || n > MaxCount {
		return nil, fmt.Errorf("segments: count must be within [1, %d], got %d", MaxCount, n)
	}
	if total < 0 {
		return nil, fmt.Errorf("segments: total must not be negative, got %d", total)
	}
	shares := make([]int64, n)
	base, extra := total/int64(n), total%int64(n)
	for i := range shares {
		shares[i] = base
		if int64(i) < extra {
			shares[i]++
		}
	}
	return shares, nil
}

// Tag is what goes between the braces of segment i's Redis keys: the SKU
// and the index, so every segment hashes to its own Cluster slot while the
// keys of one segment share one.
func Tag(sku string, i int) string { return sku + ":" + strconv.Itoa(i) }

// Start picks the segment a sale tries first, uniformly, so concurrent
// sales spread over the segments' locks.
func Start(n int) int { return rand.IntN(n) }

// Walk yields the n segments in visiting order from start: start, start+1,
// ..., wrapping around.
func Walk(start, n int) iter.Seq[int] {
	return func(yield func(int) bool) {
		for k := range n {
			if !yield((start + k) % n) {
				return
			}
		}
	}
}

// Candidates returns, in visiting order from start, the segments whose
// stock can serve qty units. A sale visits them (each under its lock, where
// it reads the stock again); when there are none the SKU is sold out for
// qty.
func Candidates(stocks []int64, start int, qty int64) []int {
	var out []int
	for i := range Walk(start, len(stocks)) {
		if stocks[i] >= qty {
			out = append(out, i)
		}
	}
	return out
}
