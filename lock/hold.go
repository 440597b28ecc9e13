package lock

import (
	"context"
	"sync/atomic"
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

// newHold starts a hold acquired by a request sent at sent. Both kinds of
// hold end with ErrLockLost, and call lost, the moment the lock may have
// expired in Redis: a lease hold when its lease runs out, a watchdog hold
// when a whole lease passed since the last renewal Redis confirmed — by a
// timer, whatever a renewal still in flight is doing. A watchdog hold is
// renewed every timeout/3 until it ends.
//
// Neither costs a goroutine while nothing is due: both run on timers, and
// each timer callback registers with the Client so that Close waits for it.
func (c *Client) newHold(name string, sent time.Time, lease time.Duration, renew func(context.Context) (bool, error), lost func(*hold)) *hold {
	ctx, cancel := context.WithCancelCause(c.life)
	h := &hold{lease: lease, ctx: ctx}
	var renewal *time.Timer
	if lease <= 0 {
		h.lease, h.watchdog = c.opts.watchdogTimeout, true
	}
	expiry := time.AfterFunc(time.Until(sent.Add(h.lease)), func() {
		if c.startTask() {
			defer c.goroutines.Done()
			if h.ctx.Err() == nil {
				cancel(ErrLockLost)
				lost(h)
			}
		}
	})
	if h.watchdog {
		w := &watchdog{c: c, name: name, h: h, expires: sent.Add(h.lease), expiry: expiry, renew: renew, lost: lost}
		renewal = time.AfterFunc(forever, w.tick)
		w.timer.Store(renewal) // before it can fire
		renewal.Reset(h.lease / 3)
	}
	h.end = func(cause error) {
		cancel(cause)
		expiry.Stop()
		if renewal != nil {
			renewal.Stop()
		}
	}
	return h
}

func (h *hold) alive() bool { return h != nil && h.ctx.Err() == nil }

// watchdog renews a hold until it ends. A renewal that finds the lock gone
// ends the hold at once; renewals that fail on Redis errors are retried until
// the lock would have expired, and then the hold ends too: its holder is told
// the moment it can no longer be sure it holds the lock.
type watchdog struct {
	c       *Client
	name    string
	h       *hold
	expires time.Time   // the lock is certainly held until then
	expiry  *time.Timer // ends the hold at expires
	renew   func(context.Context) (bool, error)
	lost    func(*hold)
	timer   atomic.Pointer[time.Timer]
}

func (w *watchdog) tick() {
	c, h := w.c, w.h
	if h.ctx.Err() != nil || !c.startTask() {
		return
	}
	defer c.goroutines.Done()
	sent := time.Now()
	ctx, cancel := context.WithDeadline(h.ctx, w.expires)
	renewed, err := w.renew(ctx)
	cancel()
	if h.ctx.Err() != nil {
		// Released or closed while the renewal was in flight: whatever it
		// found says nothing about the next holder (Redisson #7272).
		return
	}
	switch {
	case err == nil && renewed:
		w.expires = sent.Add(h.lease)
		w.expiry.Reset(time.Until(w.expires))
		c.renewalObserved(w.name, nil)
		w.timer.Load().Reset(h.lease / 3)
	case err == nil:
		c.renewalObserved(w.name, ErrLockLost)
		h.end(ErrLockLost)
		w.lost(h)
	default:
		c.renewalObserved(w.name, err)
		left := time.Until(w.expires)
		if left <= 0 {
			h.end(ErrLockLost)
			w.lost(h)
			return
		}
		w.timer.Load().Reset(min(renewRetry, left))
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
