package lock

import (
	"context"
	"time"
)

// hold is one acquisition of a lock in Redis by a Client, from the moment the
// acquire script was sent until it is released or lost. Its context ends with
// the hold: cause ErrReleased, ErrLockLost or ErrClosed.
type hold struct {
	lease    time.Duration // the TTL written to Redis: the caller's lease, or the watchdog timeout
	watchdog bool          // renewed by a watchdog until released
	ctx      context.Context
	end      context.CancelCauseFunc
}

// newHold starts a hold acquired by a request sent at sent. A lease hold
// ends by itself when the lease runs out; a watchdog hold is renewed by renew
// every timeout/3 until it ends. When the hold ends because the lock was lost,
// lost is called with it (on a goroutine of the hold's).
func (c *Client) newHold(name string, sent time.Time, lease time.Duration, renew func(context.Context) (bool, error), lost func(*hold)) *hold {
	ctx, cancel := context.WithCancelCause(c.life)
	if lease > 0 {
		h := &hold{lease: lease, ctx: ctx}
		expiry := time.AfterFunc(time.Until(sent.Add(lease)), func() {
			cancel(ErrLockLost)
			lost(h)
		})
		h.end = func(cause error) { expiry.Stop(); cancel(cause) }
		return h
	}
	h := &hold{lease: c.opts.watchdogTimeout, watchdog: true, ctx: ctx, end: cancel}
	c.goroutines.Add(1)
	go c.watchdog(name, h, sent, renew, lost)
	return h
}

func (h *hold) alive() bool { return h != nil && h.ctx.Err() == nil }

// watchdog renews h until it ends. A renewal that finds the lock gone ends
// the hold at once; renewals that fail on Redis errors are retried until the
// lock would have expired, and then the hold ends too: its holder is told the
// moment it can no longer be sure it holds the lock.
func (c *Client) watchdog(name string, h *hold, sent time.Time, renew func(context.Context) (bool, error), lost func(*hold)) {
	defer c.goroutines.Done()
	expires := sent.Add(h.lease)
	interval := h.lease / 3
	timer := time.NewTimer(interval)
	defer timer.Stop()
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-timer.C:
		}
		sent := time.Now()
		ctx, cancel := context.WithDeadline(h.ctx, expires)
		renewed, err := renew(ctx)
		cancel()
		if h.ctx.Err() != nil {
			// Released or closed while the renewal was in flight: whatever
			// it found says nothing about the next holder (Redisson #7272).
			return
		}
		switch {
		case err == nil && renewed:
			expires = sent.Add(h.lease)
			c.renewalObserved(name, nil)
			timer.Reset(interval)
		case err == nil:
			c.renewalObserved(name, ErrLockLost)
			h.end(ErrLockLost)
			lost(h)
			return
		default:
			c.renewalObserved(name, err)
			left := time.Until(expires)
			if left <= 0 {
				h.end(ErrLockLost)
				lost(h)
				return
			}
			timer.Reset(min(renewRetry, left))
		}
	}
}

// heldContext gives a holder a context that ends with h, synchronously, or
// when release is called, and carries ctx's values.
func heldContext(ctx context.Context, h *hold) (context.Context, func(cause error)) {
	held, cancel := context.WithCancelCause(h.ctx)
	return valuesFrom{Context: held, values: ctx}, cancel
}

// valuesFrom is a context whose cancellation comes from its own chain and
// whose values, past those of its chain (which holds none of the caller's),
// come from another context.
type valuesFrom struct {
	context.Context
	values context.Context
}

func (v valuesFrom) Value(key any) any {
	if val := v.Context.Value(key); val != nil {
		return val
	}
	return v.values.Value(key)
}
