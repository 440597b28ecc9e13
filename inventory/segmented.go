package inventory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/lockstep/lockstep/segments"
	"github.com/redis/go-redis/v9"
)

const (
	// segmentCountTTL is how long a replica trusts its copy of a SKU's
	// segment count; a reset elsewhere may change it, and the walk re-reads
	// it before answering sold out, so a stale copy costs no wrong answer.
	segmentCountTTL = time.Second
	// maxCachedCounts bounds that cache against SKUs invented by clients.
	maxCachedCounts = 10000
	// freeSegmentTries bounds a sale's first pass, which takes only free
	// segment locks: a try on a segment another replica holds costs a
	// round trip (one this process holds costs none).
	freeSegmentTries = 4
	// acrossTries bounds a sale across segments that finds, under their
	// locks, that other sales emptied them since it read their stocks.
	acrossTries = 3
)

// segmentedStage splits each SKU's stock into segments, each a little
// stock of its own (keys tagged {<sku>:<i>}) under its own watchdog lock.
type segmentedStage struct {
	*seller
	guard           watchdogGuard
	defaultSegments int

	mu     sync.Mutex
	counts map[string]cachedCount
}

type cachedCount struct {
	n       int
	tags    []string // segments.Tag of each segment: computing them costs ~1 µs each
	expires time.Time
}

func (s *segmentedStage) countKey(sku string) string {
	return "lockstep:" + s.id + ":{" + sku + "}:segments"
}

// segmentCount returns how many segments sku has, initialising a
// never-reset SKU with the default stock split into the default count.
func (s *segmentedStage) segmentCount(ctx context.Context, sku string, fresh bool) (int, error) {
	if !fresh {
		s.mu.Lock()
		c, ok := s.counts[sku]
		s.mu.Unlock()
		if ok && time.Now().Before(c.expires) {
			return c.n, nil
		}
	}
	n, err := s.rdb().Get(ctx, s.countKey(sku)).Int()
	if errors.Is(err, redis.Nil) {
		n, err = s.initialise(ctx, sku)
	}
	if err != nil {
		return 0, unavailable("segment count", err)
	}
	s.remember(sku, n)
	return n, nil
}

func (s *segmentedStage) remember(sku string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.counts) >= maxCachedCounts {
		clear(s.counts)
	}
	tags := s.counts[sku].tags
	if len(tags) != n {
		tags = segmentTags(sku, n)
	}
	s.counts[sku] = cachedCount{n: n, tags: tags, expires: time.Now().Add(segmentCountTTL)}
}

// tagsOf are the hash tags of sku's n segments, from the cache when it
// knows sku with n segments.
func (s *segmentedStage) tagsOf(sku string, n int) []string {
	s.mu.Lock()
	c, ok := s.counts[sku]
	s.mu.Unlock()
	if ok && c.n == n {
		return c.tags
	}
	return segmentTags(sku, n)
}

func segmentTags(sku string, n int) []string {
	tags := make([]string, n)
	for i := range tags {
		tags[i] = segments.Tag(sku, i, n)
	}
	return tags
}

// initialise gives a never-reset SKU its default segments. Replicas racing
// here agree: the count is set only if absent, and each segment only if it
// has no stock yet.
func (s *segmentedStage) initialise(ctx context.Context, sku string) (int, error) {
	if err := s.rdb().SetNX(ctx, s.countKey(sku), s.defaultSegments, 0).Err(); err != nil {
		return 0, err
	}
	n, err := s.rdb().Get(ctx, s.countKey(sku)).Int()
	if err != nil {
		return 0, err
	}
	shares, err := segments.Split(s.defaultStock, n)
	if err != nil {
		return 0, err
	}
	tags := s.tagsOf(sku, n)
	for i, share := range shares {
		if err := s.store.initialise(ctx, tags[i], share); err != nil {
			return 0, err
		}
	}
	return n, nil
}

func (s *segmentedStage) rdb() redis.UniversalClient { return s.store.rdb }

func (s *segmentedStage) deduct(ctx context.Context, sku string, qty int64, f Faults) (Sale, error) {
	n, err := s.segmentCount(ctx, sku, false)
	if err != nil {
		return Sale{}, err
	}
	sale, err := s.sell(ctx, sku, n, qty, f)
	if err != nil {
		return sale, err
	}
	return s.withSKUStock(ctx, sku, sale), nil
}

// withSKUStock gives a segment's sale the SKU's stock left, read after the
// segment's lock is released (one pipelined round trip), beside the
// segment's own (a sale across segments has none). A failed read leaves the segment's figure, a lower bound
// of the SKU's, in both: the sale is made and must be answered as such.
// The segment count is the one the sale last read: a reset while it waited
// may have changed it.
func (s *segmentedStage) withSKUStock(ctx context.Context, sku string, sale Sale) Sale {
	sold := sale.Remaining // what the segments that sold held after it
	if sale.Segment != nil {
		sale.SegmentRemaining = &sold
	}
	n, err := s.segmentCount(ctx, sku, false)
	var stocks []int64
	if err == nil {
		stocks, err = s.segmentStocks(ctx, s.tagsOf(sku, n))
	}
	if err != nil {
		s.log.Warn("stock left of the SKU after a segment's sale", "stage", s.id, "sku", sku, "err", err)
		return sale
	}
	var total int64
	for _, st := range stocks {
		total += st
	}
	sale.Remaining = max(total, sold)
	return sale
}

// sell sells qty from one of the n segments of sku.
func (s *segmentedStage) sell(ctx context.Context, sku string, n int, qty int64, f Faults) (Sale, error) {
	tags := s.tagsOf(sku, n)
	start := segments.Start(n)
	// A segment whose lock is taken may be held by a slow sale for long;
	// another one serves as well. Only when the first few are all busy
	// does the sale wait, on the segment it picked.
	free := s.guard
	free.wait = 0
	for k := range min(n, freeSegmentTries) {
		sale, err := s.sellFrom(ctx, free, tags, (start+k)%n, qty, f)
		if !errors.Is(err, ErrLockBusy) && !errors.Is(err, ErrSoldOut) {
			return sale, err
		}
	}
	sale, err := s.sellFrom(ctx, s.guard, tags, start, qty, f)
	if !errors.Is(err, ErrSoldOut) {
		return sale, err
	}
	// The first segment could not serve it: read every segment's stock (no
	// lock: stock only falls between resets) and visit those that can.
	if n, err = s.segmentCount(ctx, sku, true); err != nil {
		return Sale{}, err
	}
	tags = s.tagsOf(sku, n)
	stocks, err := s.segmentStocks(ctx, tags)
	if err != nil {
		return Sale{}, err
	}
	for _, i := range segments.Candidates(stocks, start%n, qty) {
		sale, err := s.sellFrom(ctx, s.guard, tags, i, qty, f)
		if !errors.Is(err, ErrSoldOut) {
			return sale, err
		}
	}
	return s.sellAcross(ctx, sku, tags, qty, f)
}

// sellAcross sells qty that no segment holds alone from several segments at
// once. Sold out is answered only when the segments' stocks, read after the
// segments could not serve it, add up to less than qty: stock only falls
// between resets, so the SKU held less than qty then. tags are read fresh
// by the caller, and again after each try: a reset that held a picked
// segment's lock while this sale waited for it may have changed the
// segment count, so every tag.
func (s *segmentedStage) sellAcross(ctx context.Context, sku string, tags []string, qty int64, f Faults) (Sale, error) {
	for range acrossTries {
		stocks, err := s.segmentStocks(ctx, tags)
		if err != nil {
			return Sale{}, err
		}
		picked := segments.Cover(stocks, qty)
		if picked == nil {
			return Sale{}, ErrSoldOut
		}
		sale, err := s.sellFromAll(ctx, tags, picked, qty, f)
		if !errors.Is(err, ErrSoldOut) {
			return sale, err
		}
		// Other sales emptied a picked segment between the read and the
		// locks, or a reset rewrote the segments: read again.
		n, err := s.segmentCount(ctx, sku, true)
		if err != nil {
			return Sale{}, err
		}
		tags = s.tagsOf(sku, n)
	}
	return Sale{}, fmt.Errorf("%w: %s's stock is spread over segments that other sales kept emptying", ErrLockBusy, sku)
}

// sellFromAll is one read-modify-write over the picked segments under all
// their locks, taken in ascending order (so sales across segments cannot
// deadlock; others hold one at a time), and written in one transaction.
// ErrSoldOut when, under the locks, they hold less than qty.
func (s *segmentedStage) sellFromAll(ctx context.Context, all []string, picked []int, qty int64, f Faults) (Sale, error) {
	tags := make([]string, len(picked))
	helds := make([]context.Context, len(picked))
	for k, i := range picked {
		tags[k] = all[i]
		held, release, err := s.acquire(ctx, s.guard, tags[k], f)
		if err != nil {
			return Sale{}, err
		}
		if k == 0 {
			if err := s.crashIfArmed(ctx, tags[k], f, release); err != nil {
				return Sale{}, err
			}
		}
		defer s.release(ctx, tags[k], release)
		helds[k] = held
	}
	stocks := make([]int64, len(tags))
	for k, tag := range tags {
		stock, err := s.store.stock(ctx, tag)
		if err != nil && !errors.Is(err, errNoStock) { // none: dropped by a reset
			return Sale{}, err
		}
		stocks[k] = stock
	}
	takes, ok := segments.Take(stocks, qty)
	if !ok {
		return Sale{}, ErrSoldOut
	}
	held, stop := whileAllHeld(ctx, helds)
	defer stop()
	if err := s.work(ctx, held, f); err != nil {
		return Sale{}, err
	}
	if err := s.store.commitAcross(ctx, tags, stocks, takes); err != nil {
		return Sale{}, err
	}
	var left int64
	for k := range stocks {
		left += stocks[k] - takes[k]
	}
	return Sale{Remaining: left, Segments: picked}, nil
}

// allHeldKey carries the held contexts whileAllHeld joined, for
// leaseLeftToWrite.
type allHeldKey struct{}

// whileAllHeld is a context that ends when the first of helds ends, with
// its cause: a sale across segments needs every lock until its write.
func whileAllHeld(ctx context.Context, helds []context.Context) (context.Context, func()) {
	all, cancel := context.WithCancelCause(context.WithValue(ctx, allHeldKey{}, helds))
	stops := make([]func() bool, len(helds))
	for i, held := range helds {
		stops[i] = context.AfterFunc(held, func() { cancel(context.Cause(held)) })
	}
	return all, func() {
		for _, stop := range stops {
			stop()
		}
		cancel(nil)
	}
}

// sellFrom is one read-modify-write on segment i under its lock, taken
// with g.
func (s *segmentedStage) sellFrom(ctx context.Context, g watchdogGuard, tags []string, i int, qty int64, f Faults) (Sale, error) {
	tag := tags[i]
	held, release, err := s.acquire(ctx, g, tag, f)
	if err != nil {
		return Sale{}, err
	}
	if err := s.crashIfArmed(ctx, tag, f, release); err != nil {
		return Sale{}, err
	}
	defer s.release(ctx, tag, release)
	leave, err := s.enterHeld(ctx, tag, f)
	if err != nil {
		return Sale{}, err
	}
	defer leave() // before the release
	stock, err := s.store.stock(ctx, tag)
	if errors.Is(err, errNoStock) {
		stock, err = 0, nil // dropped by a reset to fewer segments
	}
	if err != nil {
		return Sale{}, err
	}
	remaining, err := s.readModifyWrite(ctx, held, tag, qty, f, stock)
	if err != nil {
		return Sale{}, err
	}
	return Sale{Remaining: remaining, Segment: &i}, nil
}

// segmentStocks reads every segment's stock in one pipeline (one round trip
// per Cluster node); a missing segment reads as empty.
func (s *segmentedStage) segmentStocks(ctx context.Context, tags []string) ([]int64, error) {
	cmds := make([]*redis.StringCmd, len(tags))
	_, err := s.rdb().Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, tag := range tags {
			cmds[i] = p.Get(ctx, s.store.keys(tag).stock())
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, unavailable("read segment stocks", err)
	}
	stocks := make([]int64, len(tags))
	for i, cmd := range cmds {
		if v, err := cmd.Int64(); err == nil {
			stocks[i] = v
		}
	}
	return stocks, nil
}

func (s *segmentedStage) reset(ctx context.Context, sku string, stock int64, n int) error {
	if n == 0 {
		n = s.defaultSegments
	}
	shares, err := segments.Split(stock, n)
	if err != nil {
		return errors.Join(ErrInvalid, err)
	}
	old, err := s.rdb().Get(ctx, s.countKey(sku)).Int()
	if err != nil && !errors.Is(err, redis.Nil) {
		return unavailable("segment count", err)
	}
	// Every lock of the old segments, then of the new ones (a count change
	// moves every segment's tag), each in index order as sales take them,
	// so that no sale is inside a segment the reset rewrites or drops.
	oldTags, newTags := segmentTags(sku, old), segmentTags(sku, n)
	order := append(slices.Clone(oldTags), slices.DeleteFunc(slices.Clone(newTags), func(t string) bool { return slices.Contains(oldTags, t) })...)
	taken := make(map[string]bool, len(order))
	for _, tag := range order {
		var release func()
		taken[tag], release, err = s.quiesce(ctx, s.guard, tag, s.lockWait)
		if err != nil {
			return err
		}
		defer release()
	}
	for i, share := range shares {
		if err := s.store.reset(ctx, newTags[i], share, !taken[newTags[i]]); err != nil {
			return err
		}
	}
	if err := s.holders.reset(ctx, order...); err != nil {
		return err
	}
	_, err = s.rdb().Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, tag := range oldTags {
			if !slices.Contains(newTags, tag) {
				s.store.drop(ctx, p, tag)
			}
		}
		p.Set(ctx, s.countKey(sku), n, 0)
		return nil
	})
	if err != nil {
		return unavailable("reset segment count", err)
	}
	s.remember(sku, n)
	return nil
}

func (s *segmentedStage) audit(ctx context.Context, sku string) (Audit, error) {
	n, err := s.rdb().Get(ctx, s.countKey(sku)).Int()
	if errors.Is(err, redis.Nil) {
		return s.defaultAudit()
	}
	if err != nil {
		return Audit{}, unavailable("segment count", err)
	}
	tags := s.tagsOf(sku, n)
	cmds := make([]*redis.SliceCmd, n)
	_, err = s.rdb().Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range n {
			cmds[i] = s.store.queueCounts(ctx, p, tags[i])
		}
		return nil
	})
	if err != nil {
		return Audit{}, unavailable("read segments", err)
	}
	var total Counts
	per := make([]Counts, n)
	for i, cmd := range cmds {
		c, _, err := parseCounts(cmd)
		if err != nil {
			return Audit{}, err
		}
		per[i], total = c, total.add(c)
	}
	a := auditOf(total, per)
	// Sales in different segments hold different locks: the most holders
	// of one segment's lock at once is what a lost lock shows.
	if a.MaxHolders, err = s.holders.max(ctx, tags...); err != nil {
		return Audit{}, err
	}
	return a, nil
}

// defaultAudit is the audit of a SKU nobody sold or reset yet.
func (s *segmentedStage) defaultAudit() (Audit, error) {
	shares, err := segments.Split(s.defaultStock, s.defaultSegments)
	if err != nil {
		return Audit{}, err
	}
	per := make([]Counts, len(shares))
	for i, share := range shares {
		per[i] = Counts{Initial: share, Stock: share}
	}
	return auditOf(Counts{Initial: s.defaultStock, Stock: s.defaultStock}, per), nil
}
