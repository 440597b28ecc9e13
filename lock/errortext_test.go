package lock

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// An error says the lock's name once, on one line: the exported method
// names it, the layers below add only their own context (a Redis that does
// not answer read "lock orders: lock orders: dial tcp …", then "lock
// orders: dial tcp …\nleave the queue: dial tcp …").
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
		// One line, in the library's words: no errors.Join of the
		// attempt's error and the cleanup's.
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %q spans several lines, want one", tc.kind, err)
		}
	}
}

// A socket timeout at the caller's deadline is the deadline: a go-redis
// client with ContextTimeoutEnabled fails a request with "i/o timeout" a
// moment before the context's own timer fires (seen in a loaded CI run:
// Lock returned the i/o timeout, not context.DeadlineExceeded).
func TestASocketTimeoutAtTheDeadlineIsTheDeadline(t *testing.T) {
	socket := &net.OpError{Op: "write", Net: "tcp", Err: os.ErrDeadlineExceeded}
	past, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Millisecond))
	defer cancel()
	later, cancelLater := context.WithTimeout(context.Background(), time.Hour)
	defer cancelLater()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"timeout at the deadline", past, socket, true},
		{"timeout before the deadline", later, socket, false},
		{"no deadline", context.Background(), socket, false},
		{"another error at the deadline", past, errors.New("NOSCRIPT"), false},
	} {
		err := atDeadline(tc.ctx, tc.err)
		if got := errors.Is(err, context.DeadlineExceeded); got != tc.want {
			t.Errorf("%s: %v is the deadline: %t, want %t", tc.name, err, got, tc.want)
		}
		if !errors.Is(err, tc.err) {
			t.Errorf("%s: %v lost its cause", tc.name, err)
		}
	}
}

// A name without a hash tag is wrapped in one, as the package doc and
// README.md say; a name with one is the key itself.
func TestANameWithoutAHashTagIsWrappedInOne(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = rdb.Close() })
	c := New(rdb)
	t.Cleanup(func() { _ = c.Close() })
	for name, key := range map[string]string{"orders": "{orders}", "order:{sku-1}": "order:{sku-1}"} {
		if got := c.Mutex(name).Key(); got != key {
			t.Errorf("Mutex(%q).Key() = %q, want %q", name, got, key)
		}
	}
}
