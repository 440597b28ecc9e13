package frontdoor

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/lockstep/lockstep/internal/keyslot"
	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// slow is a rate that does not refill during a test: only the burst counts.
func slow(burst int) Rate { return Rate{Events: 1, Per: time.Hour, Burst: burst} }

// replicas are two limiters of one kind, as two replicas would build them.
type replicas func(t *testing.T, l Limits) [2]Limiter

func localReplicas(t *testing.T, l Limits) [2]Limiter {
	return [2]Limiter{must(New(Local, l, nil)), must(New(Local, l, nil))}
}

func redisReplicas(t *testing.T, l Limits) [2]Limiter {
	srv := redistest.Start(t)
	var out [2]Limiter
	for i := range out {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
		t.Cleanup(func() { _ = rdb.Close() })
		out[i] = must(New(Redis, l, rdb))
	}
	return out
}

func must(l Limiter, err error) Limiter {
	if err != nil {
		panic(err)
	}
	return l
}

func admitted(t *testing.T, l Limiter, buyer string, n int) (ok int, last Decision) {
	t.Helper()
	for range n {
		d, err := l.Allow(context.Background(), buyer)
		if err != nil {
			t.Fatalf("Allow(%s): %v", buyer, err)
		}
		if d.Allowed {
			ok++
		} else {
			last = d
		}
	}
	return ok, last
}

func TestLimiters(t *testing.T) {
	kinds := []struct {
		name string
		make replicas
		// acrossReplicas is what two replicas admit of one buyer's limit
		// of 5: a per-process bucket admits each replica's own 5.
		acrossReplicas int
	}{
		{Local, localReplicas, 10},
		{Redis, redisReplicas, 5},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			t.Run("a bot is held to its limit, an honest buyer is not", func(t *testing.T) {
				r := k.make(t, Limits{PerBuyer: slow(5)})
				ok, last := admitted(t, r[0], "bot", 100)
				if ok != 5 || last.Scope != "buyer" || last.RetryAfter <= 0 {
					t.Fatalf("bot admitted %d of 100 (want 5), last refusal %+v", ok, last)
				}
				if ok, _ := admitted(t, r[0], "honest", 1); ok != 1 {
					t.Fatal("an honest buyer's first request was refused")
				}
			})
			t.Run("the global limit counts every buyer", func(t *testing.T) {
				r := k.make(t, Limits{PerBuyer: slow(5), Global: slow(10)})
				total := 0
				for i := range 30 {
					ok, _ := admitted(t, r[0], fmt.Sprint("buyer-", i), 1)
					total += ok
				}
				if total != 10 {
					t.Fatalf("admitted %d of 30 buyers, want the global 10", total)
				}
			})
			t.Run("across two replicas", func(t *testing.T) {
				r := k.make(t, Limits{PerBuyer: slow(5)})
				a, _ := admitted(t, r[0], "bot", 50)
				b, _ := admitted(t, r[1], "bot", 50)
				if a+b != k.acrossReplicas {
					t.Fatalf("two replicas admitted %d+%d of one buyer's limit of 5, want %d", a, b, k.acrossReplicas)
				}
			})
		})
	}
}

// TestLocalGlobalRefusalSpendsNoBuyerToken: a request the global limit
// refuses leaves the buyer's bucket as it was.
func TestLocalGlobalRefusalSpendsNoBuyerToken(t *testing.T) {
	l := must(New(Local, Limits{PerBuyer: slow(2), Global: slow(1)}, nil)).(*localLimiter)
	admitted(t, l, "other", 1) // spends the global token
	if ok, last := admitted(t, l, "b", 5); ok != 0 || last.Scope != "global" {
		t.Fatalf("admitted %d, last %+v: want every request refused globally", ok, last)
	}
	if got := l.buyers["b"].Tokens(); got < 2 {
		t.Fatalf("buyer b has %.2f tokens after global refusals, want its burst of 2", got)
	}
}

// TestLocalDropsFullBuckets: a spike of one-time buyers does not grow the
// map without bound, and a bucket still refilling is kept.
func TestLocalDropsFullBuckets(t *testing.T) {
	l := must(New(Local, Limits{PerBuyer: Rate{Events: 1000, Per: time.Millisecond, Burst: 1}}, nil)).(*localLimiter)
	l.buyers["bot"] = bucket(slow(1))
	admitted(t, l, "bot", 1)
	for i := range 10 * minSweepSize {
		admitted(t, l, fmt.Sprint("once-", i), 1)
	}
	if n := len(l.buyers); n > 2*minSweepSize {
		t.Fatalf("%d buckets kept for one-time buyers", n)
	}
	if ok, _ := admitted(t, l, "bot", 1); ok != 0 {
		t.Fatal("the bot's empty bucket was dropped: its limit was forgotten")
	}
}

func TestNew(t *testing.T) {
	if _, err := New(Nginx, Limits{}, nil); !errors.Is(err, ErrNotInProcess) {
		t.Fatalf("limit-nginx: %v, want ErrNotInProcess", err)
	}
	if _, err := New("limit-bogus", Limits{}, nil); !errors.Is(err, ErrUnknownLimiter) {
		t.Fatalf("limit-bogus: %v, want ErrUnknownLimiter", err)
	}
	if _, err := New(Redis, Limits{}, nil); err == nil {
		t.Fatal("limit-redis without a client was accepted")
	}
}

// TestRedisBuyersSpreadOnACluster: each buyer's key is its own hash tag,
// so on a Cluster the buyers' limits are served by every master.
func TestRedisBuyersSpreadOnACluster(t *testing.T) {
	slots := map[int]bool{}
	for i := range 100 {
		slots[keyslot.Of(buyerKey(fmt.Sprint("buyer-", i)))] = true
	}
	if len(slots) < 90 {
		t.Fatalf("100 buyers' keys fall in %d slots", len(slots))
	}
	c := redistest.StartCluster(t)
	l := must(New(Redis, Limits{PerBuyer: slow(2), Global: slow(1000)}, c.Client(t)))
	masters := map[string]bool{}
	for i := range 30 {
		buyer := fmt.Sprint("buyer-", i)
		if ok, _ := admitted(t, l, buyer, 3); ok != 2 {
			t.Fatalf("%s admitted %d of 3 on the cluster, want 2", buyer, ok)
		}
		masters[c.MasterOf(t, buyerKey(buyer)).Addr] = true
	}
	if len(masters) < 2 {
		t.Fatalf("30 buyers' limits all on %d master", len(masters))
	}
}

// calls counts the commands a client sends, each a round trip here.
type calls struct{ n atomic.Int64 }

func (*calls) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *calls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c *calls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmds)
	}
}

// TestRedisOneRoundTrip: on one Redis, a request costs one round trip
// whether it is admitted or refused by either limit, and a refusal by the
// global limit spends no token of the buyer's.
func TestRedisOneRoundTrip(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	l := must(New(Redis, Limits{PerBuyer: slow(2), Global: slow(3)}, rdb))
	admitted(t, l, "warm", 1) // loads the script: EVALSHA, NOSCRIPT, EVAL
	var c calls
	rdb.AddHook(&c)
	for _, step := range []struct {
		buyer, want string
	}{
		{"b", "admitted"},
		{"b", "admitted"},
		{"b", "buyer"},
		{"c", "global"},
	} {
		before := c.n.Load()
		d, err := l.Allow(context.Background(), step.buyer)
		if err != nil {
			t.Fatal(err)
		}
		got := d.Scope
		if d.Allowed {
			got = "admitted"
		}
		if got != step.want || c.n.Load()-before != 1 {
			t.Fatalf("%s: %s in %d round trips, want %s in 1", step.buyer, got, c.n.Load()-before, step.want)
		}
	}
	if n, err := rdb.Exists(context.Background(), buyerKey("c")).Result(); err != nil || n != 0 {
		t.Fatalf("buyer c's key exists (%d, %v) after only global refusals: a token was spent", n, err)
	}
}

// TestRedisAgreesWithRedisRate: allow.lua is redis_rate's GCRA; over one
// limit both admit the same requests and ask the same wait.
func TestRedisAgreesWithRedisRate(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	r := Rate{Events: 2, Per: time.Minute, Burst: 3}
	l := must(New(Redis, Limits{PerBuyer: r}, rdb))
	rl := redis_rate.NewLimiter(rdb)
	for i := range 6 {
		d, err := l.Allow(context.Background(), "ours")
		if err != nil {
			t.Fatal(err)
		}
		res, err := rl.Allow(context.Background(), "theirs", redis_rate.Limit{Rate: r.Events, Burst: r.Burst, Period: r.Per})
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed != (res.Allowed == 1) || (!d.Allowed && (d.RetryAfter-res.RetryAfter).Abs() > time.Second) {
			t.Fatalf("request %d: ours %+v, redis_rate's %+v", i, d, res)
		}
	}
}

// BenchmarkRedisAllow is limit-redis's cost of an admitted request, both
// limits set, on one Redis.
func BenchmarkRedisAllow(b *testing.B) {
	srv := redistest.Start(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	b.Cleanup(func() { _ = rdb.Close() })
	l := must(New(Redis, Limits{PerBuyer: Rate{Events: 1 << 30, Per: time.Second, Burst: 1 << 30}, Global: Rate{Events: 1 << 30, Per: time.Second, Burst: 1 << 30}}, rdb))
	ctx := context.Background()
	for b.Loop() {
		if d, err := l.Allow(ctx, "buyer"); err != nil || !d.Allowed {
			b.Fatal(d, err)
		}
	}
}
