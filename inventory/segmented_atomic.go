package inventory

import (
	"context"
	"errors"
	"fmt"

	"github.com/lockstep/lockstep/segments"
)

var (
	segmentTakeScript     = loadScript("segment_take.lua")
	segmentGiveBackScript = loadScript("segment_give_back.lua")
)

// segmentedAtomicStage is segmented without segment locks: each segment is
// deducted by atomic's script, so a sale is one script on one segment's
// node. A sale no segment can serve alone runs under a lock of the SKU
// (guard, on the SKU's own tag) and takes what each segment holds with a
// script per segment, giving it all back when the SKU is short. Only such
// sales give units back, one at a time, so under that lock stock only
// falls, and sold out is only answered when the SKU cannot serve the sale.
type segmentedAtomicStage struct {
	*segmentedStage
}

func (s *segmentedAtomicStage) deduct(ctx context.Context, sku string, qty int64, f Faults) (Sale, error) {
	if err := workThenWrite(ctx, f); err != nil {
		return Sale{}, err
	}
	n, err := s.segmentCount(ctx, sku, false)
	if err != nil {
		return Sale{}, err
	}
	tags := s.tagsOf(sku, n)
	start := segments.Start(n)
	sale, err := s.sellFrom(ctx, tags, start, qty)
	if errors.Is(err, ErrSoldOut) {
		sale, err = s.sellElsewhere(ctx, sku, start, qty, f)
	}
	if err != nil {
		return Sale{}, err
	}
	return s.withSKUStock(ctx, sku, sale), nil
}

// sellElsewhere serves a sale the first segment could not: from another
// segment that holds qty, else from several.
func (s *segmentedAtomicStage) sellElsewhere(ctx context.Context, sku string, start int, qty int64, f Faults) (Sale, error) {
	n, err := s.segmentCount(ctx, sku, true)
	if err != nil {
		return Sale{}, err
	}
	tags := s.tagsOf(sku, n)
	stocks, err := s.segmentStocks(ctx, tags)
	if err != nil {
		return Sale{}, err
	}
	for _, i := range segments.Candidates(stocks, start%n, qty) {
		sale, err := s.sellFrom(ctx, tags, i, qty)
		if !errors.Is(err, ErrSoldOut) {
			return sale, err
		}
	}
	return s.takeAcross(ctx, sku, qty, f)
}

// sellFrom deducts qty from segment i in one script.
func (s *segmentedAtomicStage) sellFrom(ctx context.Context, tags []string, i int, qty int64) (Sale, error) {
	remaining, err := s.store.atomicDeduct(ctx, tags[i], qty)
	if errors.Is(err, errNoStock) {
		return Sale{}, ErrSoldOut // dropped by a reset to fewer segments
	}
	if err != nil {
		return Sale{}, err
	}
	return Sale{Remaining: remaining, Segment: &i}, nil
}

// takeAcross takes qty from as many segments as it needs, in index order,
// under the SKU's across lock.
func (s *segmentedAtomicStage) takeAcross(ctx context.Context, sku string, qty int64, f Faults) (Sale, error) {
	_, release, err := s.acquire(ctx, s.guard, sku, f)
	if err != nil {
		return Sale{}, err
	}
	defer s.release(ctx, sku, release)
	// The segments as they are under the lock: a reset that held it while
	// this sale waited may have changed their count, so every tag.
	n, err := s.segmentCount(ctx, sku, true)
	if err != nil {
		return Sale{}, err
	}
	tags := s.tagsOf(sku, n)
	taken := make([]int64, len(tags))
	need := qty
	var sold []int
	for i, tag := range tags {
		if need == 0 {
			break
		}
		k := s.store.keys(tag)
		n, err := s.store.run(ctx, segmentTakeScript, []string{k.stock(), k.sold()}, need).Int64()
		if err != nil {
			return Sale{}, errors.Join(writeFailed("take from a segment", err), s.giveBack(ctx, tags, taken))
		}
		if n > 0 {
			taken[i], need = n, need-n
			sold = append(sold, i)
		}
	}
	if need > 0 {
		// Every segment was emptied on the way and stock only falls under
		// this lock: the SKU holds less than qty.
		if err := s.giveBack(ctx, tags, taken); err != nil {
			return Sale{}, err
		}
		return Sale{}, ErrSoldOut
	}
	return Sale{Segments: sold}, nil
}

// giveBack returns what a sale across segments took, on a context of its
// own (the sale's may be what ended); a failure leaves units counted sold
// that nobody bought, an outcome the caller cannot know.
func (s *segmentedAtomicStage) giveBack(ctx context.Context, tags []string, taken []int64) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	var errs []error
	for i, n := range taken {
		if n == 0 {
			continue
		}
		k := s.store.keys(tags[i])
		if err := s.store.run(ctx, segmentGiveBackScript, []string{k.stock(), k.sold()}, n).Err(); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("inventory: give back a short sale's units: %w: %w: %w", ErrUnavailable, ErrOutcomeUnknown, errors.Join(errs...))
	}
	return nil
}

// reset first takes the across lock, so that no sale across segments is
// taking or giving back while the segments are rewritten.
func (s *segmentedAtomicStage) reset(ctx context.Context, sku string, stock int64, n int) error {
	_, release, err := s.quiesce(ctx, s.guard, sku, s.lockWait)
	if err != nil {
		return err
	}
	defer release()
	return s.segmentedStage.reset(ctx, sku, stock, n)
}
