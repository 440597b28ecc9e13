package lock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockstep/lockstep/lock"
)

// The examples run against real redis-servers that TestMain starts:
// redisAddr stands for your Redis's address.

// A Mutex is Redisson's RLock: reentrant, kept alive by a watchdog while
// held, and its waiters sleep on pub/sub until the unlock.
func ExampleClient_Mutex() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()

	rdb.Set(ctx, "stock:{sku-1}", 10, 0)

	locks := lock.New(rdb) // one Client per process: it owns the pub/sub connection and the watchdogs
	defer locks.Close()

	m := locks.Mutex("order:{sku-1}") // one handle = one owner; reentrant
	held, err := m.LockContext(ctx)   // waits on pub/sub; a watchdog keeps the lock
	if err != nil {
		log.Fatal(err)
	}
	// The work under the lock uses held: it ends the moment the lock is lost.
	stock, err := rdb.Decr(held, "stock:{sku-1}").Result()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("stock after one sale:", stock)
	if err := m.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	rdb.Del(ctx, "stock:{sku-1}")
	// Output:
	// stock after one sale: 9
}

// The held context ends the critical section when the lock is gone: here
// an operator deletes the key, and the watchdog's next renewal finds it
// missing. A failover that lost the lock, or a Redis the holder can no
// longer reach before the lease runs out, ends it the same way.
func ExampleMutex_LockContext() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	// A short lease so that the example sees the loss quickly: the
	// watchdog renews every third of it.
	locks := lock.New(rdb, lock.WithWatchdogTimeout(300*time.Millisecond))
	defer locks.Close()

	m := locks.Mutex("report:{daily}")
	held, err := m.LockContext(ctx)
	if err != nil {
		log.Fatal(err)
	}
	rdb.Del(ctx, m.Key()) // the lock is lost while held

	select {
	case <-held.Done(): // work under the lock passes held on, and stops here
		fmt.Println("critical section ended:", context.Cause(held))
	case <-time.After(5 * time.Second):
		fmt.Println("still held after 5s")
	}
	err = m.Unlock(ctx)
	fmt.Println("unlock reports the loss:", errors.Is(err, lock.ErrLockLost))
	// Output:
	// critical section ended: lock: lost
	// unlock reports the loss: true
}

// TryLock waits at most wait; false with a nil error means the wait ran
// out while another owner held the lock.
func ExampleMutex_TryLock() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	// Two Clients stand for two processes.
	first, second := lock.New(rdb), lock.New(rdb)
	defer first.Close()
	defer second.Close()

	holder := first.Mutex("coupon:{c-42}")
	if err := holder.Lock(ctx); err != nil {
		log.Fatal(err)
	}

	other := second.Mutex("coupon:{c-42}")
	ok, err := other.TryLock(ctx, 0, 0) // one attempt, no waiting
	fmt.Println("taken while held:", ok, err)

	if err := holder.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	// Wait up to a second; a lease of 10s instead of the watchdog.
	ok, err = other.TryLock(ctx, time.Second, 10*time.Second)
	fmt.Println("taken after the unlock:", ok, err)
	if err := other.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// taken while held: false <nil>
	// taken after the unlock: true <nil>
}

// fencedStock stands for the resource a FencedMutex protects (a database
// row with a fence column, the shop's stock in Redis): it remembers the
// largest token that wrote to it and refuses writes with an older one.
type fencedStock struct {
	mu    sync.Mutex
	fence int64
	units int
}

var errStaleToken = errors.New("stale fencing token")

func (s *fencedStock) set(token int64, units int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if token < s.fence {
		return errStaleToken
	}
	s.fence, s.units = token, units
	return nil
}

// Each new holder of a FencedMutex gets a larger token. A holder that
// paused past its lease still believes it holds the lock, and its write
// comes after the next holder's: the token the write carries is what stops
// it.
func ExampleClient_FencedMutex() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	first, second := lock.New(rdb), lock.New(rdb)
	defer first.Close()
	defer second.Close()
	stock := &fencedStock{units: 10}

	paused := first.FencedMutex("stock:{sku-7}")
	if _, err := paused.TryLock(ctx, 0, 100*time.Millisecond); err != nil { // a 100ms lease, no watchdog
		log.Fatal(err)
	}
	staleToken := paused.Token()
	// ... the holder stops here (a GC pause, a SIGSTOP) past its lease ...

	next := second.FencedMutex("stock:{sku-7}")
	if _, err := next.TryLock(ctx, 5*time.Second, 0); err != nil { // granted once the lease ran out
		log.Fatal(err)
	}
	fmt.Println("the next holder's token is larger:", next.Token() > staleToken)
	fmt.Println("the next holder's write:", stock.set(next.Token(), 9))
	if err := next.Unlock(ctx); err != nil {
		log.Fatal(err)
	}

	// The paused holder wakes and writes what it read before its pause.
	fmt.Println("the paused holder's write:", stock.set(staleToken, 9))
	fmt.Println("units:", stock.units)
	// Output:
	// the next holder's token is larger: true
	// the next holder's write: <nil>
	// the paused holder's write: stale fencing token
	// units: 9
}

// A RedLock is held when a majority of independent masters granted it: one
// master that another owner holds, or that is down, does not stop it.
func ExampleNewRedLock() {
	ctx := context.Background()
	var masters []lock.Locker
	for _, addr := range redLockAddrs { // three masters, no replication between them
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		defer rdb.Close()
		locks := lock.New(rdb)
		defer locks.Close()
		masters = append(masters, locks.Mutex("payout:{batch-3}"))
	}

	// Another owner holds the lock on the third master only.
	rdb := redis.NewClient(&redis.Options{Addr: redLockAddrs[2]})
	defer rdb.Close()
	elsewhere := lock.New(rdb)
	defer elsewhere.Close()
	minority := elsewhere.Mutex("payout:{batch-3}")
	if err := minority.Lock(ctx); err != nil {
		log.Fatal(err)
	}

	rl := lock.NewRedLock(masters...)
	ok, err := rl.TryLock(ctx, time.Second, 10*time.Second) // valid for the lease minus the time it took
	fmt.Println("held on two masters of three:", ok, err)
	if err := rl.Unlock(ctx); err != nil {
		fmt.Println("unlock:", err)
	}
	if err := minority.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// held on two masters of three: true <nil>
}

// An RWMutex admits any number of readers or one writer; once a writer
// waits, new readers queue behind it.
func ExampleClient_RWMutex() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	reader1, reader2, writer := lock.New(rdb), lock.New(rdb), lock.New(rdb)
	defer reader1.Close()
	defer reader2.Close()
	defer writer.Close()

	r1 := reader1.RWMutex("catalog:{shoes}").ReadLocker()
	r2 := reader2.RWMutex("catalog:{shoes}").ReadLocker()
	w := writer.RWMutex("catalog:{shoes}").WriteLocker()

	try := func(l lock.Locker, wait time.Duration) bool {
		ok, err := l.TryLock(ctx, wait, 0)
		if err != nil {
			log.Fatal(err)
		}
		return ok
	}
	if err := r1.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("a second reader gets in:", try(r2, 0))
	fmt.Println("a writer gets in beside readers:", try(w, 0))

	for _, r := range []lock.Locker{r1, r2} {
		if err := r.Unlock(ctx); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println("the writer, once the readers left:", try(w, time.Second))
	if err := w.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// a second reader gets in: true
	// a writer gets in beside readers: false
	// the writer, once the readers left: true
}
