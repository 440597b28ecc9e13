package asyncorders_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockstep/lockstep/asyncorders"
	"github.com/lockstep/lockstep/internal/faultproxy"
	"github.com/lockstep/lockstep/orders"
)

// hookedStore is the order database with a hook around each batch insert.
type hookedStore struct {
	*orders.SQLStore
	batches atomic.Int64
	around  func(run func() error) error
}

func (s *hookedStore) InsertBatch(ctx context.Context, os []orders.Order, deadlines []time.Time) error {
	s.batches.Add(1)
	return s.around(func() error { return s.SQLStore.InsertBatch(ctx, os, deadlines) })
}

// startOn runs a worker writing into store until the test ends.
func (e env) startOn(t *testing.T, q *asyncorders.Queue, store orders.Store, c asyncorders.Config) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	w := asyncorders.NewWorker(q, store, c, slog.New(slog.NewTextHandler(io.Discard, nil)))
	go func() { defer close(done); _ = w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// payingConfig is config with payments due in an hour.
func (e env) payingConfig(consumer string) asyncorders.Config {
	c := config(consumer, asyncorders.Correct)
	c.Payments, c.PayWithin = e.payments, time.Hour
	return c
}

// wantOrders checks the invariant after a drain: n orders, n unpaid
// payments, no dead letter.
func wantOrders(t *testing.T, e env, q *asyncorders.Queue, n int64) {
	t.Helper()
	inv := check(t, e, q)
	pc, err := e.payments.Counts(context.Background(), q.Stage(), sku)
	if err != nil {
		t.Fatal(err)
	}
	if !inv.Holds || inv.Units != n || inv.DeadLetters != 0 || pc.Unpaid != n {
		t.Fatalf("after the drain: %+v, payments %+v; want %d orders and payments, no dead letter", inv, pc, n)
	}
}

// One entry the database refuses in a batch of ten: the batch's INSERT
// fails as a whole, and the nine others must still be written, the poison
// entry alone counted and, at MaxDeliveries, dead-lettered.
func TestAPoisonEntryGoesToTheDeadLettersAloneNotItsBatch(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	q := e.queue(t, "poison-batch", 10)
	refuseUntilTheDrain(t, e, "buyer-4")
	admit(t, q, 10)
	store := &hookedStore{SQLStore: e.store, around: func(run func() error) error { return run() }}
	e.startOn(t, q, store, config("w1", asyncorders.Correct))
	drain(t, q)
	inv := check(t, e, q)
	if !inv.Holds || inv.Units != 9 || inv.Remaining != 1 || inv.DeadLetters != 1 {
		t.Fatalf("after the drain: %+v; want nine orders and buyer-4's entry alone dead-lettered", inv)
	}
	dead, err := e.rdb.XRange(ctx, q.DeadLetters(sku), "-", "+").Result()
	if err != nil || len(dead) != 1 || !bytes.Contains([]byte(fmt.Sprint(dead[0].Values)), []byte("buyer-4")) {
		t.Fatalf("dead letters %v %v; want buyer-4's entry", dead, err)
	}
	if store.batches.Load() == 0 {
		t.Fatal("no batch insert ran")
	}
}

// The batch INSERT committed and its reply was lost: the worker sends it
// again, which finds every id live and writes nothing, opens no payment
// twice, and the batch is acknowledged once: ten orders, ten payments.
func TestABatchInsertWhoseReplyIsLostRunsTwiceAndWritesOnce(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "batch-twice", 10)
	admit(t, q, 10)
	var lost atomic.Bool
	store := &hookedStore{SQLStore: e.store, around: func(run func() error) error {
		if err := run(); err != nil || !lost.CompareAndSwap(false, true) {
			return err
		}
		return fmt.Errorf("test: the reply was lost: %w", orders.ErrUnavailable)
	}}
	e.startOn(t, q, store, e.payingConfig("w1"))
	drain(t, q)
	wantOrders(t, e, q, 10)
	if !lost.Load() || store.batches.Load() < 2 {
		t.Fatalf("lost %v after %d batch inserts; want a lost reply and the batch sent again", lost.Load(), store.batches.Load())
	}
}

// A worker stalls between its read and its batch INSERT past ClaimIdle;
// another claims the batch, writes and acknowledges it. The late INSERT
// then finds every id live (nil, nothing written) and its XACK is a no-op.
func TestALateBatchInsertAfterAClaimWritesNothing(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "batch-late", 10)
	admit(t, q, 10)
	release := make(chan struct{})
	var late sync.Once
	var lateErr atomic.Value
	lateDone := make(chan struct{})
	slow := &hookedStore{SQLStore: e.store, around: func(run func() error) error {
		first := false
		late.Do(func() { first = true })
		if !first {
			return run()
		}
		<-release
		err := run()
		lateErr.Store(fmt.Sprint(err))
		close(lateDone)
		return err
	}}
	e.startOn(t, q, slow, e.payingConfig("slow"))
	time.Sleep(100 * time.Millisecond) // the slow worker reads the ten entries first
	fast := &hookedStore{SQLStore: e.store, around: func(run func() error) error { return run() }}
	e.startOn(t, q, fast, e.payingConfig("fast"))
	drain(t, q)
	if fast.batches.Load() == 0 {
		t.Fatal("the claimer wrote no batch")
	}
	close(release)
	select {
	case <-lateDone:
	case <-time.After(10 * time.Second):
		t.Fatal("the late batch insert never ran")
	}
	if got := lateErr.Load(); got != "<nil>" {
		t.Fatalf("the late batch insert: %v; want nil (its rows found live)", got)
	}
	time.Sleep(200 * time.Millisecond) // its XACK
	drain(t, q)
	wantOrders(t, e, q, 10)
}

// ackCut cuts the reply of the first chunk sent to Redis that holds an
// XACK of more than one entry: the acknowledgement ran, its reply lost.
type ackCut struct{ cut atomic.Bool }

func (a *ackCut) Request([]byte) time.Duration { return 0 }
func (a *ackCut) Reply(_, last []byte) (time.Duration, bool) {
	if bytes.Contains(last, []byte("xack")) && bytes.Count(last, []byte("-")) > 2 {
		return 0, a.cut.CompareAndSwap(false, true)
	}
	return 0, false
}

// The batch's XACK ran and its reply was lost: it is sent again (a no-op
// for acknowledged entries), and the batch counts one order each.
func TestABatchAckWhoseReplyIsLostIsSentAgain(t *testing.T) {
	e := newEnv(t)
	cut := &ackCut{}
	proxy, err := faultproxy.Start(e.rdb.Options().Addr, cut)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	q := e.queue(t, "batch-ack-lost", 10)
	admit(t, q, 10)
	e.startOn(t, asyncorders.NewQueue(rdb, "batch-ack-lost"), e.store, e.payingConfig("w1"))
	drain(t, q)
	wantOrders(t, e, q, 10)
	if !cut.cut.Load() {
		t.Fatal("no batch XACK was cut")
	}
}
