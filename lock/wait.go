package lock

import (
	"context"
	"strings"
	"time"
)

// forever stands for "no wait limit but ctx".
const forever = time.Duration(1<<63 - 1)

// waker is how a waiting owner sleeps: until an unlock is published on the
// channel it listens to, or a timer.
type waker struct {
	notify   chan struct{} // capacity 1: an unlock since the last attempt
	listener *listener
}

// newWaker returns a waker woken by unlock messages ("u", then the releasing
// owner), except those of self when it is not empty, and by the grant of the
// lock to self ("g", then self) — grants to others wake nobody.
func newWaker(self string) *waker {
	w := &waker{notify: make(chan struct{}, 1)}
	w.listener = &listener{deliver: func(payload string) {
		switch {
		case strings.HasPrefix(payload, "u") && (self == "" || payload[1:] != self),
			self != "" && strings.HasPrefix(payload, "g") && payload[1:] == self:
			select {
			case w.notify <- struct{}{}:
			default:
			}
		}
	}}
	return w
}

// sleep waits for an unlock message or d. It returns ctx's error when ctx
// ends first, and ErrClosed when the Client's life does.
func (w *waker) sleep(ctx, life context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-w.notify:
		return nil
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-life.Done():
		return context.Cause(life)
	}
}

// attemptFunc makes one acquisition attempt; waiting is false for the first
// attempt and true once the caller listens for unlocks. It reports whether
// it acquired, and otherwise how long the lock may stay held (negative:
// unknown).
type attemptFunc func(ctx context.Context, waiting bool) (acquired bool, ttl time.Duration, err error)

// waitFor runs try until it acquires, wait (measured from start on the
// monotonic clock; negative: no limit) is spent, or ctx ends. After a failed
// first attempt it subscribes to channel and only then tries again, so an
// unlock between the two attempts is never missed (Redisson #1763); after
// that it sleeps until an unlock message, the returned TTL or maxSleep,
// whichever comes first. It never polls. A waiter of a closed Client ends
// with ErrClosed. The caller unsubscribes.
func (c *Client) waitFor(ctx context.Context, w *waker, channel string, start time.Time, wait, maxSleep time.Duration, try attemptFunc) (bool, error) {
	waiting := false
	for {
		select { // an unlock before this attempt is covered by it
		case <-w.notify:
		default:
		}
		if err := context.Cause(c.life); err != nil {
			return false, err
		}
		ok, ttl, err := try(ctx, waiting)
		if ok || err != nil || wait == 0 {
			return ok, err
		}
		if !waiting {
			if err := c.subs.subscribe(ctx, channel, w.listener, true); err != nil {
				return false, err
			}
			waiting = true
			continue
		}
		left := forever
		if wait > 0 {
			left = wait - time.Since(start)
		}
		if left <= 0 {
			return false, nil
		}
		if ttl < 0 {
			ttl = forever
		}
		if err := w.sleep(ctx, c.life, min(ttl, left, maxSleep)); err != nil {
			return false, err
		}
	}
}
