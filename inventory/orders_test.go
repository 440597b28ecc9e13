package inventory_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockstep/lockstep/internal/lockserver"
	"github.com/lockstep/lockstep/internal/lockserver/lockservertest"
	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/lockstep/lockstep/inventory"
	"github.com/lockstep/lockstep/orders"
)

// orderReplicas builds n inventories on one real Redis and one real
// MariaDB, each replica with its own connection pool.
func orderReplicas(t *testing.T, n int) []*inventory.Inventory {
	t.Helper()
	m := lockservertest.MariaDB(t)
	rdb := redistest.Start(t)
	invs := make([]*inventory.Inventory, n)
	for i := range invs {
		invs[i] = newOrderInventory(t, rdb.Client(t), mariaDBOrders(t, m), fmt.Sprintf("r%d", i))
	}
	return invs
}

// mariaDBOrders opens an order table in m's lockstep database, on a pool of
// its own.
func mariaDBOrders(t testing.TB, m *lockserver.MariaDB) orders.Store {
	t.Helper()
	root, err := sql.Open("mysql", m.DSN(""))
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if _, err := root.Exec("CREATE DATABASE IF NOT EXISTS lockstep"); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("mysql", m.DSN("lockstep"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	// As the shop's pool: concurrent sales keep their connections rather
	// than dial one per insert (database/sql keeps 2 idle by default).
	db.SetMaxIdleConns(benchWorkers)
	store, err := orders.OpenMySQL(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	return store
}

func newOrderInventory(t testing.TB, rdb redis.UniversalClient, store orders.Store, replica string) *inventory.Inventory {
	t.Helper()
	inv, err := inventory.New(inventory.Config{
		Redis: rdb, Orders: store, Replica: replica, LockWait: 5 * time.Second, FaultRefresh: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Exit: func(int) {},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = inv.Close() })
	return inv
}

// prepare resets stage to stock and sets its faults on every replica.
func prepare(t *testing.T, invs []*inventory.Inventory, stage string, stock int64, f inventory.Faults) {
	t.Helper()
	ctx := context.Background()
	if err := invs[0].Reset(ctx, stage, "sku-1", stock, 0); err != nil {
		t.Fatal(err)
	}
	if err := invs[0].SetFaults(ctx, stage, f); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // every replica has re-read the faults
}

// buyEagerly sends each of buyers' requests at once, request j to replica
// j mod len(invs): the scalper who clicks several times. It fails the test
// on any answer but a sale, sold out, already bought or busy.
func buyEagerly(t *testing.T, invs []*inventory.Inventory, stage string, buyers []string, each int) (sold int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, user := range buyers {
		for j := range each {
			wg.Go(func() {
				_, err := invs[j%len(invs)].DeductFor(ctx, stage, "sku-1", user, 1)
				switch {
				case err == nil:
					mu.Lock()
					sold++
					mu.Unlock()
				case errors.Is(err, inventory.ErrSoldOut), errors.Is(err, inventory.ErrAlreadyBought), errors.Is(err, inventory.ErrLockBusy):
					// Shown when the test fails: a refusal that gave a
					// leased unit back names itself (a CI run once left a
					// unit of the expirable semaphore rung unsold).
					t.Logf("%s: sale of %s refused: %v", stage, user, err)
				default:
					t.Errorf("%s: sale of %s: %v", stage, user, err)
				}
			})
		}
	}
	wg.Wait()
	return sold
}

func orderAudit(t *testing.T, inv *inventory.Inventory, stage string) inventory.Audit {
	t.Helper()
	a, err := inv.Audit(context.Background(), stage, "sku-1")
	if err != nil {
		t.Fatal(err)
	}
	if a.Orders == nil {
		t.Fatalf("%s: audit without orders", stage)
	}
	return a
}

func users(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("user-%d", i)
	}
	return out
}

// Each per-user rung's defect, as a run shows it: eight eager buyers each
// send six requests at once, spread over the replicas; the business work
// between the check and the insert is the window.
func TestOnePerUserRungs(t *testing.T) {
	invs := orderReplicas(t, 3)
	for _, tc := range []struct {
		stage      string
		replicas   int
		duplicates bool
	}{
		{"one-per-user-naive", 1, true},
		{"one-per-user-naive", 3, true},
		{"one-per-user-synchronized", 1, false},
		{"one-per-user-synchronized", 3, true},
		{"one-per-user-lua", 3, false},
		{"one-per-user-lock", 3, false},
	} {
		t.Run(fmt.Sprintf("%s/%d", tc.stage, tc.replicas), func(t *testing.T) {
			prepare(t, invs, tc.stage, 100, inventory.Faults{Work: 30 * time.Millisecond})
			sold := buyEagerly(t, invs[:tc.replicas], tc.stage, users(8), 6)
			a := orderAudit(t, invs[0], tc.stage)
			o := a.Orders
			if got := o.DuplicateOrders > 0; got != tc.duplicates {
				t.Errorf("duplicate orders %d (buyers with more than one: %d), want duplicates: %v", o.DuplicateOrders, o.DuplicateBuyers, tc.duplicates)
			}
			if o.Orders != int64(sold) || o.Buyers != 8 || o.Undersold != 0 || a.Oversold != 0 || !a.Consistent {
				t.Errorf("audit %+v, orders %+v after %d sales answered", a.Counts, *o, sold)
			}
		})
	}
}

// The optimistic rungs: sixty buyers at once for twenty units. The version
// check refuses the sales that raced and leaves stock unsold; the
// stock >= q condition sells exactly the stock.
func TestOptimisticRungs(t *testing.T) {
	invs := orderReplicas(t, 3)
	for _, tc := range []struct {
		stage      string
		undersells bool
	}{
		{"optimistic-redis", true},
		{"optimistic-mysql-version", true},
		{"optimistic-mysql", false},
	} {
		t.Run(tc.stage, func(t *testing.T) {
			prepare(t, invs, tc.stage, 20, inventory.Faults{Work: 5 * time.Millisecond})
			sold := buyEagerly(t, invs, tc.stage, users(60), 1)
			a := orderAudit(t, invs[0], tc.stage)
			o := a.Orders
			if undersold := a.Stock > 0; undersold != tc.undersells || (o.Conflicts > 0) != tc.undersells {
				t.Errorf("%d of 20 left unsold after 60 buyers, %d conflicts; want undersold: %v", a.Stock, o.Conflicts, tc.undersells)
			}
			if o.Orders != int64(sold) || o.Units != a.Initial-a.Stock || a.Oversold != 0 {
				t.Errorf("audit %+v, orders %+v after %d sales answered", a.Counts, *o, sold)
			}
		})
	}
}

// faultyOrders is an order table whose next insert fails the way a lost,
// refused or unreachable database makes it fail.
type faultyOrders struct {
	orders.Store
	mu sync.Mutex
	// insert, when set, replaces the next Insert; void the next Void.
	insert, void func(ctx context.Context, o orders.Order) error
}

func (f *faultyOrders) Insert(ctx context.Context, o orders.Order) error {
	f.mu.Lock()
	fault := f.insert
	f.insert = nil
	f.mu.Unlock()
	if fault != nil {
		return fault(ctx, o)
	}
	return f.Store.Insert(ctx, o)
}

func (f *faultyOrders) Void(ctx context.Context, o orders.Order) error {
	f.mu.Lock()
	fault := f.void
	f.void = nil
	f.mu.Unlock()
	if fault != nil {
		return fault(ctx, o)
	}
	return f.Store.Void(ctx, o)
}

var errDown = errors.New("connection refused")

// A failed order insert: the sale answers unavailable and gives its units
// back unless the order may exist, so no unit is taken without an order
// unless the database cannot even be told to void it (then the audit counts
// it undersold).
func TestAFailedOrderInsertTakesNoUnitWithoutAnOrder(t *testing.T) {
	lite, err := orders.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "orders.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lite.Close() })
	faulty := &faultyOrders{Store: lite}
	inv := newOrderInventory(t, redistest.Start(t).Client(t), faulty, "r0")
	lostReply := func(ctx context.Context, o orders.Order) error {
		if err := lite.Insert(ctx, o); err != nil {
			return err
		}
		return errDown
	}
	down := func(context.Context, orders.Order) error { return errDown }
	for _, tc := range []struct {
		name                   string
		insert, void           func(context.Context, orders.Order) error
		sold, unknown          bool
		orders, undersold, sto int64
	}{
		{name: "reply lost", insert: lostReply, sold: true, orders: 1, sto: 9},
		{name: "insert refused", insert: down, orders: 0, sto: 10},
		// The void fails too: the sale cannot know, and says so; the resolver
		// voids the id once the database answers and gives the unit back.
		{name: "database down", insert: down, void: down, unknown: true, orders: 0, sto: 10},
	} {
		for _, stage := range []string{"one-per-user-lua", "one-per-user-lock", "optimistic-redis"} {
			t.Run(tc.name+"/"+stage, func(t *testing.T) {
				ctx := context.Background()
				if err := inv.Reset(ctx, stage, "sku-1", 10, 0); err != nil {
					t.Fatal(err)
				}
				faulty.mu.Lock()
				faulty.insert, faulty.void = tc.insert, tc.void
				faulty.mu.Unlock()
				_, err := inv.DeductFor(ctx, stage, "sku-1", "alice", 1)
				if sold := err == nil; sold != tc.sold || !tc.sold && !errors.Is(err, inventory.ErrOrdersUnavailable) {
					t.Fatalf("sale: %v, want sold: %v (else the order database unavailable)", err, tc.sold)
				}
				if unknown := errors.Is(err, inventory.ErrOutcomeUnknown); unknown != tc.unknown {
					t.Fatalf("sale: %v; want its outcome unknown: %v", err, tc.unknown)
				}
				eventually(t, func() error {
					a := orderAudit(t, inv, stage)
					if a.Orders.Orders != tc.orders || a.Orders.Undersold != tc.undersold || a.Stock != tc.sto {
						return fmt.Errorf("stock %d, orders %+v; want stock %d, %d orders, %d undersold", a.Stock, *a.Orders, tc.sto, tc.orders, tc.undersold)
					}
					return nil
				})
				if tc.undersold == 0 && !tc.sold { // alice got her place back
					if _, err := inv.DeductFor(ctx, stage, "sku-1", "alice", 1); err != nil {
						t.Fatalf("alice's sale after a voided order: %v", err)
					}
				}
			})
		}
	}
}

// A replica killed between the Redis deduction and the order insert: the
// rungs with the insert after the deduction lose that unit (undersold),
// the MySQL rung, whose order and stock move in one transaction, loses
// nothing.
func TestACrashBetweenDeductionAndOrderLeavesUndersoldUnits(t *testing.T) {
	invs := orderReplicas(t, 1)
	for _, tc := range []struct {
		stage     string
		undersold int64
	}{
		{"one-per-user-naive", 1},
		{"one-per-user-lua", 1},
		{"one-per-user-lock", 1},
		{"optimistic-redis", 1},
		{"optimistic-mysql", 0},
	} {
		t.Run(tc.stage, func(t *testing.T) {
			prepare(t, invs, tc.stage, 10, inventory.Faults{CrashHoldingLock: true})
			if _, err := invs[0].DeductFor(context.Background(), tc.stage, "sku-1", "alice", 1); !errors.Is(err, inventory.ErrCrashed) {
				t.Fatalf("sale: %v, want the injected crash", err)
			}
			if a := orderAudit(t, invs[0], tc.stage); a.Orders.Undersold != tc.undersold || a.Orders.Orders != 0 {
				t.Fatalf("stock %d, orders %+v; want %d undersold", a.Stock, *a.Orders, tc.undersold)
			}
		})
	}
}

// The crash window closed for keyed sales: a sale with an idempotency key
// that crashed between the Redis deduction and the insert is finished by
// the buyer's request sent again with the key — the same order id, whose
// deduction the script recognises, so nothing more is taken — on every
// stage that resumes keyed sales (optimistic-redis does not: it names no
// order before its EXEC). Its order is the key's.
func TestAKeyedSaleThatCrashedBeforeItsOrderIsFinishedByItsRetry(t *testing.T) {
	invs := orderReplicas(t, 2)
	for _, stage := range []string{"one-per-user-naive", "one-per-user-synchronized", "one-per-user-lua", "one-per-user-lock"} {
		t.Run(stage, func(t *testing.T) {
			if !invs[0].ResumesKeyedSales(stage) {
				t.Fatalf("%s does not resume keyed sales", stage)
			}
			prepare(t, invs, stage, 10, inventory.Faults{CrashHoldingLock: true})
			ctx := inventory.WithSaleKey(context.Background(), "key-1")
			if _, err := invs[0].DeductFor(ctx, stage, "sku-1", "alice", 1); !errors.Is(err, inventory.ErrCrashed) {
				t.Fatalf("sale: %v, want the injected crash", err)
			}
			sale, err := invs[1].DeductFor(ctx, stage, "sku-1", "alice", 1)
			if err != nil {
				t.Fatalf("the retry with the key: %v", err)
			}
			if want := orders.KeyedID(stage, "sku-1", "key-1", 0); sale.Order != want {
				t.Errorf("the retry's order %s, want the key's %s", sale.Order, want)
			}
			if a := orderAudit(t, invs[0], stage); a.Orders.Undersold != 0 || a.Orders.Orders != 1 || a.Stock != 9 {
				t.Fatalf("stock %d, orders %+v; want one unit sold, in one order", a.Stock, *a.Orders)
			}
		})
	}
}

// A database that stops answering (SIGSTOP to MariaDB): the sale answers
// within its deadline that its outcome is unknown, its units counted
// undersold until the order lands or is voided; once the database runs
// again the resolver settles it: nothing oversold, nothing undersold.
func TestAHungDatabaseAnswersWithinTheSaleDeadline(t *testing.T) {
	m := lockservertest.MariaDB(t)
	inv := newOrderInventory(t, redistest.Start(t).Client(t), mariaDBOrders(t, m), "r0")
	const stage = "one-per-user-lua"
	if err := inv.Reset(context.Background(), stage, "sku-1", 10, 0); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(m.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitStopped(t, m.Pid())
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = syscall.Kill(m.Pid(), syscall.SIGCONT)
		}
	}
	defer resume()
	const deadline = 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	_, err := inv.DeductFor(ctx, stage, "sku-1", "alice", 1)
	took := time.Since(start)
	if !errors.Is(err, inventory.ErrOrdersUnavailable) || !strings.Contains(err.Error(), "orders: mysql:") || !strings.Contains(err.Error(), "undersold") {
		t.Fatalf("sale on a hung database: %v, want the order database (mysql) unavailable, saying the units count as undersold", err)
	}
	if took > deadline+200*time.Millisecond {
		t.Fatalf("the sale answered after %v, past its %v deadline", took, deadline)
	}
	if !errors.Is(err, inventory.ErrOutcomeUnknown) {
		t.Fatalf("sale on a hung database: %v, want its outcome unknown", err)
	}
	resume()
	// The insert the server had read lands, or the resolver's void comes
	// first and the unit goes back: either way no unit stays undersold.
	var a inventory.Audit
	eventually(t, func() error {
		a = orderAudit(t, inv, stage)
		if a.Oversold != 0 || a.Initial-a.Stock != a.Orders.Units || a.Orders.Undersold != 0 {
			return fmt.Errorf("after the database resumed: stock %d, orders %+v", a.Stock, *a.Orders)
		}
		return nil
	})
	t.Logf("answered in %v; after the resume: %d orders, stock %d", took, a.Orders.Orders, a.Stock)
}

// waitStopped returns once every thread of pid is stopped: kill returns
// before a busy thread has taken the signal.
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
		if err != nil || len(tasks) == 0 {
			t.Fatalf("threads of %d: %v", pid, err)
		}
		stopped := 0
		for _, task := range tasks {
			stat, err := os.ReadFile(task)
			// The state follows the command's closing parenthesis.
			if i := strings.LastIndexByte(string(stat), ')'); err == nil && i+2 < len(stat) && stat[i+2] == 'T' {
				stopped++
			}
		}
		if stopped == len(tasks) {
			return
		}
	}
	t.Fatalf("process %d did not stop", pid)
}
