package orders_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/lockstep/lockstep/orders"
)

// heldBatches holds every InsertBatch of a group commit until the test
// releases it, and lets after rewrite the batch's answer (a lost reply).
type heldBatches struct {
	orders.BatchStore
	held  chan heldBatch
	after func(err error) error
}

type heldBatch struct {
	orders  []orders.Order
	release chan struct{}
}

func (h *heldBatches) InsertBatch(ctx context.Context, os []orders.Order, deadlines []time.Time) error {
	b := heldBatch{orders: os, release: make(chan struct{})}
	h.held <- b
	<-b.release
	err := h.BatchStore.InsertBatch(ctx, os, deadlines)
	if h.after != nil {
		err = h.after(err)
	}
	return err
}

// groupCommit is a group commit of s on sku (reset), whose batches the
// test releases from h.held; Close runs at the test's end.
func groupCommit(t *testing.T, s orders.Store, sku string) (*orders.GroupCommit, *heldBatches) {
	t.Helper()
	if err := s.Reset(context.Background(), "st", sku, 1000, 0); err != nil {
		t.Fatal(err)
	}
	h := &heldBatches{BatchStore: noClose{s.(orders.BatchStore)}, held: make(chan heldBatch)}
	g := orders.NewGroupCommit(h)
	t.Cleanup(func() { _ = g.Close() })
	return g, h
}

// noClose keeps the test's store open when a group commit closes.
type noClose struct{ orders.BatchStore }

func (noClose) Close() error { return nil }

// releaseAll releases every batch from now until the test ends.
func releaseAll(t *testing.T, h *heldBatches) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	t.Cleanup(func() { close(stop); wg.Wait() })
	wg.Go(func() {
		for {
			select {
			case b := <-h.held:
				close(b.release)
			case <-stop:
				return
			}
		}
	})
}

// insertAsync runs g.Insert(ctx, o) and delivers its answer.
func insertAsync(ctx context.Context, g *orders.GroupCommit, o orders.Order) <-chan error {
	answer := make(chan error, 1)
	go func() { answer <- g.Insert(ctx, o) }()
	return answer
}

// fillSlots puts a blocker's batch in each of the group commit's slots and
// holds them; what is inserted next stays queued until they are released.
func fillSlots(t *testing.T, g *orders.GroupCommit, h *heldBatches, sku string) []heldBatch {
	t.Helper()
	var held []heldBatch
	for i := range orders.GroupsInFlight {
		o := order(fmt.Sprintf("blocker-%d", i), true)
		o.SKU = sku
		insertAsync(context.Background(), g, o)
		held = append(held, <-h.held)
	}
	return held
}

// waitQueued waits until n orders are queued.
func waitQueued(t *testing.T, g *orders.GroupCommit, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); g.Queued() != n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d orders queued, want %d", g.Queued(), n)
		}
	}
}

func ordersOf(sku string, users ...string) []orders.Order {
	os := make([]orders.Order, len(users))
	for i, u := range users {
		os[i] = order(u, true)
		os[i].SKU = sku
	}
	return os
}

func liveOrders(t *testing.T, s orders.Store, sku string) int64 {
	t.Helper()
	c, err := s.Counts(context.Background(), "st", sku)
	if err != nil {
		t.Fatal(err)
	}
	return c.Orders
}

// answer waits for an Insert's answer, failing the test after 10 s.
func answer(t *testing.T, what string, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no answer after 10 s", what)
		return nil
	}
}

// A batch with a duplicate buyer is refused as a whole; each sale then
// inserts alone, so the duplicate alone is refused and the rest land.
func TestAGroupCommitRefusesADuplicateBuyerAlone(t *testing.T) {
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			g, h := groupCommit(t, s, "dup")
			blockers := fillSlots(t, g, h, "dup")
			os := ordersOf("dup", "u1", "u2", "u2", "u3")
			answers := make([]<-chan error, len(os))
			for i, o := range os {
				answers[i] = insertAsync(context.Background(), g, o)
				waitQueued(t, g, i+1) // in this order
			}
			for _, b := range blockers {
				close(b.release)
			}
			if b := <-h.held; len(b.orders) != len(os) {
				t.Fatalf("a batch of %d orders, want the %d queued", len(b.orders), len(os))
			} else {
				close(b.release)
			}
			releaseAll(t, h)
			var landed, refused int
			for i, o := range os {
				switch err := answer(t, o.User, answers[i]); {
				case err == nil:
					landed++
				case errors.Is(err, orders.ErrDuplicateBuyer) && o.User == "u2":
					refused++
				default:
					t.Errorf("%s's order: %v", o.User, err)
				}
			}
			if landed != 3 || refused != 1 {
				t.Fatalf("%d landed and %d refused, want 3 and u2's second refused", landed, refused)
			}
			if n := liveOrders(t, s, "dup"); n != int64(len(blockers))+3 {
				t.Fatalf("%d orders, want the %d blockers' and 3", n, len(blockers))
			}
		})
	}
}

// Each way a sale can stop waiting for its batch, and what its order
// becomes: never answered nil without its row, never two rows.
func TestAGroupCommitNeverLosesOrDoublesAnOrder(t *testing.T) {
	lostReply := errors.New("connection reset after the commit")
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			for _, c := range []struct {
				name string
				run  func(t *testing.T, sku string)
			}{
				{"the batch's commit reply is lost", func(t *testing.T, sku string) {
					g, h := groupCommit(t, s, sku)
					h.after = func(err error) error {
						if err != nil {
							return err
						}
						return fmt.Errorf("%w: %w", orders.ErrUnavailable, lostReply)
					}
					releaseAll(t, h)
					os := ordersOf(sku, "a", "b", "c")
					answers := make([]<-chan error, len(os))
					for i, o := range os {
						answers[i] = insertAsync(context.Background(), g, o)
					}
					for i, o := range os {
						if err := answer(t, o.User, answers[i]); !errors.Is(err, orders.ErrUnavailable) || !errors.Is(err, lostReply) {
							t.Fatalf("%s's insert whose batch's reply was lost: %v, want ErrUnavailable", o.User, err)
						}
						// The seller resolves it by id.
						if err := s.Void(context.Background(), o); !errors.Is(err, orders.ErrOrdered) {
							t.Fatalf("void of %s's order, which committed: %v, want ErrOrdered", o.User, err)
						}
					}
					if n := liveOrders(t, s, sku); n != 3 {
						t.Fatalf("%d orders, want 3", n)
					}
				}},
				{"the sale gives up while its order is queued", func(t *testing.T, sku string) {
					g, h := groupCommit(t, s, sku)
					blockers := fillSlots(t, g, h, sku)
					ctx, cancel := context.WithCancel(context.Background())
					o := ordersOf(sku, "queued")[0]
					ch := insertAsync(ctx, g, o)
					waitQueued(t, g, 1)
					cancel()
					if err := answer(t, "queued", ch); !errors.Is(err, orders.ErrUnavailable) || !errors.Is(err, context.Canceled) {
						t.Fatalf("insert given up while queued: %v, want ErrUnavailable", err)
					}
					for _, b := range blockers {
						close(b.release)
					}
					releaseAll(t, h)
					if err := g.Close(); err != nil {
						t.Fatal(err)
					}
					if err := s.Void(context.Background(), o); err != nil {
						t.Fatalf("void of an order given up while queued: %v, want nil (never sent)", err)
					}
					if n := liveOrders(t, s, sku); n != int64(len(blockers)) {
						t.Fatalf("%d orders, want the %d blockers'", n, len(blockers))
					}
				}},
				{"the sale gives up while its batch is on the wire", func(t *testing.T, sku string) {
					g, h := groupCommit(t, s, sku)
					ctx, cancel := context.WithCancel(context.Background())
					o := ordersOf(sku, "on-the-wire")[0]
					ch := insertAsync(ctx, g, o)
					b := <-h.held
					cancel()
					if err := answer(t, "on the wire", ch); !errors.Is(err, orders.ErrUnavailable) || !errors.Is(err, context.Canceled) {
						t.Fatalf("insert given up on the wire: %v, want ErrUnavailable", err)
					}
					close(b.release)
					if err := g.Close(); err != nil {
						t.Fatal(err)
					}
					if err := s.Void(context.Background(), o); !errors.Is(err, orders.ErrOrdered) {
						t.Fatalf("void of an order whose batch then committed: %v, want ErrOrdered", err)
					}
					if n := liveOrders(t, s, sku); n != 1 {
						t.Fatalf("%d orders, want 1", n)
					}
				}},
				{"the batch commits late, after one of its sales voided its id", func(t *testing.T, sku string) {
					g, h := groupCommit(t, s, sku)
					blockers := fillSlots(t, g, h, sku)
					ctx, cancel := context.WithCancel(context.Background())
					late, waiting := ordersOf(sku, "late")[0], ordersOf(sku, "waiting")[0]
					lateCh := insertAsync(ctx, g, late)
					waitQueued(t, g, 1)
					waitingCh := insertAsync(context.Background(), g, waiting)
					waitQueued(t, g, 2)
					close(blockers[0].release)
					b := <-h.held
					if len(b.orders) != 2 {
						t.Fatalf("a batch of %d orders, want late's and waiting's", len(b.orders))
					}
					cancel()
					if err := answer(t, "late", lateCh); !errors.Is(err, orders.ErrUnavailable) {
						t.Fatalf("late's insert: %v, want ErrUnavailable", err)
					}
					if err := s.Void(context.Background(), late); err != nil {
						t.Fatalf("void of late's order before its batch ran: %v", err)
					}
					close(b.release)
					for _, b := range blockers[1:] {
						close(b.release)
					}
					releaseAll(t, h)
					if err := answer(t, "waiting", waitingCh); err != nil {
						t.Fatalf("waiting's order, in the batch that met late's void: %v, want nil", err)
					}
					if err := s.Insert(context.Background(), late); !errors.Is(err, orders.ErrVoided) {
						t.Fatalf("late's order: %v, want ErrVoided", err)
					}
					if err := g.Close(); err != nil { // the blockers' batches have committed
						t.Fatal(err)
					}
					if n := liveOrders(t, s, sku); n != int64(len(blockers))+1 {
						t.Fatalf("%d orders, want the %d blockers' and waiting's", n, len(blockers))
					}
				}},
				{"a reset moved the round", func(t *testing.T, sku string) {
					g, h := groupCommit(t, s, sku)
					releaseAll(t, h)
					if err := s.Reset(context.Background(), "st", sku, 1000, 2); err != nil {
						t.Fatal(err)
					}
					os := ordersOf(sku, "x", "y")
					answers := make([]<-chan error, len(os))
					for i := range os {
						os[i].Round = 1
						answers[i] = insertAsync(context.Background(), g, os[i])
					}
					for i, o := range os {
						if err := answer(t, o.User, answers[i]); !errors.Is(err, orders.ErrStaleRound) {
							t.Fatalf("%s's order of round 1 after a reset to 2: %v, want ErrStaleRound", o.User, err)
						}
					}
					if n := liveOrders(t, s, sku); n != 0 {
						t.Fatalf("%d orders, want none", n)
					}
				}},
			} {
				t.Run(c.name, func(t *testing.T) { c.run(t, fmt.Sprintf("sku-%d", time.Now().UnixNano())) })
			}
		})
	}
}

// Concurrent sales share batches; Close writes what is queued, and an
// insert after it goes to the store alone.
func TestAGroupCommitBatchesConcurrentSales(t *testing.T) {
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			g, h := groupCommit(t, s, "many")
			var batches sync.WaitGroup
			var calls int
			batches.Go(func() {
				for b := range h.held {
					calls++
					close(b.release)
				}
			})
			const sales = 200
			var wg sync.WaitGroup
			for i := range sales {
				wg.Go(func() {
					o := ordersOf("many", fmt.Sprintf("buyer-%d", i))[0]
					if err := g.Insert(context.Background(), o); err != nil {
						t.Errorf("insert: %v", err)
					}
				})
			}
			wg.Wait()
			if err := g.Close(); err != nil {
				t.Fatal(err)
			}
			if err := g.Insert(context.Background(), ordersOf("many", "after-close")[0]); err != nil {
				t.Fatalf("insert after Close: %v", err)
			}
			close(h.held)
			batches.Wait()
			if n := liveOrders(t, s, "many"); n != sales+1 {
				t.Fatalf("%d orders, want %d", n, sales+1)
			}
			if calls >= sales {
				t.Fatalf("%d batches for %d concurrent sales: nothing was grouped", calls, sales)
			}
			t.Logf("%d sales in %d batches", sales, calls)
		})
	}
}

// heldRig is a group commit on SQLite whose batches the test takes one by
// one (next) and releases; whatever the test leaves held, or goes out
// after it, is released before the group commit closes.
type heldRig struct {
	t       *testing.T
	s       orders.Store
	g       *orders.GroupCommit
	h       *heldBatches
	held    []heldBatch
	answers []<-chan error
}

func newHeldRig(t *testing.T, sku string) *heldRig {
	s, err := orders.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "orders.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	stopDrain := make(chan struct{})
	t.Cleanup(func() { close(stopDrain) })
	r := &heldRig{t: t, s: s}
	r.g, r.h = groupCommit(t, s, sku)
	t.Cleanup(func() { // before the group commit's Close: release everything
		for _, b := range r.held {
			select {
			case <-b.release:
			default:
				close(b.release)
			}
		}
		go func() {
			for {
				select {
				case b := <-r.h.held:
					close(b.release)
				case <-stopDrain:
					return
				}
			}
		}()
	})
	return r
}

func (r *heldRig) insert(sku string, users ...string) {
	for _, o := range ordersOf(sku, users...) {
		r.answers = append(r.answers, insertAsync(context.Background(), r.g, o))
	}
}

// next takes the next batch, which must hold want orders.
func (r *heldRig) next(what string, want int) heldBatch {
	r.t.Helper()
	select {
	case b := <-r.h.held:
		r.held = append(r.held, b)
		if len(b.orders) != want {
			r.t.Fatalf("%s: a batch of %d orders, want %d", what, len(b.orders), want)
		}
		return b
	case <-time.After(5 * time.Second):
		r.t.Fatalf("%s: no batch went out", what)
		return heldBatch{}
	}
}

// answered waits for every insert's answer, each nil.
func (r *heldRig) answered() {
	r.t.Helper()
	for i, ch := range r.answers {
		if err := answer(r.t, fmt.Sprint("sale ", i), ch); err != nil {
			r.t.Fatalf("sale %d: %v", i, err)
		}
	}
}

// overlapped brings r to a batch of 3 on the wire, the other slot free.
func (r *heldRig) overlapped(sku string) heldBatch {
	r.t.Helper()
	r.insert(sku, "a")
	a := r.next("the first sale", 1)
	r.insert(sku, "b") // one queued, as many as the batch on the wire took
	b := r.next("a sale while a batch of one is on the wire", 1)
	r.insert(sku, "c", "d", "e")
	waitQueued(r.t, r.g, 3) // both slots taken
	close(a.release)
	cde := r.next("what queued behind two batches, once one is done", 3)
	close(b.release)
	return cde
}

// A second batch goes out while one is on the wire once as many orders
// queued as the last batch took, and not before: two batches overlap in
// the database, but a short queue waits rather than cost a commit of its
// own.
func TestAGroupCommitOverlapsBatchesOfTheLastSize(t *testing.T) {
	r := newHeldRig(t, "overlap")
	cde := r.overlapped("overlap")
	r.insert("overlap", "f", "g")
	waitQueued(t, r.g, 2)
	select {
	case early := <-r.h.held:
		r.held = append(r.held, early)
		t.Fatalf("a batch of %d went out while a batch of 3 was on the wire", len(early.orders))
	case <-time.After(200 * time.Millisecond):
	}
	r.insert("overlap", "h")
	fgh := r.next("three queued while a batch of three is on the wire", 3)
	close(cde.release)
	close(fgh.release)
	r.answered()
	if n := liveOrders(t, r.s, "overlap"); n != 8 {
		t.Fatalf("%d orders, want 8", n)
	}
}

// Close writes a queue too short to go out beside the batch on the wire:
// no sale is left waiting for a batch that never goes.
func TestAGroupCommitCloseWritesAShortQueue(t *testing.T) {
	r := newHeldRig(t, "short")
	cde := r.overlapped("short")
	r.insert("short", "f")
	waitQueued(t, r.g, 1)
	closed := make(chan error, 1)
	go func() { closed <- r.g.Close() }()
	close(cde.release)
	close(r.next("the short queue, at Close", 1).release)
	if err := answer(t, "Close", closed); err != nil {
		t.Fatalf("Close: %v", err)
	}
	r.answered()
	if n := liveOrders(t, r.s, "short"); n != 6 {
		t.Fatalf("%d orders, want 6", n)
	}
}
