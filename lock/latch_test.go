package lock

import (
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// A release latch is kept for as long as the client may send the release
// again, and not at all by a client that never sends a request twice: it
// costs a SET per release (BENCHMARKS.md), which a client built with
// MaxRetries: -1 does not pay.
func TestReleaseLatchOnlyForAClientThatRetries(t *testing.T) {
	srv := redistest.Start(t)
	for _, tc := range []struct {
		name      string
		opts      redis.Options
		wantLatch bool
	}{
		{"go-redis defaults (3 retries)", redis.Options{}, true},
		{"MaxRetries: -1", redis.Options{MaxRetries: -1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			opts.Addr = srv.Addr
			rdb := redis.NewClient(&opts)
			t.Cleanup(func() { _ = rdb.Close() })
			c := New(rdb)
			t.Cleanup(func() { _ = c.Close() })
			ctx := ctxTimeout(t, 10*time.Second)
			name := "latch-" + tc.name
			m := c.Mutex(name)
			if err := m.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			if err := m.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			latches := rdb.Keys(ctx, "{"+name+"}:released:*").Val()
			if got := len(latches) == 1; got != tc.wantLatch {
				t.Fatalf("latches after a release: %v, want one: %t", latches, tc.wantLatch)
			}
			if tc.wantLatch {
				if ttl := rdb.PTTL(ctx, latches[0]).Val(); ttl <= 0 {
					t.Fatalf("latch TTL %v, want the client's replay window", ttl)
				}
			}
		})
	}
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{srv.Addr}, MaxRetries: -1})
	t.Cleanup(func() { _ = cluster.Close() })
	if w := replayWindow(cluster, time.Second); w <= 0 {
		t.Fatalf("a Cluster client that follows redirects may re-send: window %v, want > 0", w)
	}
}
