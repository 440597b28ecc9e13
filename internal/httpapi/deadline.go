package httpapi

import (
	"context"
	"sync"
	"time"
)

// withLazyTimeout is context.WithTimeout(parent, timeout), except that the
// timer, and the registration with parent that comes with it, are set up
// only when something first asks for Done, or for Err once it is not nil. Most deducts never ask
// (atomic's is one script under the Redis client's own timeouts), and for
// them the two were a measurable share of the request's CPU.
//
// Until then Value reads parent's values, so context.Cause, which reads one
// of them, is nil unless parent was canceled; read after Done closed, as it
// should be, it gives what WithTimeout's would. Its cancel func is the
// method cancel, not a func value that would cost another allocation.
func withLazyTimeout(parent context.Context, timeout time.Duration) *lazyDeadline {
	return &lazyDeadline{parent: parent, deadline: time.Now().Add(timeout)}
}

type lazyDeadline struct {
	parent   context.Context
	deadline time.Time

	mu       sync.Mutex
	timed    context.Context // nil until Done or Err was asked for
	stop     context.CancelFunc
	canceled bool
}

// started returns the context that does the work, creating it on first
// use: bounded by the deadline, or already canceled when cancel came
// first.
func (c *lazyDeadline) started() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.timed == nil {
		if c.canceled {
			// Canceled before anyone waited: a canceled context that keeps
			// parent's values, with no timer and no registration.
			c.timed, c.stop = context.WithCancel(context.WithoutCancel(c.parent))
			c.stop()
		} else {
			c.timed, c.stop = context.WithDeadline(c.parent, c.deadline)
		}
	}
	return c.timed
}

// cancel is the context's CancelFunc.
func (c *lazyDeadline) cancel() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.canceled = true
	if c.timed != nil {
		c.stop()
	}
}

func (c *lazyDeadline) Deadline() (time.Time, bool) {
	if d, ok := c.parent.Deadline(); ok && d.Before(c.deadline) {
		return d, true
	}
	return c.deadline, true
}

func (c *lazyDeadline) Done() <-chan struct{} { return c.started().Done() }

// Err answers nil without setting anything up while the parent lives and
// the deadline is ahead: what the timed context would answer, and what a
// sale's last check before its stock write asks on every deduct.
func (c *lazyDeadline) Err() error {
	c.mu.Lock()
	idle := c.timed == nil && !c.canceled
	c.mu.Unlock()
	if idle && c.parent.Err() == nil && time.Now().Before(c.deadline) {
		return nil
	}
	return c.started().Err()
}

func (c *lazyDeadline) Value(key any) any {
	c.mu.Lock()
	timed := c.timed
	c.mu.Unlock()
	if timed != nil {
		return timed.Value(key)
	}
	return c.parent.Value(key)
}
