package main

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockstep/lockstep/internal/redistest"
)

// TestRedisLinkPartitions: through the link a client talks to Redis; cut,
// its commands time out (nothing refused, nothing delivered: a command
// sent during the cut never runs); healed, it talks again.
func TestRedisLinkPartitions(t *testing.T) {
	srv := redistest.Start(t)
	l, err := startLink(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	rdb := redis.NewClient(&redis.Options{Addr: l.addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond,
		ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond})
	defer rdb.Close()
	ctx := context.Background()
	if err := rdb.Set(ctx, "k", "before", 0).Err(); err != nil {
		t.Fatalf("through the link: %v", err)
	}

	l.partition()
	start := time.Now()
	err = rdb.Set(ctx, "k", "during", 0).Err()
	if err == nil || time.Since(start) < 150*time.Millisecond {
		t.Fatalf("SET during the cut: %v after %s; want a timeout, not a quick answer", err, time.Since(start))
	}
	fresh := redis.NewClient(&redis.Options{Addr: l.addr(), MaxRetries: -1, ReadTimeout: 200 * time.Millisecond})
	defer fresh.Close()
	if err := fresh.Ping(ctx).Err(); err == nil {
		t.Fatal("a new connection got through the cut")
	}

	l.heal()
	if err := rdb.Ping(ctx).Err(); err != nil {
		// The connection the cut swallowed was closed at the heal; the
		// next command takes a new one.
		if err := rdb.Ping(ctx).Err(); err != nil {
			t.Fatalf("after the heal: %v", err)
		}
	}
	if v := srv.Client(t).Get(ctx, "k").Val(); v != "before" {
		t.Fatalf("k = %q: a command sent during the cut reached Redis", v)
	}
}
