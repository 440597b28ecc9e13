package frontdoor

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockstep/lockstep/internal/gcra"
)

//go:embed allow.lua
var allowSource string

var allowScript = gcra.Script(allowSource)

// redisLimiter is limit-redis: GCRA in Redis, one limit for every replica.
type redisLimiter struct {
	rdb redis.UniversalClient
	// limits are the set ones, the buyer's first; args are their
	// allow.lua arguments, in that order: built once, as a request sends
	// them unchanged.
	limits []limit
	args   []any
	// together: the buyer's and the global limit are judged by one script
	// run, one round trip. On a Cluster the two keys live in different
	// slots, so they are two runs, the global one only after the buyer's
	// admitted.
	together bool
}

func newRedisLimiter(rdb redis.UniversalClient, l Limits) *redisLimiter {
	_, cluster := rdb.(*redis.ClusterClient)
	r := &redisLimiter{rdb: rdb, together: !cluster}
	for _, c := range []struct {
		scope string
		rate  Rate
	}{{"buyer", l.PerBuyer}, {"global", l.Global}} {
		if c.rate.unlimited() {
			continue
		}
		args := []any{max(c.rate.Burst, 1), c.rate.Events, c.rate.Per.Seconds()}
		r.limits, r.args = append(r.limits, limit{scope: c.scope, args: args}), append(r.args, args...)
	}
	return r
}

// globalKey is the one shared key; a buyer's key carries the buyer as its
// hash tag, so on a Cluster buyers spread over the slots. The "rate:"
// prefix is redis_rate's, whose algorithm allow.lua runs.
const globalKey = "rate:frontdoor:{global}"

func buyerKey(buyer string) string { return "rate:frontdoor:{buyer:" + buyer + "}" }

// limit is one limit of a request: its scope and allow.lua's arguments
// for it.
type limit struct {
	scope string
	args  []any
}

func (c limit) key(buyer string) string {
	if c.scope == "buyer" {
		return buyerKey(buyer)
	}
	return globalKey
}

// Admission is the limits judged inside the sale's own script, when
// both are in one script run: on a Cluster the stock's keys and the
// limits' live in different slots.
func (l *redisLimiter) Admission(buyer string) (Admission, bool) {
	if !l.together || len(l.limits) == 0 {
		return Admission{}, false
	}
	a := Admission{keys: make([]string, len(l.limits)), args: l.args, limits: l.limits}
	for i, c := range l.limits {
		a.keys[i] = c.key(buyer)
	}
	return a, true
}

func (l *redisLimiter) Allow(ctx context.Context, buyer string) (Decision, error) {
	if l.together || len(l.limits) < 2 {
		return l.allow(ctx, buyer, l.limits, l.args)
	}
	for i, c := range l.limits {
		if d, err := l.allow(ctx, buyer, l.limits[i:i+1], c.args); err != nil || !d.Allowed {
			return d, err
		}
	}
	return Decision{Allowed: true}, nil
}

// allow runs allow.lua once over limits, all in one slot, with their
// arguments args.
func (l *redisLimiter) allow(ctx context.Context, buyer string, limits []limit, args []any) (Decision, error) {
	if len(limits) == 0 {
		return Decision{Allowed: true}, nil
	}
	keys := make([]string, len(limits))
	for i, c := range limits {
		keys[i] = c.key(buyer)
	}
	res, err := allowScript.Run(ctx, l.rdb, keys, args...).Result()
	if err != nil {
		return Decision{}, fmt.Errorf("frontdoor: rate limit: %w", err)
	}
	if admitted, _ := res.(int64); admitted == 1 {
		return Decision{Allowed: true}, nil
	}
	refusal, _ := res.([]any)
	return decodeRefusal(limits, refusal)
}

// decodeRefusal reads gcra_judge's refusal, {i, retry_after}, of limits.
func decodeRefusal(limits []limit, refusal []any) (Decision, error) {
	if len(refusal) != 2 {
		return Decision{}, fmt.Errorf("frontdoor: a GCRA script answered %v", refusal)
	}
	i, _ := refusal[0].(int64)
	s, _ := refusal[1].(string)
	after, err := strconv.ParseFloat(s, 64)
	if err != nil || i < 1 || int(i) > len(limits) {
		return Decision{}, fmt.Errorf("frontdoor: a GCRA script answered %v", refusal)
	}
	return refused(limits[i-1].scope, time.Duration(after*float64(time.Second))), nil
}
