package lock

import (
	"context"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/redistest"
)

// Remaining tells how long a hold is certainly held: at most its lease
// from the acquisition, still more than nothing after a watchdog lock
// outlived its timeout (renewals moved it on), read through a context
// derived from the held one, 0 once released, and nothing for a context
// that holds no lock.
func TestRemainingFollowsTheHold(t *testing.T) {
	srv := redistest.Start(t)
	const watchdog = time.Second
	c := newClient(t, srv, WithWatchdogTimeout(watchdog))
	ctx := ctxTimeout(t, 30*time.Second)
	type key struct{}
	a, b, fair := c.Mutex("remaining-a"), c.Mutex("remaining-b"), c.FairMutex("remaining-c")
	locks := []struct {
		name    string
		lock    func(context.Context, time.Duration, time.Duration) (context.Context, bool, error)
		unlock  func(context.Context) error
		lease   time.Duration
		renewed bool
	}{
		{"Mutex with the watchdog", a.TryLockContext, a.Unlock, 0, true},
		{"Mutex with a lease", b.TryLockContext, b.Unlock, 2 * time.Second, false},
		{"FairMutex with the watchdog", fair.TryLockContext, fair.Unlock, 0, true},
	}
	for _, l := range locks {
		t.Run(l.name, func(t *testing.T) {
			held, ok, err := l.lock(ctx, 0, l.lease)
			if err != nil || !ok {
				t.Fatalf("lock: %v, %v", ok, err)
			}
			want := max(l.lease, watchdog)
			if left, ok := Remaining(context.WithValue(held, key{}, 1)); !ok || left <= 0 || left > want {
				t.Fatalf("right after the lock: Remaining = %v, %v; want (0, %v]", left, ok, want)
			}
			if l.renewed {
				time.Sleep(watchdog * 3 / 2)
				if left, ok := Remaining(held); held.Err() == nil && (!ok || left <= 0) {
					t.Fatalf("after the watchdog timeout, still held: Remaining = %v, %v; want more than nothing", left, ok)
				}
			}
			if err := l.unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if left, ok := Remaining(held); !ok || left != 0 {
				t.Fatalf("after the unlock: Remaining = %v, %v; want 0, true", left, ok)
			}
		})
	}
	if left, ok := Remaining(ctx); ok {
		t.Fatalf("a context that holds no lock: Remaining = %v, true", left)
	}
}
