package lock

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// hold is one acquisition of a lock in Redis by a Client, from the moment the
// acquire script was sent until it is released or lost. It ends with a
// cause: ErrReleased, ErrLockLost, or ErrClosed when its Client closes.
type hold struct {
	c        *Client
	name     string
	owner    holdOwner
	token    string        // names this hold in Redis (see doc.go, "Unknown outcomes")
	lease    time.Duration // the TTL written to Redis: the caller's lease, or the watchdog timeout
	watchdog bool          // renewed by a watchdog until released
	ended    atomic.Bool   // cause is set

	// The context that ends with the hold is made only for its renewals:
	// a Lock+Unlock needs none, and one costs allocations and a
	// registration with the Client's life.
	mu     sync.Mutex
	cause  error // guarded by mu
	ctx    context.Context
	cancel context.CancelCauseFunc

	// A lease hold's: ends it when the lease runs out, at deadline (guarded
	// by mu), which a reentrant level with a longer lease moves on.
	expiry   *time.Timer
	deadline time.Time

	// certain is when the lock may expire in Redis (unix nanoseconds),
	// for Remaining: the deadline of a lease hold, the expiry of a
	// watchdog hold, moved on by the same events that move them.
	certain atomic.Int64

	// A watchdog hold's. expires is its renewals' (one at a time); the
	// rest is guarded by the Client's renewalQueue.
	expires    time.Time // the lock is certainly held until then
	due        time.Time // the next renewal, while queued
	prev, next *hold
	queued     bool
}

// holdOwner is the lock a hold belongs to.
type holdOwner interface {
	// renew extends h in Redis; false when the lock no longer holds h.
	renew(ctx context.Context, h *hold) (bool, error)
	// evict forgets a hold that was lost.
	evict(h *hold)
}

// newHold starts the hold named token, acquired by a request sent at sent. Both kinds of
// hold end with ErrLockLost, and are evicted from their owner, the moment the
// lock may have expired in Redis: a lease hold when its lease runs out, a
// watchdog hold when a whole lease passed since the last renewal Redis
// confirmed — by a timer, whatever a renewal still in flight is doing. A
// watchdog hold is renewed every timeout/3 until it ends.
//
// Neither costs a goroutine while nothing is due: a lease hold has a timer,
// and watchdog holds wait in the Client's renewalQueue, which costs them no
// timer of their own until they are renewed. Timer callbacks register with
// the Client so that Close waits for them.
func (c *Client) newHold(name, token string, sent time.Time, lease time.Duration, owner holdOwner) *hold {
	h := &hold{c: c, name: name, owner: owner, token: token, lease: lease}
	if lease > 0 {
		h.deadline = sent.Add(lease)
		h.certain.Store(h.deadline.UnixNano())
		h.expiry = time.AfterFunc(time.Until(h.deadline), h.expire)
		return h
	}
	h.lease, h.watchdog = c.opts.watchdogTimeout, true
	h.expires = sent.Add(h.lease)
	h.certain.Store(h.expires.UnixNano())
	c.renewals.add(h)
	return h
}

func (h *hold) alive() bool { return h != nil && !h.ended.Load() && h.c.life.Err() == nil }

// finish ends the hold with cause unless it already ended (its Client's
// closing ends it too); it reports whether this call ended it.
func (h *hold) finish(cause error) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cause != nil || h.c.life.Err() != nil {
		return false
	}
	h.cause = cause
	h.ended.Store(true)
	if h.cancel != nil {
		h.cancel(cause)
	}
	return true
}

// endCause is why the hold ended; nil while it lasts.
func (h *hold) endCause() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cause != nil {
		return h.cause
	}
	return context.Cause(h.c.life)
}

// context returns a context that ends with the hold, with its cause.
func (h *hold) context() context.Context {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ctx == nil {
		h.ctx, h.cancel = context.WithCancelCause(h.c.life)
		if h.cause != nil {
			h.cancel(h.cause)
		}
	}
	return h.ctx
}

// extend follows a reentrant level sent at sent with lease ttl: the
// acquisition scripts never shorten a lock, so a lease hold now lasts until
// sent+ttl if that is later; a watchdog hold keeps its renewals. It reports
// false when the hold has ended or is ending.
func (h *hold) extend(sent time.Time, ttl time.Duration) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cause != nil || h.c.life.Err() != nil {
		return false
	}
	if h.watchdog || !sent.Add(ttl).After(h.deadline) {
		return true
	}
	if !h.expiry.Stop() {
		return false // expiring: the timer's callback waits for mu
	}
	h.deadline = sent.Add(ttl)
	h.certain.Store(h.deadline.UnixNano())
	h.expiry.Reset(time.Until(h.deadline))
	return true
}

// end ends the hold with cause and stops what would renew or expire it.
func (h *hold) end(cause error) {
	h.finish(cause)
	if h.watchdog {
		h.c.renewals.remove(h)
	} else {
		h.expiry.Stop()
	}
}

// lose ends the hold with ErrLockLost and evicts it, unless it already ended.
// It runs from the timer that expired the hold or from its renewal, so there
// is no timer to stop and no queued renewal to remove.
func (h *hold) lose() {
	if h.finish(ErrLockLost) {
		h.owner.evict(h)
	}
}

// expire is the callback of the timers that end a hold at its expiry.
func (h *hold) expire() {
	if h.c.startTask() {
		defer h.c.goroutines.Done()
		h.lose()
	}
}

// renew is a watchdog renewal, run on a goroutine of its own registered with
// the Client. A renewal that finds the lock gone ends the hold at once;
// renewals that fail on Redis errors are retried until the lock would have
// expired, and then the hold ends too: its holder is told the moment it can
// no longer be sure it holds the lock.
func (h *hold) renew() {
	c := h.c
	defer c.goroutines.Done()
	if !h.alive() {
		return
	}
	if !time.Now().Before(h.expires) {
		h.lose()
		return
	}
	sent := time.Now()
	// The renewal may outlive ctx's deadline (go-redis does not bound socket
	// I/O by it unless told to): this timer ends the hold at its expiry
	// whatever the call does.
	expiry := time.AfterFunc(time.Until(h.expires), h.expire)
	ctx, cancel := context.WithDeadline(h.context(), h.expires)
	renewed, err := h.owner.renew(ctx, h)
	cancel()
	expiry.Stop()
	if !h.alive() {
		// Released, closed or expired while the renewal was in flight:
		// whatever it found says nothing about the next holder (Redisson #7272).
		return
	}
	switch {
	case err == nil && renewed:
		h.expires = sent.Add(h.lease)
		h.certain.Store(h.expires.UnixNano())
		c.renewalObserved(h.name, nil)
		c.renewals.add(h)
	case err == nil:
		c.renewalObserved(h.name, ErrLockLost)
		h.lose()
	default:
		c.renewalObserved(h.name, err)
		// The retry runs by the expiry at the latest, and ends the hold then.
		time.AfterFunc(min(renewRetry, time.Until(h.expires)), func() {
			if c.startTask() {
				h.renew()
			}
		})
	}
}

// renewalQueue holds a Client's watchdog holds until their next renewal.
// They all renew at the same interval (the watchdog timeout / 3) after they
// were acquired or last renewed, so the queue is in order of due time and one
// timer, armed for its head, serves them all. Adding or removing a hold
// touches no timer: the timer is re-armed only when it fires, skipping the
// holds that ended meanwhile. A timer set and stopped per hold would cost
// every Lock+Unlock a wake-up of Go's network poller, 1–2 µs.
type renewalQueue struct {
	c          *Client
	interval   time.Duration
	mu         sync.Mutex
	head, tail *hold
	timer      *time.Timer // created on first use
	armed      bool        // timer will fire
	stopped    bool        // the Client is closed
}

func (q *renewalQueue) init(c *Client) {
	q.c, q.interval = c, c.opts.watchdogTimeout/3
}

// add queues h for a renewal one interval from now, unless h has ended.
func (q *renewalQueue) add(h *hold) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.stopped || !h.alive() {
		return
	}
	h.due = time.Now().Add(q.interval)
	h.prev, h.next, h.queued = q.tail, nil, true
	if q.tail != nil {
		q.tail.next = h
	} else {
		q.head = h
	}
	q.tail = h
	// When armed, the timer fires at or before h.due: it was armed for
	// an earlier hold, and every hold waits the same interval.
	if !q.armed {
		q.armed = true
		if q.timer == nil {
			q.timer = time.AfterFunc(q.interval, q.fire)
		} else {
			q.timer.Reset(q.interval)
		}
	}
}

// remove takes h out of the queue if it is in it.
func (q *renewalQueue) remove(h *hold) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if h.queued {
		q.unlinkLocked(h)
	}
}

func (q *renewalQueue) unlinkLocked(h *hold) {
	if h.prev != nil {
		h.prev.next = h.next
	} else {
		q.head = h.next
	}
	if h.next != nil {
		h.next.prev = h.prev
	} else {
		q.tail = h.prev
	}
	h.prev, h.next, h.queued = nil, nil, false
}

// fire starts the renewals that are due and re-arms the timer for the next.
func (q *renewalQueue) fire() {
	now := time.Now()
	var due []*hold
	q.mu.Lock()
	for q.head != nil && !q.head.due.After(now) {
		h := q.head
		q.unlinkLocked(h)
		due = append(due, h)
	}
	q.armed = q.head != nil && !q.stopped
	if q.armed {
		q.timer.Reset(q.head.due.Sub(now))
	}
	q.mu.Unlock()
	for _, h := range due {
		if q.c.startTask() {
			go h.renew()
		}
	}
}

// stop ends the queue when its Client is closed: its holds ended with it.
func (q *renewalQueue) stop() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.stopped, q.armed = true, false
	if q.timer != nil {
		q.timer.Stop()
	}
}

// heldContext gives the holder of h a context that carries ctx's values
// and ends with ErrClosed when c closes. The lock that made it ends it with
// the hold: at release, and at eviction after a loss, under the mutex it
// was made under, so that no loss goes untold.
func heldContext(ctx context.Context, c *Client, h *hold) (context.Context, func(cause error)) {
	held, cancel := context.WithCancelCause(c.life)
	return valuesFrom{Context: held, values: ctx, hold: h}, cancel
}

// releaseCause is the cause a held context ends with at its holder's
// release: ErrReleased, unless the hold ended first (its eviction may be
// waiting for the mutex the release holds).
func releaseCause(h *hold) error {
	if h.alive() {
		return ErrReleased
	}
	return h.endCause()
}

// endedContext is a held context for a hold that already ended with cause.
func endedContext(ctx context.Context, cause error) context.Context {
	held, cancel := context.WithCancelCause(context.Background())
	cancel(cause)
	return valuesFrom{Context: held, values: ctx}
}

// valuesFrom is a context whose cancellation comes from its own chain and
// whose values, past those of its chain (which holds none of the caller's),
// come from another context.
type valuesFrom struct {
	context.Context
	values context.Context
	hold   *hold // the hold a held context ends with (Remaining); nil once ended
}

func (v valuesFrom) Value(key any) any {
	if _, ok := key.(holdKey); ok && v.hold != nil {
		return v.hold
	}
	if val := v.Context.Value(key); val != nil {
		return val
	}
	return v.values.Value(key)
}
