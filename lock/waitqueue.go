package lock

import (
	"strconv"
	"sync"
)

// waitQueues are a Client's waiters on its semaphores, in arrival order
// per channel. The semaphores' scripts publish how many permits are free
// after they gave some back ("u<n>"), and a message wakes only the waiters
// those permits serve, first come first, rather than every waiter (which
// made each release cost a try per waiter: a contended acquisition took
// five times a Redis list pool's). Every Client of the semaphore wakes its
// own share, so some woken waiters find the permits taken by another
// Client's and sleep again; none sleeps while permits it fits are free:
//   - a woken waiter that finds fewer permits than it needs, but some,
//     offers them to the waiters behind it (offer);
//   - a waiter that leaves with a wake it did not use (it acquired with an
//     earlier try, its wait or ctx ended) passes its share on (leave);
//   - a message without a number ("u": a subscription confirmed again
//     after its connection failed) wakes every waiter.
//
// An offer wakes only waiters needing no more than the permits the failed
// try saw, and each of their tries either takes or sees fewer: offers
// shrink and end, they cannot bounce between waiters.
type waitQueues struct {
	c      *Client
	mu     sync.Mutex
	queues map[string]*waitQueue
}

// waitQueue is the waiters of one channel on one Client, sharing one
// listener on the Client's pub/sub connection.
type waitQueue struct {
	listener *listener
	waiters  []*queuedWaiter // arrival order
}

// queuedWaiter is one waiting acquisition: the permits it needs, and its
// waker's channel (capacity 1: a wake not yet used by a try).
type queuedWaiter struct {
	need   int
	notify chan struct{}
}

func (w *waitQueues) init(c *Client) {
	w.c = c
	w.queues = make(map[string]*waitQueue)
}

// join queues a waiter needing need permits on channel and returns it and
// the waker to wait with: its listener is the queue's, which the wait
// subscribes (a no-op when another waiter of the queue did).
func (w *waitQueues) join(channel string, need int) (*queuedWaiter, waker) {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queues[channel]
	if q == nil {
		q = &waitQueue{}
		q.listener = &listener{deliver: func(payload string) { w.deliver(q, payload) }}
		w.queues[channel] = q
	}
	qw := &queuedWaiter{need: need, notify: make(chan struct{}, 1)}
	q.waiters = append(q.waiters, qw)
	return qw, waker{notify: qw.notify, listener: q.listener}
}

// leave takes qw out of channel's queue, the last one out unsubscribing
// it. A wake qw did not use goes to the waiters behind it.
func (w *waitQueues) leave(channel string, qw *queuedWaiter) {
	w.mu.Lock()
	q := w.queues[channel]
	if q == nil {
		w.mu.Unlock()
		return
	}
	for i, other := range q.waiters {
		if other == qw {
			q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
			break
		}
	}
	empty := len(q.waiters) == 0
	if empty {
		delete(w.queues, channel)
	} else {
		select {
		case <-qw.notify:
			w.offerLocked(q, qw.need)
		default:
		}
	}
	w.mu.Unlock()
	if empty {
		// A waiter joining now makes a queue of its own, with a listener
		// of its own, which this does not remove.
		w.c.subs.unsubscribe(channel, q.listener)
	}
}

// offer wakes the waiters of channel that free permits serve, first come
// first; a waiter whose try saw them calls it.
func (w *waitQueues) offer(channel string, free int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if q := w.queues[channel]; q != nil {
		w.offerLocked(q, free)
	}
}

// deliver is a message on q's channel: "u<n>", n permits free, or "u",
// wake all.
func (w *waitQueues) deliver(q *waitQueue, payload string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	free, err := strconv.Atoi(payload[min(len(payload), 1):])
	if err != nil {
		free = -1
	}
	w.offerLocked(q, free)
}

// offerLocked wakes, in arrival order, each waiter needing no more than
// the free permits not already given to one before it; free < 0 wakes all.
// A waiter awake already (its wake unused, or trying) counts: it will try.
func (w *waitQueues) offerLocked(q *waitQueue, free int) {
	for _, qw := range q.waiters {
		if free >= 0 {
			if free < 1 {
				return
			}
			if qw.need > free {
				continue
			}
			free -= qw.need
		}
		select {
		case qw.notify <- struct{}{}:
		default:
		}
	}
}
