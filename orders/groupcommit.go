package orders

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"
)

const (
	// maxGroup bounds the orders of one group commit.
	maxGroup = 64
	// groupsInFlight bounds the batches on the wire at once. A batch goes
	// out when none is on the wire, or when as many orders queued as the
	// last batch took (mayGo): so 32 concurrent sales keep two batches
	// of about 16 in the database where one batch on the wire held only
	// the half of them that was not running its script. More batches in
	// flight, each going as soon as a slot was free, cut the same sales
	// into smaller batches and more commits: with 32 sales of
	// one-per-user-lua on this 2-core machine one batch in flight made
	// batches of 16 orders (5.1-7.4 k orders/s), two of 10 (3.8-6.0 k/s),
	// four of 6.5 (6.1-6.3 k/s), eight of 5 (3.7-5.0 k/s): MariaDB's
	// commit, not the wire, sets the pace, and bigger batches share it.
	groupsInFlight = 2
	// groupTimeout bounds a batch none of whose sales has a deadline.
	groupTimeout = 10 * time.Second
	// yieldBelow is the queue length under which the sender lets the
	// goroutines ready to run (sales about to insert) go first, so that
	// they join this batch rather than the next.
	yieldBelow = 8
)

// BatchStore is a Store that also writes many orders in one transaction
// (SQLStore).
type BatchStore interface {
	Store
	InsertBatch(ctx context.Context, os []Order, deadlines []time.Time) error
}

// GroupCommit is a Store whose Insert writes the orders of concurrent
// sales together: what queued while a batch was on the wire goes out as
// one InsertBatch (one multi-row INSERT, one commit) per stage, SKU and
// round, up to maxGroup orders, once the batch is done or as many orders
// queued as it took, two batches on the wire at most. Each Insert answers only once its own row committed, and with its
// own outcome:
//
//   - the batch committed: nil;
//   - the batch was refused (ErrBatchRefused: a duplicate buyer, a void
//     id, a refused row; nothing written): each sale inserts its order on
//     its own, so the duplicate buyer is refused alone and the others land;
//     a stale round refuses them all (ErrStaleRound) without that;
//   - the batch's reply was lost (ErrUnavailable): each sale gets that
//     error, as a one-row Insert whose reply was lost, and the seller
//     resolves its order by id (Void: ErrOrdered if the batch landed);
//   - the sale's ctx ended while its order was queued: its order is taken
//     out and never sent (ErrUnavailable, nothing written); while its
//     batch was on the wire: ErrUnavailable, outcome unknown, as above.
//
// A batch that commits late, after some of its sales gave up and voided
// their ids, meets the void rows: it is refused, and the sales still
// waiting insert their orders on their own. Every other call goes straight
// to the store. Close stops the sender once the queued orders are written.
type GroupCommit struct {
	BatchStore
	wake  chan struct{}
	slots chan struct{}
	stop  chan struct{}
	done  sync.WaitGroup

	mu    sync.Mutex
	queue []*queuedInsert
	// lastBatch is how many orders the last batch sent took.
	lastBatch int
	closed    bool
}

// queuedInsert is one sale's order; mu guards taken and withdrawn.
type queuedInsert struct {
	ctx   context.Context
	order Order
	// answer gets one value: the batch's outcome for this order, or
	// errAlone.
	answer    chan error
	taken     bool
	withdrawn bool
}

// errAlone tells a sale its batch was refused: it inserts its order on
// its own.
var errAlone = errors.New("orders: group commit: insert alone")

// NewGroupCommit starts the sender of s's group commits; Close stops it
// and closes s.
func NewGroupCommit(s BatchStore) *GroupCommit {
	g := &GroupCommit{BatchStore: s, wake: make(chan struct{}, 1), slots: make(chan struct{}, groupsInFlight), stop: make(chan struct{})}
	g.done.Go(g.send)
	return g
}

// Insert queues o for the next batch and waits for its outcome.
func (g *GroupCommit) Insert(ctx context.Context, o Order) error {
	q := &queuedInsert{ctx: ctx, order: o, answer: make(chan error, 1)}
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return g.BatchStore.Insert(ctx, o)
	}
	g.queue = append(g.queue, q)
	g.mu.Unlock()
	select {
	case g.wake <- struct{}{}:
	default:
	}
	var err error
	select {
	case err = <-q.answer:
	case <-ctx.Done():
		if err = g.withdraw(q); err != nil {
			return err
		}
		err = <-q.answer
	}
	if errors.Is(err, errAlone) {
		return g.BatchStore.Insert(ctx, o)
	}
	return err
}

// withdraw takes q, whose sale's ctx ended, out of the queue; once its
// batch is on the wire its outcome is unknown, unless it came already
// (then nil: read the answer).
func (g *GroupCommit) withdraw(q *queuedInsert) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !q.taken {
		q.withdrawn = true
		return fmt.Errorf("orders: group commit: order %s not sent: %w: %w", q.order.ID, ErrUnavailable, q.ctx.Err())
	}
	if len(q.answer) > 0 {
		return nil
	}
	return fmt.Errorf("orders: group commit: order %s: %w: its batch is on the wire, outcome unknown: %w", q.order.ID, ErrUnavailable, q.ctx.Err())
}

// Close writes the queued orders, stops the sender and closes the store;
// later inserts go to the store one by one.
func (g *GroupCommit) Close() error {
	g.mu.Lock()
	already := g.closed
	g.closed = true
	g.mu.Unlock()
	if !already {
		close(g.stop)
	}
	g.done.Wait()
	return g.BatchStore.Close()
}

// send takes what queued whenever a batch slot is free, until Close.
func (g *GroupCommit) send() {
	for {
		select {
		case <-g.wake:
		case <-g.stop:
			g.sendQueued(true)
			return
		}
		g.sendQueued(false)
	}
}

// sendQueued sends batches while one may go (mayGo); draining, at Close,
// until the queue is empty.
func (g *GroupCommit) sendQueued(draining bool) {
	for g.mayGo(draining) {
		g.slots <- struct{}{}
		// A short queue gets one chance to grow, as redisbatch's does.
		g.mu.Lock()
		short := len(g.queue) < yieldBelow
		g.mu.Unlock()
		if short {
			runtime.Gosched()
		}
		groups := g.take()
		if len(groups) == 0 {
			<-g.slots
			return
		}
		for i, group := range groups {
			if i > 0 {
				g.slots <- struct{}{}
			}
			g.done.Go(func() {
				defer g.finished()
				g.commit(group)
			})
		}
	}
}

// mayGo reports whether a batch may go out now: orders are queued, and
// either no batch is on the wire, or a slot is free and as many orders
// queued as the last batch took. A smaller queue waits for the batch on
// the wire or for more sales: two small batches cost two commits where
// one does. Draining, any queue goes, as soon as a slot is free: nothing
// will come to grow it.
func (g *GroupCommit) mayGo(draining bool) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch onWire := len(g.slots); {
	case len(g.queue) == 0:
		return false
	case draining:
		return true
	case onWire >= cap(g.slots):
		return false
	case onWire == 0:
		return true
	}
	return len(g.queue) >= g.lastBatch
}

// finished frees a batch's slot and wakes the sender: what queued
// meanwhile may go now.
func (g *GroupCommit) finished() {
	<-g.slots
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// groupKey is what one InsertBatch's orders share.
type groupKey struct {
	stage, sku string
	round      int64
}

// take marks up to maxGroup queued orders taken and groups them by stage,
// SKU and round, in queue order; withdrawn ones are dropped.
func (g *GroupCommit) take() [][]*queuedInsert {
	g.mu.Lock()
	defer g.mu.Unlock()
	var groups [][]*queuedInsert
	index := map[groupKey]int{}
	n := 0
	for n < len(g.queue) && n < maxGroup {
		q := g.queue[n]
		n++
		if q.withdrawn {
			continue
		}
		q.taken = true
		k := groupKey{q.order.Stage, q.order.SKU, q.order.Round}
		i, ok := index[k]
		if !ok {
			i = len(groups)
			index[k] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], q)
	}
	clear(g.queue[:n])
	g.queue = g.queue[n:]
	g.lastBatch = n
	return groups
}

// commit writes one group and answers each of its sales.
func (g *GroupCommit) commit(group []*queuedInsert) {
	ctx, cancel := groupContext(group)
	defer cancel()
	os := make([]Order, len(group))
	for i, q := range group {
		os[i] = q.order
	}
	err := g.InsertBatch(ctx, os, nil)
	switch {
	case errors.Is(err, ErrStaleRound):
	case errors.Is(err, ErrBatchRefused):
		err = errAlone
	case err != nil:
		err = fmt.Errorf("orders: group commit of %d orders: %w", len(group), err)
	}
	for _, q := range group {
		q.answer <- err
	}
}

// groupContext lasts until the latest deadline of the group's sales (a
// sale that gives up earlier leaves with an unknown outcome), and cancels
// with none of them.
func groupContext(group []*queuedInsert) (context.Context, context.CancelFunc) {
	var latest time.Time
	for _, q := range group {
		d, ok := q.ctx.Deadline()
		if !ok {
			return context.WithTimeout(context.Background(), groupTimeout)
		}
		if d.After(latest) {
			latest = d
		}
	}
	return context.WithDeadline(context.Background(), latest)
}
