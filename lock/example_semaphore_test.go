package lock_test

import (
	"context"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockstep/lockstep/lock"
)

// A Semaphore is Redisson's RSemaphore: permits in Redis that any process
// takes and gives back; a waiter sleeps on pub/sub until a release.
func ExampleClient_Semaphore() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks := lock.New(rdb)
	defer locks.Close()

	s := locks.Semaphore("pool:{db}")
	if _, err := s.TrySetPermits(ctx, 2); err != nil { // only the first caller sets them
		log.Fatal(err)
	}
	if err := s.Acquire(ctx, 2); err != nil {
		log.Fatal(err)
	}
	ok, err := s.TryAcquire(ctx, 1, 0) // none left: no wait
	fmt.Println("a third permit:", ok, err)
	if err := s.Release(ctx, 2); err != nil {
		log.Fatal(err)
	}
	left, _ := s.AvailablePermits(ctx)
	fmt.Println("available after the release:", left)
	rdb.Del(ctx, "pool:{db}")
	// Output:
	// a third permit: false <nil>
	// available after the release: 2
}

// A CountDownLatch is Redisson's RCountDownLatch: Await returns once the
// count, counted down by any process, reaches zero.
func ExampleClient_CountDownLatch() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks := lock.New(rdb)
	defer locks.Close()

	l := locks.CountDownLatch("warm-up:{shop}")
	if _, err := l.TrySetCount(ctx, 3); err != nil {
		log.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.CountDown(ctx); err != nil {
				log.Print(err)
			}
		}()
	}
	if err := l.Await(ctx); err != nil {
		log.Fatal(err)
	}
	wg.Wait()
	n, _ := l.Count(ctx)
	fmt.Println("count after the wait:", n)
	// Output:
	// count after the wait: 0
}

// A PermitExpirableSemaphore leases its permits: a holder that dies before
// Release leaks its permit only until the lease ends.
func ExampleClient_PermitExpirableSemaphore() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // bound every wait
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks := lock.New(rdb)
	defer locks.Close()

	s := locks.PermitExpirableSemaphore("stock:{sku-9}")
	if _, err := s.TrySetPermits(ctx, 1); err != nil {
		log.Fatal(err)
	}
	if _, err := s.Acquire(ctx, 100*time.Millisecond); err != nil { // never released: its holder "crashed"
		log.Fatal(err)
	}
	id, err := s.Acquire(ctx, time.Minute) // waits until the first lease ends
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("release:", s.Release(ctx, id))
	left, _ := s.AvailablePermits(ctx)
	fmt.Println("available:", left)
	rdb.Del(ctx, "stock:{sku-9}")
	// Output:
	// release: <nil>
	// available: 1
}
