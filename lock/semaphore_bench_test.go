package lock

import (
	"context"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// BenchmarkSemaphoreUncontendedSideBySide times, in the same iterations,
// one goroutine's acquire+release of one permit of a free Semaphore and of
// a PermitExpirableSemaphore against two bare EVALSHA, the floor of two
// script round trips, in blocks of 50 in turn (as
// BenchmarkUncontendedSideBySide). It reports each one's mean µs and its
// ratio to the two EVALSHA (mean and median), on a go-redis client with
// default options.
func BenchmarkSemaphoreUncontendedSideBySide(b *testing.B) {
	srv := redistest.Start(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	c := New(rdb)
	defer c.Close()
	ctx := context.Background()
	bare := redis.NewScript("return 1")
	s := c.Semaphore("bench-sem")
	e := c.PermitExpirableSemaphore("bench-exp")
	if _, err := s.TrySetPermits(ctx, 1); err != nil {
		b.Fatal(err)
	}
	if _, err := e.TrySetPermits(ctx, 1); err != nil {
		b.Fatal(err)
	}
	variants := []*sideBySide{
		{name: "2evalsha", op: func() error {
			if err := bare.Run(ctx, rdb, []string{"{bench-sem}"}).Err(); err != nil {
				return err
			}
			return bare.Run(ctx, rdb, []string{"{bench-sem}"}).Err()
		}},
		{name: "semaphore", op: func() error {
			if err := s.Acquire(ctx, 1); err != nil {
				return err
			}
			return s.Release(ctx, 1)
		}},
		{name: "expirable", op: func() error {
			id, err := e.Acquire(ctx, time.Minute)
			if err != nil {
				return err
			}
			return e.Release(ctx, id)
		}},
	}
	runSideBySide(b, variants)
}

// BenchmarkSemaphoreContended is 64 goroutines of one process sharing 8
// permits, each looping acquire → release; one op is one acquisition. The
// peer is the usual Redis token pool: a list of 8 tokens, taken with BLPOP
// and given back with RPUSH. All run on one go-redis client whose pool
// holds a connection per goroutine (a BLPOP keeps its connection while it
// blocks; the semaphores' waiters share the Client's pub/sub connection).
// It reports the p99 wait of an acquisition and checks that never more
// than 8 were held.
func BenchmarkSemaphoreContended(b *testing.B) {
	const goroutines, permits = 64, 8
	srv := redistest.Start(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: goroutines + 16})
	defer rdb.Close()
	c := New(rdb)
	defer c.Close()
	ctx := context.Background()
	s := c.Semaphore("bench-contended")
	e := c.PermitExpirableSemaphore("bench-contended-exp")
	pool := "{bench-pool}"
	for _, set := range []func() error{
		func() error { _, err := s.TrySetPermits(ctx, permits); return err },
		func() error { _, err := e.TrySetPermits(ctx, permits); return err },
		func() error {
			tokens := make([]any, permits)
			for i := range tokens {
				tokens[i] = i
			}
			return rdb.RPush(ctx, pool, tokens...).Err()
		},
	} {
		if err := set(); err != nil {
			b.Fatal(err)
		}
	}
	for _, v := range []struct {
		name    string
		acquire func() (release func() error, err error)
	}{
		{"semaphore", func() (func() error, error) {
			return func() error { return s.Release(ctx, 1) }, s.Acquire(ctx, 1)
		}},
		{"expirable", func() (func() error, error) {
			id, err := e.Acquire(ctx, time.Minute)
			return func() error { return e.Release(ctx, id) }, err
		}},
		{"list-pool", func() (func() error, error) {
			token, err := rdb.BLPop(ctx, 0, pool).Result()
			return func() error { return rdb.RPush(ctx, pool, token[1]).Err() }, err
		}},
	} {
		b.Run(v.name, func(b *testing.B) {
			runContended(b, goroutines, permits, func() func() (func() error, error) { return v.acquire })
		})
	}
}
