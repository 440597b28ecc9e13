package lock

import (
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// A release latch is kept for as long as the client may send the release
// again, and not at all by a client that never sends a request twice: it
// costs a few commands per release, which a client built with
// MaxRetries: -1 does not pay. It lasts replayWindow (issue 32, finding 7).
func TestReleaseLatchOnlyForAClientThatRetries(t *testing.T) {
	srv := redistest.Start(t)
	for _, tc := range []struct {
		name      string
		opts      redis.Options
		wantLatch bool
		lasts     time.Duration
	}{
		{"go-redis defaults (3 retries)", redis.Options{}, true, 162200 * time.Millisecond},
		{"MaxRetries: -1", redis.Options{MaxRetries: -1}, false, 0},
		// 0.5+1, then 2 × (3 pool + 2+0.5+1 dial + 0.5 write), then 1 read.
		{"explicit timeouts", redis.Options{MaxRetries: 2, ReadTimeout: 1000 * time.Millisecond, WriteTimeout: 500 * time.Millisecond,
			PoolTimeout: 3 * time.Second, DialTimeout: 2 * time.Second, DialerRetries: 1, MaxRetryBackoff: -1}, true, 16500 * time.Millisecond},
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
			latches := rdb.Keys(ctx, latchKey("{"+name+"}")).Val()
			if got := len(latches) == 1; got != tc.wantLatch {
				t.Fatalf("latches after a release: %v, want one: %t", latches, tc.wantLatch)
			}
			if tc.wantLatch {
				if ttl := rdb.PTTL(ctx, latches[0]).Val(); ttl > tc.lasts || ttl < tc.lasts-time.Second {
					t.Fatalf("latch TTL %v, want the client's replay window, %v", ttl, tc.lasts)
				}
			}
		})
	}
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{srv.Addr}, MaxRetries: -1})
	t.Cleanup(func() { _ = cluster.Close() })
	if w := replayWindow(cluster); w <= 0 {
		t.Fatalf("a Cluster client that follows redirects may re-send: window %v, want > 0", w)
	}
}

// Issue 32, finding 7: the latch lasts as long as go-redis may write a
// request again, every wait of its retry loop counted: each re-send's
// backoff, its wait for a pooled connection, a new connection's dials and
// handshake, and the tries' writes and reads; a read or write with no
// timeout lasts until TCP keep-alive finds the connection dead.
func TestReplayWindowCoversGoRedisRetries(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name string
		rdb  redis.UniversalClient
		want time.Duration
	}{
		// 5+5, then 3 × (1 backoff + 6 pool + 5×5+4×0.1+5+5 dial + 5 write), then 2 × 5 read.
		{"defaults", redis.NewClient(&redis.Options{}), 162200 * ms},
		{"MaxRetries -1", redis.NewClient(&redis.Options{MaxRetries: -1}), 0},
		// No read timeout: 45 s reads and writes, 30 s pool; one re-send.
		{"ReadTimeout -1", redis.NewClient(&redis.Options{MaxRetries: 1, ReadTimeout: -1, DialTimeout: time.Second,
			DialerRetries: 2, DialerRetryTimeout: 50 * ms, MaxRetryBackoff: 200 * ms}), 257250 * ms},
		{"explicit", redis.NewClient(&redis.Options{MaxRetries: 2, ReadTimeout: 100 * ms, WriteTimeout: 50 * ms,
			PoolTimeout: 300 * ms, DialTimeout: 200 * ms, DialerRetries: 1, MaxRetryBackoff: -1}), 1650 * ms},
		// Four tries by MaxRedirects, one each by the node clients.
		{"cluster MaxRetries -1", redis.NewClusterClient(&redis.ClusterOptions{MaxRetries: -1}), 162200 * ms},
		// The node clients read with 5 s timeouts: ClusterOptions.init
		// makes -1 a 0, which the nodes' Options.init makes 5 s.
		{"cluster ReadTimeout -1", redis.NewClusterClient(&redis.ClusterOptions{ReadTimeout: -1, MaxRedirects: -1, MaxRetries: 1}), 57400 * ms},
		{"another kind: go-redis defaults", redis.NewRing(&redis.RingOptions{}), 162200 * ms},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Cleanup(func() { _ = tc.rdb.Close() })
			if got := replayWindow(tc.rdb); got != tc.want {
				t.Fatalf("replayWindow = %v, want %v", got, tc.want)
			}
		})
	}
}
