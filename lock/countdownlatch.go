package lock

import (
	"context"
	"fmt"
	"time"
)

// CountDownLatch is Redisson's RCountDownLatch: a count in Redis that any
// process counts down, and that waiters wait to reach zero, woken on the
// Client's shared pub/sub connection when it does.
type CountDownLatch struct {
	k counter
}

// CountDownLatch returns a handle on the latch called name, which keys as
// a lock's name does (doc.go, "Keys").
func (c *Client) CountDownLatch(name string) *CountDownLatch {
	return &CountDownLatch{k: newCounter(c, name)}
}

// TrySetCount sets the count to n unless the latch exists (its count is
// not zero yet), and reports whether it did.
func (l *CountDownLatch) TrySetCount(ctx context.Context, n int) (bool, error) {
	ok, err := l.k.trySet(ctx, n)
	if err != nil {
		return false, fmt.Errorf("lock: set the count of latch %q: %w", l.k.name, err)
	}
	return ok, nil
}

// CountDown counts the latch down by one; at zero it wakes the waiters.
// A request go-redis sends again counts once.
func (l *CountDownLatch) CountDown(ctx context.Context) error {
	if err := l.k.call(ctx, countDownScript, 0).Err(); err != nil {
		return fmt.Errorf("lock: count latch %q down: %w", l.k.name, err)
	}
	return nil
}

// Count is the count left: 0 once it reached zero, or was never set.
func (l *CountDownLatch) Count(ctx context.Context) (int, error) {
	n, err := l.k.get(ctx)
	if err != nil {
		return 0, fmt.Errorf("lock: read latch %q: %w", l.k.name, err)
	}
	return max(n, 0), nil
}

// Await waits until the count is zero or ctx ends.
func (l *CountDownLatch) Await(ctx context.Context) error {
	_, err := l.TryAwait(ctx, -1)
	return err
}

// TryAwait waits up to wait (0: no wait; negative: until ctx ends) for the
// count to be zero, and reports whether it is.
func (l *CountDownLatch) TryAwait(ctx context.Context, wait time.Duration) (bool, error) {
	c := l.k.c
	w := newWaker("")
	defer c.subs.unsubscribe(l.k.channel, w.listener)
	zero, err := c.waitFor(ctx, w, l.k.channel, time.Now(), wait, forever, func(ctx context.Context, _ bool) (bool, time.Duration, error) {
		n, err := l.k.get(ctx)
		return n <= 0, -1, err
	})
	if err != nil {
		return false, fmt.Errorf("lock: await latch %q: %w", l.k.name, err)
	}
	return zero, nil
}
