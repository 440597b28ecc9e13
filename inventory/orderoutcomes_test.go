package inventory_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockstep/lockstep/internal/faultproxy"
	"github.com/lockstep/lockstep/internal/lockserver/lockservertest"
	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/lockstep/lockstep/inventory"
	"github.com/lockstep/lockstep/orders"
)

// hookedOrders is an order table whose calls a test can replace while a
// hook is set, to cut a reply after the database acted or hold a call back.
type hookedOrders struct {
	orders.Store
	mu     sync.Mutex
	insert func(ctx context.Context, o orders.Order) error
	void   func(ctx context.Context, o orders.Order) error
	buy    func(ctx context.Context, o orders.Order, cond orders.Condition, read int64) (int64, error)
	reset  func()
}

func (h *hookedOrders) set(f func(h *hookedOrders)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f(h)
}

func (h *hookedOrders) Insert(ctx context.Context, o orders.Order) error {
	h.mu.Lock()
	hook := h.insert
	h.mu.Unlock()
	if hook != nil {
		return hook(ctx, o)
	}
	return h.Store.Insert(ctx, o)
}

func (h *hookedOrders) Void(ctx context.Context, o orders.Order) error {
	h.mu.Lock()
	hook := h.void
	h.mu.Unlock()
	if hook != nil {
		return hook(ctx, o)
	}
	return h.Store.Void(ctx, o)
}

func (h *hookedOrders) Buy(ctx context.Context, o orders.Order, cond orders.Condition, read int64) (int64, error) {
	h.mu.Lock()
	hook := h.buy
	h.mu.Unlock()
	if hook != nil {
		return hook(ctx, o, cond, read)
	}
	return h.Store.Buy(ctx, o, cond, read)
}

// A reset's hook runs before the order table's reset.
func (h *hookedOrders) Reset(ctx context.Context, stage, sku string, stock, round int64) error {
	h.mu.Lock()
	hook := h.reset
	h.mu.Unlock()
	if hook != nil {
		hook()
	}
	return h.Store.Reset(ctx, stage, sku, stock, round)
}

// lostReply is the error of a call whose reply never came (the driver's
// read timed out): the database may have acted.
func lostReply(op string) error {
	return fmt.Errorf("orders: %s: %w: %w", op, orders.ErrUnavailable, &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded})
}

// orderStores opens, for each database, an order table behind hooks.
func orderStores(t *testing.T) map[string]*hookedOrders {
	t.Helper()
	lite, err := orders.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "orders.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lite.Close() })
	return map[string]*hookedOrders{
		"sqlite":  {Store: lite},
		"mariadb": {Store: mariaDBOrders(t, lockservertest.MariaDB(t))},
	}
}

// eventually polls check until it returns nil, for the resolver's work.
func eventually(t *testing.T, check func() error) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if err = check(); err == nil {
			return
		}
	}
	t.Fatal(err)
}

// settled is the audit once no unit is taken without an order and no order
// exists without its unit: what every sale whose outcome was resolved
// leaves.
func settled(inv *inventory.Inventory, stage string, orders, stock int64) func() error {
	return func() error {
		a, err := inv.Audit(context.Background(), stage, "sku-1")
		switch {
		case err != nil:
			return err
		case a.Orders.Orders != orders || a.Stock != stock || a.Orders.Undersold != 0 || a.Orders.DuplicateOrders != 0:
			return fmt.Errorf("stock %d, orders %+v; want stock %d, %d orders, none undersold or duplicate", a.Stock, *a.Orders, stock, orders)
		}
		return nil
	}
}

// Issue 33 defect 1: the COMMIT of optimistic-mysql's transaction is
// applied and its reply lost. The sale must not answer "nothing sold": it
// sends Buy again with the same order id, which finds its own row.
func TestALostCommitReplyOfTheOptimisticTransactionIsResolved(t *testing.T) {
	for name, store := range orderStores(t) {
		t.Run(name, func(t *testing.T) {
			inv := newOrderInventory(t, redistest.Start(t).Client(t), store, "r0")
			const stage = "optimistic-mysql"
			if err := inv.Reset(context.Background(), stage, "sku-1", 10, 0); err != nil {
				t.Fatal(err)
			}
			var lost atomic.Int32
			store.set(func(h *hookedOrders) {
				h.buy = func(ctx context.Context, o orders.Order, cond orders.Condition, read int64) (int64, error) {
					remaining, err := h.Store.Buy(ctx, o, cond, read)
					if err == nil && lost.CompareAndSwap(0, 1) {
						return 0, lostReply("commit buy")
					}
					return remaining, err
				}
			})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			sale, err := inv.DeductFor(ctx, stage, "sku-1", "", 1)
			if lost.Load() != 1 {
				t.Fatal("no reply was lost")
			}
			if err != nil && !errors.Is(err, inventory.ErrOutcomeUnknown) {
				t.Fatalf("sale whose COMMIT was applied: %v, an answer of nothing sold", err)
			}
			if err == nil && sale.Order == "" {
				t.Fatal("sale without its order id")
			}
			eventually(t, settled(inv, stage, 1, 9))
		})
	}
}

// heldInsert holds the first insert back: the sale's call gives up at its
// deadline, and the insert lands once land is closed, as one held in the
// network or in a stalled server does.
func heldInsert(h *hookedOrders, land <-chan struct{}, landed chan<- error) {
	var once atomic.Bool
	h.insert = func(ctx context.Context, o orders.Order) error {
		if !once.CompareAndSwap(false, true) {
			return h.Store.Insert(ctx, o)
		}
		go func() {
			<-land
			landed <- h.Store.Insert(context.Background(), o)
		}()
		<-ctx.Done()
		return fmt.Errorf("orders: insert order: %w: %w", orders.ErrUnavailable, ctx.Err())
	}
}

// Issue 33 defects 2 and 3: the INSERT is held back past the sale's
// deadline and the void fails. The sale's outcome is unknown, and must say
// so; the buyer's guard must outlive the insert it guards, so the buyer's
// retry cannot pass the check while the first order may still land.
func TestAnOrderThatMayStillLandKeepsItsGuardAndSaysOutcomeUnknown(t *testing.T) {
	for name, store := range orderStores(t) {
		for _, tc := range []struct {
			stage    string
			oneBuyer bool // the stage keeps a buyer to one order
		}{
			{"one-per-user-lock", true},
			{"one-per-user-synchronized", true},
			{"optimistic-redis", false},
		} {
			t.Run(name+"/"+tc.stage, func(t *testing.T) {
				inv := newOrderInventory(t, redistest.Start(t).Client(t), store, "r0")
				if err := inv.Reset(context.Background(), tc.stage, "sku-1", 10, 0); err != nil {
					t.Fatal(err)
				}
				land, landed := make(chan struct{}), make(chan error, 1)
				var voidDown atomic.Bool
				voidDown.Store(true)
				store.set(func(h *hookedOrders) {
					heldInsert(h, land, landed)
					h.void = func(ctx context.Context, o orders.Order) error {
						if voidDown.Load() {
							return fmt.Errorf("orders: void: %w: %w", orders.ErrUnavailable, errDown)
						}
						return h.Store.Void(ctx, o)
					}
				})
				defer store.set(func(h *hookedOrders) { h.insert, h.void = nil, nil })
				user := "alice"
				if !tc.oneBuyer {
					user = "" // her several orders are no defect there: count them as nobody's
				}
				ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
				defer cancel()
				_, err := inv.DeductFor(ctx, tc.stage, "sku-1", user, 1)
				if !errors.Is(err, inventory.ErrOutcomeUnknown) {
					t.Fatalf("sale whose order may still land: %v, want its outcome unknown", err)
				}
				retry := make(chan error, 1)
				go func() {
					// Bounded: on a loaded machine the first sale can end
					// before its insert, and this retry then takes the held
					// one; it must fail the test, not hang it.
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					_, err := inv.DeductFor(ctx, tc.stage, "sku-1", user, 1)
					retry <- err
				}()
				time.Sleep(300 * time.Millisecond)
				close(land)
				if err := <-landed; err != nil {
					t.Fatalf("the held insert: %v", err)
				}
				voidDown.Store(false)
				err = <-retry
				if tc.oneBuyer {
					if err == nil {
						t.Fatal("alice's retry sold while her first order could still land")
					}
					eventually(t, settled(inv, tc.stage, 1, 9))
					return
				}
				want := int64(1)
				if err == nil {
					want = 2
				}
				eventually(t, settled(inv, tc.stage, want, 10-want))
			})
		}
	}
}

// loseScriptReply runs each EVALSHA of the script with sha whose arguments
// name user (any, when user is empty) and then loses its reply (the script
// ran), while budget lasts; sent, if set, keeps the last such request, for
// a test to send it again late.
type loseScriptReply struct {
	sha, user string
	budget    *atomic.Int32
	sent      *atomic.Pointer[[]any]
}

func (l loseScriptReply) DialHook(next redis.DialHook) redis.DialHook { return next }
func (l loseScriptReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		args := cmd.Args()
		if err == nil && cmd.Name() == "evalsha" && len(args) > 1 && args[1] == l.sha &&
			(l.user == "" || containsArg(args, l.user)) && l.budget.Add(-1) >= 0 {
			err = &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
			cmd.SetErr(err)
			if l.sent != nil {
				l.sent.Store(&args)
			}
		}
		return err
	}
}
func (l loseScriptReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func containsArg(args []any, s string) bool {
	for _, a := range args {
		if a == s {
			return true
		}
	}
	return false
}

// loadedScript loads inventory's script name into rdb, so its runs are
// EVALSHAs, and returns its SHA1.
func loadedScript(t *testing.T, rdb *redis.Client, name string) string {
	t.Helper()
	src, err := fs.ReadFile(inventory.Scripts(), "scripts/"+name)
	if err != nil {
		t.Fatal(err)
	}
	sha, err := rdb.ScriptLoad(context.Background(), string(src)).Result()
	if err != nil {
		t.Fatal(err)
	}
	return sha
}

// takingScripts are the order rungs whose Redis deduction is one script
// run with the sale's order id, and that script.
var takingScripts = []struct{ stage, script string }{
	{"one-per-user-lua", "one_per_user.lua"},
	{"one-per-user-naive", "order_deduct.lua"},
	{"one-per-user-synchronized", "order_deduct.lua"},
	{"one-per-user-lock", "order_deduct.lua"},
}

// Issue 33 defect 4: the script of an order rung takes a unit (and, for
// one-per-user-lua, records the buyer) under the sale's order id, and its
// reply is lost. The sale runs it again with the same id, which finds its
// own take: alice gets her order, not a unit lost (undersold) and a sale
// answered "may have sold" that nothing resolves.
func TestALostReplyOfTheOrderScriptFinishesTheSale(t *testing.T) {
	stores := orderStores(t)
	for _, tc := range takingScripts {
		for name, store := range stores {
			t.Run(tc.stage+"/"+name, func(t *testing.T) {
				rdb := redistest.Start(t).Client(t)
				var budget atomic.Int32
				budget.Store(1)
				rdb.AddHook(loseScriptReply{sha: loadedScript(t, rdb, tc.script), budget: &budget})
				inv := newOrderInventory(t, rdb, store, "r0")
				if err := inv.Reset(context.Background(), tc.stage, "sku-1", 10, 0); err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				_, err := inv.DeductFor(ctx, tc.stage, "sku-1", "alice", 1)
				if budget.Load() >= 1 {
					t.Fatal("no reply was lost")
				}
				if err != nil {
					t.Fatalf("sale whose script reply was lost once: %v, want it sold", err)
				}
				eventually(t, settled(inv, tc.stage, 1, 9))
			})
		}
	}
}

// The same with every reply lost until the sale's deadline: the sale
// answers that its outcome is unknown, and once Redis answers again the
// resolver gives back what the script took, so the buyer may buy again. A
// run of the script that arrives after the give-back takes nothing.
func TestAnOrderScriptWhoseRepliesAreLostIsGivenBack(t *testing.T) {
	for _, tc := range takingScripts {
		t.Run(tc.stage, func(t *testing.T) {
			lite, err := orders.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "orders.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = lite.Close() })
			rdb := redistest.Start(t).Client(t)
			var budget atomic.Int32
			budget.Store(1 << 20)
			var sent atomic.Pointer[[]any]
			rdb.AddHook(loseScriptReply{sha: loadedScript(t, rdb, tc.script), budget: &budget, sent: &sent})
			inv := newOrderInventory(t, rdb, lite, "r0")
			if err := inv.Reset(context.Background(), tc.stage, "sku-1", 10, 0); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			if _, err := inv.DeductFor(ctx, tc.stage, "sku-1", "dora", 1); !errors.Is(err, inventory.ErrOutcomeUnknown) {
				t.Fatalf("sale whose every script reply was lost: %v, want its outcome unknown", err)
			}
			budget.Store(0)
			eventually(t, settled(inv, tc.stage, 0, 10))
			if err := rdb.Do(context.Background(), *sent.Load()...).Err(); err != nil {
				t.Fatalf("the script sent again late: %v", err)
			}
			if err := settled(inv, tc.stage, 0, 10)(); err != nil {
				t.Fatalf("after a run of the script arrived late: %v", err)
			}
			if _, err := inv.DeductFor(context.Background(), tc.stage, "sku-1", "dora", 1); err != nil {
				t.Fatalf("dora's sale once her lost one was given back: %v", err)
			}
		})
	}
}

// Issue 33 defect 5: a reset while sales run. A sale that takes from the
// new stock before the order table was reset, and a sale of the old stock
// whose insert arrives after the whole reset, must neither lose an order
// that was answered nor land an order in the new round.
func TestAResetWhileOrdersAreWrittenKeepsTheRoundsApart(t *testing.T) {
	for name, store := range orderStores(t) {
		for _, stage := range []string{"one-per-user-lua", "one-per-user-lock", "optimistic-redis"} {
			t.Run(name+"/"+stage+"/sale during the reset", func(t *testing.T) {
				inv := newOrderInventory(t, redistest.Start(t).Client(t), store, "r0")
				ctx := context.Background()
				if err := inv.Reset(ctx, stage, "sku-1", 10, 0); err != nil {
					t.Fatal(err)
				}
				var sold atomic.Int64
				store.set(func(h *hookedOrders) {
					h.reset = func() { // between the Redis reset and the order table's
						if _, err := inv.DeductFor(ctx, stage, "sku-1", "bob", 1); err == nil {
							sold.Add(1)
						}
					}
				})
				defer store.set(func(h *hookedOrders) { h.reset = nil })
				if err := inv.Reset(ctx, stage, "sku-1", 10, 0); err != nil {
					t.Fatal(err)
				}
				store.set(func(h *hookedOrders) { h.reset = nil })
				if got := orderAudit(t, inv, stage); got.Orders.Orders != sold.Load() || got.Orders.Undersold != 0 || got.Stock != 10-sold.Load() {
					t.Fatalf("%d sales answered; after the reset stock %d, orders %+v", sold.Load(), got.Stock, *got.Orders)
				}
			})
			t.Run(name+"/"+stage+"/insert after the reset", func(t *testing.T) {
				inv := newOrderInventory(t, redistest.Start(t).Client(t), store, "r0")
				ctx := context.Background()
				if err := inv.Reset(ctx, stage, "sku-1", 10, 0); err != nil {
					t.Fatal(err)
				}
				arrived, land := make(chan struct{}), make(chan struct{})
				store.set(func(h *hookedOrders) {
					h.insert = func(ctx context.Context, o orders.Order) error {
						close(arrived)
						<-land
						return h.Store.Insert(ctx, o)
					}
				})
				defer store.set(func(h *hookedOrders) { h.insert = nil })
				sale := make(chan error, 1)
				go func() {
					_, err := inv.DeductFor(ctx, stage, "sku-1", "carol", 1)
					sale <- err
				}()
				<-arrived
				store.set(func(h *hookedOrders) { h.insert = nil })
				if err := inv.Reset(ctx, stage, "sku-1", 10, 0); err != nil {
					t.Fatal(err)
				}
				close(land)
				err := <-sale
				t.Logf("the sale of the old stock: %v", err)
				if got := orderAudit(t, inv, stage); got.Orders.Orders != 0 || got.Orders.Undersold != 0 || got.Stock != 10 {
					t.Fatalf("after a reset, an order of the stock before: stock %d, orders %+v", got.Stock, *got.Orders)
				}
			})
		}
	}
}

// Issue 33 defect 7: sales that name no buyer on the optimistic rungs are
// orders of nobody, not one buyer's duplicates.
func TestAnonymousSalesAreNoDuplicateOrders(t *testing.T) {
	for name, store := range orderStores(t) {
		inv := newOrderInventory(t, redistest.Start(t).Client(t), store, "r0")
		for _, stage := range []string{"optimistic-redis", "optimistic-mysql-version", "optimistic-mysql"} {
			t.Run(name+"/"+stage, func(t *testing.T) {
				if err := inv.Reset(context.Background(), stage, "sku-1", 10, 0); err != nil {
					t.Fatal(err)
				}
				for range 3 {
					if _, err := inv.DeductFor(context.Background(), stage, "sku-1", "", 1); err != nil {
						t.Fatal(err)
					}
				}
				if o := orderAudit(t, inv, stage).Orders; o.Orders != 3 || o.DuplicateOrders != 0 || o.DuplicateBuyers != 0 {
					t.Fatalf("three anonymous sales: orders %+v, want 3 orders and no duplicates", *o)
				}
			})
		}
	}
}

// cutExecReply cuts, through the fault proxy, the replies to the first
// budget requests holding an EXEC: Redis ran the transaction, the shop
// cannot know.
// optimisticRedisThrough is an inventory whose Redis is reached through a
// fault proxy with policy, with optimistic-redis reset to 10 units and
// its orders in SQLite.
func optimisticRedisThrough(t *testing.T, policy faultproxy.Policy) *inventory.Inventory {
	t.Helper()
	srv := redistest.Start(t)
	proxy, err := faultproxy.Start(srv.Addr, policy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	// A short read timeout: go-redis waits for a reply that long, whatever
	// the sale's deadline, so a held EXEC outlives its sale.
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: -1, ReadTimeout: 300 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	lite, err := orders.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "orders.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lite.Close() })
	inv := newOrderInventory(t, rdb, lite, "r0")
	if err := inv.Reset(context.Background(), "optimistic-redis", "sku-1", 10, 0); err != nil {
		t.Fatal(err)
	}
	return inv
}

type cutExecReply struct{ budget atomic.Int32 }

func (c *cutExecReply) Request([]byte) time.Duration { return 0 }
func (c *cutExecReply) Reply(_, last []byte) (time.Duration, bool) {
	return 0, bytes.Contains(bytes.ToLower(last), []byte("exec")) && c.budget.Add(-1) >= 0
}

// optimistic-redis's EXEC ran and its reply was lost: the sale resolves it
// by its order id, which the MULTI recorded in the taken set — it gives
// the units back (and marks the id, which fails an EXEC still on its way)
// and answers "nothing sold", rather than "outcome unknown" with a unit
// nobody's order holds. The buyer's next sale sells.
func TestALostExecReplyOfTheOptimisticRedisStageIsUndone(t *testing.T) {
	const stage = "optimistic-redis"
	cut := &cutExecReply{}
	inv := optimisticRedisThrough(t, cut)
	cut.budget.Store(1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := inv.DeductFor(ctx, stage, "sku-1", "alice", 1)
	if cut.budget.Load() > 0 {
		t.Fatalf("no EXEC reply was cut (the sale: %v)", err)
	}
	if !errors.Is(err, inventory.ErrUnavailable) || errors.Is(err, inventory.ErrOutcomeUnknown) {
		t.Fatalf("sale whose EXEC reply was lost: %v, want nothing sold", err)
	}
	if err := settled(inv, stage, 0, 10)(); err != nil {
		t.Fatalf("after the lost EXEC: %v", err)
	}
	if _, err := inv.DeductFor(ctx, stage, "sku-1", "alice", 1); err != nil {
		t.Fatalf("the next sale: %v", err)
	}
	eventually(t, settled(inv, stage, 1, 9))
}

// delayExec holds the next budget transactions (the chunk with EXEC) back
// for delay before Redis gets them.
type delayExec struct {
	budget atomic.Int32
	delay  time.Duration
}

func (d *delayExec) Request(chunk []byte) time.Duration {
	if bytes.Contains(bytes.ToLower(chunk), []byte("exec")) && d.budget.Add(-1) >= 0 {
		return d.delay
	}
	return 0
}
func (d *delayExec) Reply([]byte, []byte) (time.Duration, bool) { return 0, false }

// optimistic-redis's EXEC arrives late, after its sale gave up on its reply: the
// sale gave its order id back meanwhile, which changes the given-back set
// the transaction WATCHes, so the late EXEC is refused and takes nothing.
// Nothing is sold, nothing lost, and the buyer's next sale sells.
func TestALateExecOfTheOptimisticRedisStageTakesNothing(t *testing.T) {
	const stage = "optimistic-redis"
	late := &delayExec{delay: 1500 * time.Millisecond}
	inv := optimisticRedisThrough(t, late)
	late.budget.Store(1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := inv.DeductFor(ctx, stage, "sku-1", "alice", 1); !errors.Is(err, inventory.ErrUnavailable) || errors.Is(err, inventory.ErrOutcomeUnknown) {
		t.Fatalf("a sale whose EXEC was held past its read timeout: %v, want nothing sold", err)
	}
	if late.budget.Load() > 0 {
		t.Fatal("no EXEC was held back")
	}
	time.Sleep(2 * late.delay) // the held EXEC has reached Redis
	if err := settled(inv, stage, 0, 10)(); err != nil {
		t.Fatalf("after the late EXEC: %v", err)
	}
	next, cancelNext := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelNext()
	if _, err := inv.DeductFor(next, stage, "sku-1", "alice", 1); err != nil {
		t.Fatalf("the next sale: %v", err)
	}
	eventually(t, settled(inv, stage, 1, 9))
}
