package frontdoor

import (
	"context"
	"fmt"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// redisLimiter is limit-redis: GCRA in Redis, one limit for every replica.
type redisLimiter struct {
	rl     *redis_rate.Limiter
	limits Limits
}

func newRedisLimiter(rdb redis.UniversalClient, l Limits) *redisLimiter {
	return &redisLimiter{rl: redis_rate.NewLimiter(rdb), limits: l}
}

// globalKey is the one shared key; a buyer's key carries the buyer as its
// hash tag, so on a Cluster buyers spread over the slots.
const globalKey = "frontdoor:{global}"

func buyerKey(buyer string) string { return "frontdoor:{buyer:" + buyer + "}" }

func gcra(r Rate) redis_rate.Limit {
	return redis_rate.Limit{Rate: r.Events, Burst: max(r.Burst, 1), Period: r.Per}
}

func (l *redisLimiter) Allow(ctx context.Context, buyer string) (Decision, error) {
	for _, c := range []struct {
		scope, key string
		rate       Rate
	}{{"buyer", buyerKey(buyer), l.limits.PerBuyer}, {"global", globalKey, l.limits.Global}} {
		if c.rate.unlimited() {
			continue
		}
		res, err := l.rl.Allow(ctx, c.key, gcra(c.rate))
		if err != nil {
			return Decision{}, fmt.Errorf("frontdoor: %s limit: %w", c.scope, err)
		}
		if res.Allowed == 0 {
			return refused(c.scope, res.RetryAfter), nil
		}
	}
	return Decision{Allowed: true}, nil
}
