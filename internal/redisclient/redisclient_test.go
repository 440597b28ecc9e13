package redisclient_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/redisclient"
	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// timeout is the clients' Redis timeout in these tests; stall is how long
// the server stays paused: long enough that a first attempt times out and
// go-redis, if it resent, would have sent a second copy before the server
// continues and runs them both.
const (
	timeout = 200 * time.Millisecond
	stall   = 350 * time.Millisecond
)

// TestACommandWhoseReplyIsLostIsNotSentAgain pauses the server that holds
// a counter (SIGSTOP: it still takes in connections and requests), sends
// one INCR by each path a client has, lets the server continue, and counts:
// one INCR sent must have added at most one, whatever the caller was told.
// go-redis's ClusterClient resends a command, or a pipeline's, after a
// read timeout within MaxRedirects (issue 24: a sale counted twice).
func TestACommandWhoseReplyIsLostIsNotSentAgain(t *testing.T) {
	single := redistest.Start(t)
	cluster := redistest.StartCluster(t)
	settings := redisclient.Settings{Timeout: timeout}
	singleClient := redisclient.New(settings, single.Addr)
	clusterClient := redisclient.NewCluster(settings, cluster.Addrs())
	t.Cleanup(func() { _ = singleClient.Close(); _ = clusterClient.Close() })

	incr := func(ctx context.Context, rdb redis.UniversalClient, key string) error {
		return rdb.Incr(ctx, key).Err()
	}
	for _, tc := range []struct {
		name string
		rdb  redis.UniversalClient
		send func(ctx context.Context, rdb redis.UniversalClient, key string) error
	}{
		{"a single server's command", singleClient, incr},
		{"a cluster's command", clusterClient, incr},
		{"a cluster's script", clusterClient, func(ctx context.Context, rdb redis.UniversalClient, key string) error {
			return rdb.Eval(ctx, "return redis.call('INCR', KEYS[1])", []string{key}).Err()
		}},
		{"a cluster's pipeline", clusterClient, func(ctx context.Context, rdb redis.UniversalClient, key string) error {
			_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error { return p.Incr(ctx, key).Err() })
			return err
		}},
		{"a cluster's transaction", clusterClient, func(ctx context.Context, rdb redis.UniversalClient, key string) error {
			_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error { return p.Incr(ctx, key).Err() })
			return err
		}},
		// Sent after ASKING, to the master its key moved to while the slot
		// migrates: go-redis left the ASK of the first attempt on the
		// command when the pipeline's read timed out.
		{"a cluster's command that followed ASK", clusterClient, incr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "{" + tc.name + "}:n"
			server := single
			if tc.rdb == clusterClient {
				server = cluster.MasterOf(t, key)
			}
			ctx := t.Context()
			// Once first, so the path's connection is in the pool and the
			// paused server cannot answer within the timeout.
			if err := tc.send(ctx, tc.rdb, key); err != nil {
				t.Fatal(err)
			}
			if err := tc.rdb.Set(ctx, key, 0, 0).Err(); err != nil {
				t.Fatal(err)
			}
			if strings.HasSuffix(tc.name, "ASK") {
				server = cluster.MoveKeyHalfWay(t, key)
				if err := tc.send(ctx, tc.rdb, key); err != nil { // the target's connection, pooled
					t.Fatal(err)
				}
				if err := tc.rdb.Set(ctx, key, 0, 0).Err(); err != nil {
					t.Fatal(err)
				}
			}
			server.Pause()
			sent := make(chan error, 1)
			go func() { sent <- tc.send(ctx, tc.rdb, key) }()
			time.Sleep(stall)
			server.Continue()
			err := <-sent
			n := settled(t, tc.rdb, key)
			t.Logf("the INCR answered %v; the counter is %d", err, n)
			if n != 1 {
				t.Fatalf("one INCR added %d (it answered %v): it was sent again after its reply was lost", n, err)
			}
			if err == nil {
				t.Fatal("the INCR answered within its timeout although the server was paused")
			}
			if tc.rdb == clusterClient && tc.name != "a cluster's transaction" && !errors.Is(err, redisclient.ErrMayHaveRun) {
				t.Errorf("error %v, want ErrMayHaveRun", err)
			}
		})
	}
}

// TestEveryBuilderKeepsTheRetryRule: the three builders give go-redis no
// retry of its own, the same settings, and a cluster its redirects and the
// hook on every node.
func TestEveryBuilderKeepsTheRetryRule(t *testing.T) {
	s := redisclient.Settings{Password: "pw", DB: 2, Timeout: 300 * time.Millisecond, PoolSize: 7}
	single := redisclient.Options(s, "a:1")
	failover := redisclient.FailoverOptions(s, "main", []string{"s:1", "s:2"})
	cluster := redisclient.ClusterOptions(s, []string{"c:1"})
	for _, o := range []struct {
		name                     string
		retries, pool            int
		password                 string
		read                     time.Duration
		contextTimeout, redirect bool
	}{
		{"single", single.MaxRetries, single.PoolSize, single.Password, single.ReadTimeout, single.ContextTimeoutEnabled, true},
		{"failover", failover.MaxRetries, failover.PoolSize, failover.Password, failover.ReadTimeout, failover.ContextTimeoutEnabled, true},
		{"cluster", cluster.MaxRetries, cluster.PoolSize, cluster.Password, cluster.ReadTimeout, cluster.ContextTimeoutEnabled,
			cluster.MaxRedirects == 3 && cluster.NewClient != nil},
	} {
		if o.retries != -1 || o.pool != 7 || o.password != "pw" || o.read != s.Timeout || !o.contextTimeout || !o.redirect {
			t.Errorf("%s: %+v", o.name, o)
		}
	}
	if single.Addr != "a:1" || single.DB != 2 || failover.MasterName != "main" || len(failover.SentinelAddrs) != 2 || failover.DB != 2 {
		t.Errorf("addresses: single %s db %d, failover %s %v db %d", single.Addr, single.DB, failover.MasterName, failover.SentinelAddrs, failover.DB)
	}
}

// settled is the counter once the copies of the INCR a paused server took
// in have run: the server may answer another connection's GET first.
func settled(t *testing.T, rdb redis.UniversalClient, key string) int {
	t.Helper()
	ctx := t.Context()
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		n, err := rdb.Get(ctx, key).Int()
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 || time.Now().After(deadline) {
			break
		}
	}
	time.Sleep(200 * time.Millisecond) // a second copy, if any, has run by now
	n, err := rdb.Get(ctx, key).Int()
	if err != nil {
		t.Fatal(err)
	}
	return n
}
