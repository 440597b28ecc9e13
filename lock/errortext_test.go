package lock

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// An error says the lock's name once: the exported method names it, the
// layers below add only their own context (a Redis that does not answer
// read "lock orders: lock orders: dial tcp …").
func TestErrorsNameTheLockOnce(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	c := New(rdb)
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	const name = "errtext-orders"
	for _, tc := range []struct {
		kind string
		lock Locker
	}{
		{"mutex", c.Mutex(name)},
		{"fair", c.FairMutex(name)},
		{"fenced", c.FencedMutex(name)},
		{"write", c.RWMutex(name).WriteLocker()},
	} {
		_, err := tc.lock.TryLock(ctx, 0, 0)
		if err == nil {
			t.Fatalf("%s: TryLock against no Redis succeeded", tc.kind)
		}
		if n := strings.Count(err.Error(), name); n != 1 {
			t.Errorf("%s: %q names the lock %d times, want once", tc.kind, err, n)
		}
	}
}
