package frontdoor

import (
	"context"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// localLimiter is limit-local: token buckets in this process only, so N
// replicas admit N× the limit (the synchronized of rate limiting).
type localLimiter struct {
	limits Limits
	global *rate.Limiter

	mu        sync.Mutex
	buyers    map[string]*rate.Limiter
	sweepSize int // the map's size at which idle buckets are dropped next
}

const minSweepSize = 1024

func newLocalLimiter(l Limits) *localLimiter {
	return &localLimiter{limits: l, global: bucket(l.Global), buyers: map[string]*rate.Limiter{}, sweepSize: minSweepSize}
}

func bucket(r Rate) *rate.Limiter {
	if r.unlimited() {
		return rate.NewLimiter(rate.Inf, 0)
	}
	return rate.NewLimiter(rate.Limit(float64(r.Events)/r.Per.Seconds()), max(r.Burst, 1))
}

func (l *localLimiter) Allow(_ context.Context, buyer string) (Decision, error) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buyerBucket(buyer, now)
	rb := b.ReserveN(now, 1)
	if d := rb.DelayFrom(now); d > 0 {
		rb.CancelAt(now)
		return refused("buyer", d), nil
	}
	rg := l.global.ReserveN(now, 1)
	if d := rg.DelayFrom(now); d > 0 {
		// Neither limit spends a token on a refused request.
		rg.CancelAt(now)
		rb.CancelAt(now)
		return refused("global", d), nil
	}
	return Decision{Allowed: true}, nil
}

// buyerBucket is buyer's bucket. Buckets that have refilled are dropped
// when the map doubles: a full bucket is a new one, so nothing is lost,
// and a spike of one-request buyers does not grow memory without bound.
func (l *localLimiter) buyerBucket(buyer string, now time.Time) *rate.Limiter {
	if b, ok := l.buyers[buyer]; ok {
		return b
	}
	if len(l.buyers) >= l.sweepSize {
		for k, b := range l.buyers {
			if b.TokensAt(now) >= float64(b.Burst()) {
				delete(l.buyers, k)
			}
		}
		l.sweepSize = max(2*len(l.buyers), minSweepSize)
	}
	b := bucket(l.limits.PerBuyer)
	l.buyers[buyer] = b
	return b
}
