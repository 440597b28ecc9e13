package inventory

import (
	"context"
	"errors"
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
	s.counts[sku] = cachedCount{n: n, expires: time.Now().Add(segmentCountTTL)}
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
	for i, share := range shares {
		if err := s.store.initialise(ctx, segments.Tag(sku, i), share); err != nil {
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
	return s.withSKUStock(ctx, sku, n, sale), nil
}

// withSKUStock gives a segment's sale the SKU's stock left, read after the
// segment's lock is released (one pipelined round trip), beside the
// segment's own. A failed read leaves the segment's figure, a lower bound
// of the SKU's, in both: the sale is made and must be answered as such.
func (s *segmentedStage) withSKUStock(ctx context.Context, sku string, n int, sale Sale) Sale {
	segment := sale.Remaining
	sale.SegmentRemaining = &segment
	stocks, err := s.segmentStocks(ctx, sku, n)
	if err != nil {
		s.log.Warn("stock left of the SKU after a segment's sale", "stage", s.id, "sku", sku, "err", err)
		return sale
	}
	var total int64
	for _, st := range stocks {
		total += st
	}
	sale.Remaining = max(total, segment)
	return sale
}

// sell sells qty from one of the n segments of sku.
func (s *segmentedStage) sell(ctx context.Context, sku string, n int, qty int64, f Faults) (Sale, error) {
	start := segments.Start(n)
	// A segment whose lock is taken may be held by a slow sale for long;
	// another one serves as well. Only when the first few are all busy
	// does the sale wait, on the segment it picked.
	free := s.guard
	free.wait = 0
	for k := range min(n, freeSegmentTries) {
		sale, err := s.sellFrom(ctx, free, sku, (start+k)%n, qty, f)
		if !errors.Is(err, ErrLockBusy) && !errors.Is(err, ErrSoldOut) {
			return sale, err
		}
	}
	sale, err := s.sellFrom(ctx, s.guard, sku, start, qty, f)
	if !errors.Is(err, ErrSoldOut) {
		return sale, err
	}
	// The first segment could not serve it: read every segment's stock (no
	// lock: stock only falls between resets) and visit those that can.
	if n, err = s.segmentCount(ctx, sku, true); err != nil {
		return Sale{}, err
	}
	stocks, err := s.segmentStocks(ctx, sku, n)
	if err != nil {
		return Sale{}, err
	}
	for _, i := range segments.Candidates(stocks, start%n, qty) {
		sale, err := s.sellFrom(ctx, s.guard, sku, i, qty, f)
		if !errors.Is(err, ErrSoldOut) {
			return sale, err
		}
	}
	return Sale{}, ErrSoldOut
}

// sellFrom is one read-modify-write on segment i under its lock, taken
// with g.
func (s *segmentedStage) sellFrom(ctx context.Context, g watchdogGuard, sku string, i int, qty int64, f Faults) (Sale, error) {
	tag := segments.Tag(sku, i)
	held, release, err := s.acquire(ctx, g, tag, f)
	if err != nil {
		return Sale{}, err
	}
	if err := s.crashIfArmed(ctx, tag, f, release); err != nil {
		return Sale{}, err
	}
	defer s.release(ctx, tag, release)
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
func (s *segmentedStage) segmentStocks(ctx context.Context, sku string, n int) ([]int64, error) {
	cmds := make([]*redis.StringCmd, n)
	_, err := s.rdb().Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range n {
			cmds[i] = p.Get(ctx, s.store.keys(segments.Tag(sku, i)).stock())
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, unavailable("read segment stocks", err)
	}
	stocks := make([]int64, n)
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
	// Every segment's lock, in index order (sales hold one at a time), so
	// that no sale is inside a segment the reset rewrites or drops.
	taken := make([]bool, max(old, n))
	for i := range taken {
		var release func()
		taken[i], release, err = s.quiesce(ctx, s.guard, segments.Tag(sku, i), s.lockWait)
		if err != nil {
			return err
		}
		defer release()
	}
	for i, share := range shares {
		if err := s.store.reset(ctx, segments.Tag(sku, i), share, !taken[i]); err != nil {
			return err
		}
	}
	_, err = s.rdb().Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := n; i < old; i++ {
			s.store.drop(ctx, p, segments.Tag(sku, i))
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
	cmds := make([]*redis.SliceCmd, n)
	_, err = s.rdb().Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range n {
			cmds[i] = s.store.queueCounts(ctx, p, segments.Tag(sku, i))
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
	return auditOf(total, per), nil
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
