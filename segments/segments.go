// Package segments is the policy of segmented stock (the closing 锁分段
// idea of 《关于分布式锁(Redisson)的原理分析》, after ConcurrentHashMap's lock striping): split a SKU's stock into N
// segments, each with its own lock, so N sales can hold a lock at once;
// pick a random segment to spread the load, move on to the next while one
// is busy, and when it cannot serve a sale walk the others in order; when no
// segment alone can serve it, the sale takes units from several at once
// (Cover), so "sold out" is only answered when the SKU's total is short.
//
// The package holds no state and does no I/O: the inventory package applies
// it to Redis, with per-segment hash tags so segments spread over a Redis
// Cluster's shards.
package segments

import (
	"cmp"
	"fmt"
	"iter"
	"math/rand/v2"
	"slices"
	"strconv"

	"github.com/lockstep/lockstep/internal/keyslot"
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

// Tag is what goes between the braces of the Redis keys of segment i of n:
// "<sku>:<i>:<salt>", so the keys of one segment share a Cluster slot and
// each segment has its own. The salt is the first that puts the tag's slot
// (CRC16 mod 16384, as CLUSTER KEYSLOT computes it) within slotWindow/2 of
// (2i+1)·16384/2n, the middle of the i-th of n equal parts of the slot
// space — inside that part for n ≤ 64, within a neighbour's beyond. A
// cluster whose masters hold equal contiguous ranges, as redis-cli
// --cluster create assigns them, then holds n/masters segments each, give
// or take one (plain tags such as {sku-1:0}..{sku-1:7} land 2/2/4 on three
// masters). It is a pure function of its arguments, so every replica
// computes the same keys.
func Tag(sku string, i, n int) string {
	prefix := sku + ":" + strconv.Itoa(i) + ":"
	crc := keyslot.CRC16(0, prefix)
	from := (2*i+1)*slotCount/(2*n) - slotWindow/2 // the window's start
	var digits [20]byte
	for salt := 0; ; salt++ {
		d := strconv.AppendInt(digits[:0], int64(salt), 10)
		if (int(keyslot.CRC16(crc, string(d))%slotCount)-from+slotCount)%slotCount < slotWindow {
			return prefix + string(d)
		}
	}
}

// Redis Cluster's hash slots, and how close to its target a segment's slot
// must be: 1/64 of the slot space, found in ~64 tries of a few bytes each.
const (
	slotCount  = keyslot.Count
	slotWindow = slotCount / 64
)

// Slot is the Cluster hash slot of a hash tag's content (CLUSTER KEYSLOT).
func Slot(tag string) int { return int(keyslot.CRC16(0, tag) % keyslot.Count) }

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

// Cover picks the fewest segments whose stocks add up to qty, the fullest
// first, and returns them in ascending order, the order their locks are
// taken in so that two sales across segments never wait for each other in a
// cycle. It returns nil when all the segments together hold less than qty.
func Cover(stocks []int64, qty int64) []int {
	byStock := make([]int, len(stocks))
	for i := range byStock {
		byStock[i] = i
	}
	slices.SortStableFunc(byStock, func(a, b int) int { return cmp.Compare(stocks[b], stocks[a]) })
	var picked []int
	for _, i := range byStock {
		if qty <= 0 || stocks[i] <= 0 {
			break
		}
		picked = append(picked, i)
		qty -= stocks[i]
	}
	if qty > 0 {
		return nil
	}
	slices.Sort(picked)
	return picked
}

// Take splits qty over segments holding stocks (as Cover picked them): as
// much as each holds, in order, until qty is met. ok is false when they hold
// less than qty together.
func Take(stocks []int64, qty int64) (takes []int64, ok bool) {
	takes = make([]int64, len(stocks))
	for i, s := range stocks {
		takes[i] = max(0, min(s, qty))
		qty -= takes[i]
	}
	return takes, qty == 0
}
