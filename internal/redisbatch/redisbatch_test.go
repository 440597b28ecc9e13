package redisbatch

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/redis/go-redis/v9"
)

func client(t *testing.T, srv *redistest.Server) (*redis.Client, *Batcher) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 16, MaxRetries: -1,
		DialTimeout: 300 * time.Millisecond, ReadTimeout: 300 * time.Millisecond, DialerRetries: 1})
	b := Attach(rdb)
	t.Cleanup(func() { b.Close(); rdb.Close() })
	return rdb, b
}

// Every concurrent command gets its own reply and error, whatever batch it
// travelled in.
func TestRepliesReachTheirCommands(t *testing.T) {
	srv := redistest.Start(t)
	rdb, _ := client(t, srv)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 64 {
		wg.Go(func() {
			for i := range 200 {
				key := fmt.Sprintf("k:%d:%d", g, i)
				if err := rdb.Set(ctx, key, key, 0).Err(); err != nil {
					errs <- err
					return
				}
				if v, err := rdb.Get(ctx, key).Result(); err != nil || v != key {
					errs <- fmt.Errorf("GET %s = %q, %v", key, v, err)
					return
				}
				if _, err := rdb.Get(ctx, key+":missing").Result(); !errors.Is(err, redis.Nil) {
					errs <- fmt.Errorf("GET of a missing key: %v, want redis.Nil", err)
					return
				}
				rdb.Incr(ctx, "counter")
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := rdb.Get(ctx, "counter").Val(); n != "12800" {
		t.Errorf("counter = %s, want 12800", n)
	}
}

// A script not yet cached answers NOSCRIPT to EVALSHA inside a batch, and
// the Script falls back to EVAL as without batching.
func TestScriptsFallBackToEval(t *testing.T) {
	srv := redistest.Start(t)
	rdb, _ := client(t, srv)
	script := redis.NewScript(`return redis.call('INCRBY', KEYS[1], ARGV[1])`)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			if err := script.Run(context.Background(), rdb, []string{"s"}, 2).Err(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := rdb.Get(context.Background(), "s").Val(); n != "32" {
		t.Errorf("s = %s, want 32", n)
	}
}

// Pub/sub and transactions keep their own connections.
func TestPubSubAndTransactionsPassThrough(t *testing.T) {
	srv := redistest.Start(t)
	rdb, _ := client(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sub := rdb.Subscribe(ctx, "ch")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	if err := rdb.Publish(ctx, "ch", "hello").Err(); err != nil {
		t.Fatal(err)
	}
	msg, err := sub.ReceiveMessage(ctx)
	if err != nil || msg.Payload != "hello" {
		t.Fatalf("message = %v, %v", msg, err)
	}
	cmds, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "a", 1, 0)
		p.IncrBy(ctx, "a", 2)
		return nil
	})
	if err != nil || cmds[1].(*redis.IntCmd).Val() != 3 {
		t.Fatalf("MULTI/EXEC = %v, %v", cmds, err)
	}
}

// With Redis gone, batched commands fail promptly, and work again once it
// is back.
func TestRedisDownFailsFast(t *testing.T) {
	srv := redistest.Start(t)
	rdb, _ := client(t, srv)
	ctx := context.Background()
	if err := rdb.Set(ctx, "k", 1, 0).Err(); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	start := time.Now()
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			if err := rdb.Get(ctx, "k").Err(); err == nil {
				t.Error("GET with Redis down succeeded")
			}
		})
	}
	wg.Wait()
	if d := time.Since(start); d > time.Second {
		t.Errorf("32 GETs with Redis down took %v", d)
	}
	srv.Restart()
	deadline := time.Now().Add(3 * time.Second)
	for rdb.Ping(ctx).Err() != nil {
		if time.Now().After(deadline) {
			t.Fatal("no answer after Redis came back")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// After Close, commands go to Redis one by one.
func TestCommandsAfterClose(t *testing.T) {
	srv := redistest.Start(t)
	rdb, b := client(t, srv)
	b.Close()
	if err := rdb.Set(context.Background(), "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if v := rdb.Get(context.Background(), "k").Val(); v != "v" {
		t.Fatalf("GET after Close = %q", v)
	}
}

// A connection whose set-up fails (here AUTH with a wrong password) sends
// no batch: every command in it gets that error, none looks like a success
// with an empty reply.
func TestFailedConnectionSetUpFailsTheBatch(t *testing.T) {
	srv := redistest.Start(t)
	if err := srv.Client(t).ConfigSet(context.Background(), "requirepass", "right").Err(); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, Password: "wrong", MaxRetries: -1})
	b := Attach(rdb)
	t.Cleanup(func() { b.Close(); rdb.Close() })
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			if err := rdb.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
				t.Errorf("PING %d: %v, want WRONGPASS", i, err)
			}
			if v, err := rdb.Get(ctx, "k").Result(); err == nil || errors.Is(err, redis.Nil) {
				t.Errorf("GET %d: %q, %v; want WRONGPASS", i, v, err)
			}
		})
	}
	wg.Wait()
}
