package frontdoor

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed allow.lua
var allowSource string

var allowScript = redis.NewScript(allowSource)

// redisLimiter is limit-redis: GCRA in Redis, one limit for every replica.
type redisLimiter struct {
	rdb    redis.UniversalClient
	limits Limits
	// together: the buyer's and the global limit are judged by one script
	// run, one round trip. On a Cluster the two keys live in different
	// slots, so they are two runs, the global one only after the buyer's
	// admitted.
	together bool
}

func newRedisLimiter(rdb redis.UniversalClient, l Limits) *redisLimiter {
	_, cluster := rdb.(*redis.ClusterClient)
	return &redisLimiter{rdb: rdb, limits: l, together: !cluster}
}

// globalKey is the one shared key; a buyer's key carries the buyer as its
// hash tag, so on a Cluster buyers spread over the slots. The "rate:"
// prefix is redis_rate's, whose algorithm allow.lua runs.
const globalKey = "rate:frontdoor:{global}"

func buyerKey(buyer string) string { return "rate:frontdoor:{buyer:" + buyer + "}" }

// limit is one limit of a request: its scope, key and rate.
type limit struct {
	scope, key string
	rate       Rate
}

func (l *redisLimiter) Allow(ctx context.Context, buyer string) (Decision, error) {
	var limits []limit
	for _, c := range []limit{{"buyer", buyerKey(buyer), l.limits.PerBuyer}, {"global", globalKey, l.limits.Global}} {
		if !c.rate.unlimited() {
			limits = append(limits, c)
		}
	}
	if l.together || len(limits) < 2 {
		return l.allow(ctx, limits)
	}
	for _, c := range limits {
		if d, err := l.allow(ctx, []limit{c}); err != nil || !d.Allowed {
			return d, err
		}
	}
	return Decision{Allowed: true}, nil
}

// allow runs allow.lua once over limits, all in one slot.
func (l *redisLimiter) allow(ctx context.Context, limits []limit) (Decision, error) {
	if len(limits) == 0 {
		return Decision{Allowed: true}, nil
	}
	keys := make([]string, len(limits))
	args := make([]any, 0, 3*len(limits))
	for i, c := range limits {
		keys[i] = c.key
		args = append(args, max(c.rate.Burst, 1), c.rate.Events, c.rate.Per.Seconds())
	}
	res, err := allowScript.Run(ctx, l.rdb, keys, args...).Slice()
	if err != nil {
		return Decision{}, fmt.Errorf("frontdoor: rate limit: %w", err)
	}
	if ok, _ := res[0].(int64); ok == 1 {
		return Decision{Allowed: true}, nil
	}
	if len(res) != 3 {
		return Decision{}, fmt.Errorf("frontdoor: allow.lua answered %v", res)
	}
	i, _ := res[1].(int64)
	s, _ := res[2].(string)
	after, err := strconv.ParseFloat(s, 64)
	if err != nil || i < 1 || int(i) > len(limits) {
		return Decision{}, fmt.Errorf("frontdoor: allow.lua answered %v", res)
	}
	return refused(limits[i-1].scope, time.Duration(after*float64(time.Second))), nil
}
