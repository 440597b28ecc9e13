package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockstep/lockstep/asyncorders"
	"github.com/lockstep/lockstep/internal/crashhook"
	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/lockstep/lockstep/orders"
)

func TestFlagsFallBackToEnvironmentAndBadOnesAreErrors(t *testing.T) {
	env := map[string]string{"LOCKSTEP_CONSUMER": "w9", "LOCKSTEP_ORDERS_SQLITE": "/tmp/o.db", "LOCKSTEP_CLAIM_IDLE": "2s"}
	o, err := parseFlags([]string{"-skus", "a,b"}, func(k string) string { return env[k] })
	if err != nil || o.consumer != "w9" || o.ordersSQLite != "/tmp/o.db" || o.claimIdle != 2*time.Second || o.skus != "a,b" {
		t.Fatalf("%+v %v", o, err)
	}
	// Every fault point can be armed at start; only two by a signal.
	for _, p := range asyncorders.FaultPoints() {
		if o, err := parseFlags([]string{"-orders-sqlite", "x", "-crash-at", string(p)}, func(string) string { return "" }); err != nil || o.crashAt != string(p) {
			t.Errorf("-crash-at %s: %+v %v", p, o, err)
		}
	}
	for _, args := range [][]string{
		{"-orders-sqlite", "x", "-stages", "atomic"},
		{"-orders-sqlite", "x", "-mysql-dsn", "y"},
		{},
		{"-orders-sqlite", "x", "-max-deliveries", "0"},
		{"-orders-sqlite", "x", "-crash-at", "after-ack"},
	} {
		if _, err := parseFlags(args, func(string) string { return "" }); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// A worker process armed at a fault point (by -crash-at at start, or by
// its signal while it runs) kills itself with SIGKILL the next time a batch
// reaches that point, holding that batch: after-read with no order row for
// any entry, after-insert with its batch's (whose redelivery is a
// duplicate delivery). A second worker claims them: every sale is one order, nothing
// is pending, and the stock adds up.
func TestAWorkerKilledAtItsFaultPointLosesAndDoublesNothing(t *testing.T) {
	bin := build(t)
	for _, tc := range []struct {
		name     string
		at       asyncorders.FaultPoint
		bySignal bool
		// written: every entry it held had its order row (its batch
		// inserted), or none did
		written bool
	}{
		{"-crash-at after-insert", asyncorders.AfterInsert, false, true},
		{"SIGUSR1 arms after-read", asyncorders.AfterRead, true, false},
		{"SIGUSR2 arms after-insert", asyncorders.AfterInsert, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			const stock = 300
			srv, rdb, dbPath, store, q := newSale(t, stock)
			sold := 0
			sell := func() {
				m := asyncorders.Message{OrderID: orders.NewID(), SKU: "sku-1", User: fmt.Sprintf("b%d", sold), Qty: 1, Replica: "r"}
				if _, err := q.Admit(ctx, m, true); err != nil {
					t.Fatal(err)
				}
				sold++
			}
			worker := func(consumer string, extra ...string) *child {
				return start(t, bin, srv.Addr, dbPath, consumer, extra...)
			}
			var dying *child
			if tc.bySignal {
				dying = worker("dies")
				waitForConsumer(t, rdb, q.Stream("sku-1"), "dies")
				sig, err := crashhook.Signal(tc.at)
				if err != nil {
					t.Fatal(err)
				}
				if err := dying.cmd.Process.Signal(sig); err != nil {
					t.Fatal(err)
				}
			} else {
				for sold < stock {
					sell()
				}
				dying = worker("dies", "-crash-at", string(tc.at))
			}
			// Sales go on until it dies: the ones before its arming are
			// written and acknowledged as usual.
			deadline := time.After(30 * time.Second)
		selling:
			for {
				select {
				case <-deadline:
					t.Fatalf("the worker armed %s did not die within 30 s", tc.at)
				case <-dying.done:
					break selling
				case <-time.After(5 * time.Millisecond):
					if sold < stock {
						sell()
					}
				}
			}
			wantKilled(t, dying)
			held, err := q.HeldBy(ctx, "sku-1", "dies")
			if err != nil || len(held) == 0 {
				t.Fatalf("held after the death: %+v %v", held, err)
			}
			written, err := store.List(ctx, asyncorders.StageStream, "sku-1", "", stock)
			if err != nil {
				t.Fatal(err)
			}
			want := int64(0)
			if tc.written {
				want = int64(len(held))
			}
			if rows := asyncorders.Written(held, written); rows != want {
				t.Fatalf("%d of the %d entries it held had their order row; want %d", rows, len(held), want)
			}
			live := worker("lives")
			for sold < stock {
				sell()
			}
			dctx, cancel := context.WithTimeout(ctx, 60*time.Second)
			defer cancel()
			if err := q.Drain(dctx, "sku-1"); err != nil {
				t.Fatal(err)
			}
			inv, err := q.Check(ctx, store, nil, "sku-1")
			if err != nil || !inv.Holds || inv.Units != stock {
				t.Fatalf("invariant %+v %v", inv, err)
			}
			c, err := store.Counts(ctx, asyncorders.StageStream, "sku-1")
			if err != nil || c.Orders != stock || c.DuplicateBuyers != 0 {
				t.Fatalf("counts %+v %v", c, err)
			}
			// A stop finishes what the worker holds and exits 0.
			stopWorker(t, live)
		})
	}
}

// A worker started with -crash-at after-claim dies holding the entries
// its claim took from a dead consumer, with no row; one started with
// -crash-at after-void dies inside a give-up of a duplicate buyer's entry,
// its order id void and its unit not back. The next worker's claim
// finishes both: one order per claimed entry, the duplicate's unit back
// once, its buyer (whose first order stands) kept.
func TestAWorkerKilledAfterAClaimOrInsideAGiveUpIsFinishedByTheNext(t *testing.T) {
	bin := build(t)
	for _, tc := range []struct {
		at asyncorders.FaultPoint
		// held: entries it dies holding; returned: of those, units given
		// back by the next worker (the rest become orders).
		held, returned int64
	}{
		{asyncorders.AfterClaim, 3, 0},
		{asyncorders.AfterVoid, 1, 1},
	} {
		t.Run(string(tc.at), func(t *testing.T) {
			ctx := context.Background()
			srv, rdb, dbPath, store, q := newSale(t, 10)
			admit := func(user string) {
				m := asyncorders.Message{OrderID: orders.NewID(), SKU: "sku-1", User: user, Qty: 1, Replica: "r"}
				if _, err := q.Admit(ctx, m, true); err != nil {
					t.Fatal(err)
				}
			}
			drain := func() {
				dctx, cancel := context.WithTimeout(ctx, 60*time.Second)
				defer cancel()
				if err := q.Drain(dctx, "sku-1"); err != nil {
					t.Fatal(err)
				}
			}
			stream := q.Stream("sku-1")
			switch tc.at {
			case asyncorders.AfterClaim: // a consumer that read three entries and died
				for _, u := range []string{"ann", "bob", "cid"} {
					admit(u)
				}
				if err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: asyncorders.Group, Consumer: "ghost",
					Streams: []string{stream, ">"}, Count: 3}).Err(); err != nil {
					t.Fatal(err)
				}
			case asyncorders.AfterVoid: // ann's order stands, and the buyers' set forgot her
				first := start(t, bin, srv.Addr, dbPath, "first")
				admit("ann")
				drain()
				stopWorker(t, first)
				if err := rdb.SRem(ctx, "lockstep:"+asyncorders.StageStream+":{sku-1}:buyers", "ann").Err(); err != nil {
					t.Fatal(err)
				}
				admit("ann")
			}
			before, err := q.Check(ctx, store, nil, "sku-1")
			if err != nil {
				t.Fatal(err)
			}
			dying := start(t, bin, srv.Addr, dbPath, "dies", "-crash-at", string(tc.at))
			select {
			case <-dying.done:
			case <-time.After(30 * time.Second):
				t.Fatalf("the worker armed %s did not die within 30 s", tc.at)
			}
			wantKilled(t, dying)
			held, err := q.HeldBy(ctx, "sku-1", "dies")
			if err != nil || int64(len(held)) != tc.held {
				t.Fatalf("held after the death: %+v %v; want %d", held, err, tc.held)
			}
			inv, err := q.Check(ctx, store, nil, "sku-1")
			if err != nil || inv.Units != before.Units || inv.Remaining != before.Remaining || inv.Pending != tc.held {
				t.Fatalf("after the death: %+v %v (before %+v)", inv, err, before)
			}
			live := start(t, bin, srv.Addr, dbPath, "lives")
			drain()
			inv, err = q.Check(ctx, store, nil, "sku-1")
			if err != nil || !inv.Holds || inv.Remaining != before.Remaining+tc.returned || inv.DeadLetters != tc.returned {
				t.Fatalf("after the next claim: %+v %v (before %+v)", inv, err, before)
			}
			c, err := store.Counts(ctx, asyncorders.StageStream, "sku-1")
			if err != nil || c.Orders != before.Units+tc.held-tc.returned || c.DuplicateBuyers != 0 {
				t.Fatalf("counts %+v %v", c, err)
			}
			if tc.returned > 0 { // her first order stands: she is still a buyer
				m := asyncorders.Message{OrderID: orders.NewID(), SKU: "sku-1", User: "ann", Qty: 1, Replica: "r"}
				if _, err := q.Admit(ctx, m, true); !errors.Is(err, asyncorders.ErrAlreadyBought) {
					t.Fatalf("ann again: %v; want ErrAlreadyBought", err)
				}
			}
			stopWorker(t, live)
		})
	}
}

// newSale is a Redis with async-stream's sku-1 reset to stock units, and
// an SQLite order table at dbPath.
func newSale(t *testing.T, stock int64) (*redistest.Server, *redis.Client, string, *orders.SQLStore, *asyncorders.Queue) {
	t.Helper()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	dbPath := filepath.Join(t.TempDir(), "orders.db")
	store, err := orders.OpenSQLite(context.Background(), dbPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	q := asyncorders.NewQueue(rdb, asyncorders.StageStream)
	if _, err := q.Reset(context.Background(), "sku-1", stock, 0); err != nil {
		t.Fatal(err)
	}
	return srv, rdb, dbPath, store, q
}

// build builds the worker binary.
func build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "orderworker")
	if msg, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, msg)
	}
	return bin
}

// start runs a worker process of async-stream on sku-1 until the test ends.
func start(t *testing.T, bin, redisAddr, dbPath, consumer string, extra ...string) *child {
	t.Helper()
	args := append([]string{"-redis-addr", redisAddr, "-orders-sqlite", dbPath, "-stages", asyncorders.StageStream,
		"-consumer", consumer, "-batch", "50", "-claim-idle", "500ms", "-claim-every", "200ms", "-block", "100ms"}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, done: make(chan struct{})}
	go func() { c.err = cmd.Wait(); close(c.done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-c.done })
	return c
}

// wantKilled fails unless c ended by SIGKILL.
func wantKilled(t *testing.T, c *child) {
	t.Helper()
	var exit *exec.ExitError
	if err := c.err; !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the dying worker: %v; want killed by SIGKILL", c.err)
	}
}

// stopWorker stops c as a deploy does (SIGTERM): it finishes what it
// holds and exits 0.
func stopWorker(t *testing.T, c *child) {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if <-c.done; c.err != nil {
		t.Fatalf("stop: %v", c.err)
	}
}

// child is a worker process; err is its Wait's, once done is closed.
type child struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// waitForConsumer waits until consumer reads stream: it listens for its
// arming signals by then.
func waitForConsumer(t *testing.T, rdb *redis.Client, stream, consumer string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		consumers, err := rdb.XInfoConsumers(context.Background(), stream, asyncorders.Group).Result()
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(consumers, func(c redis.XInfoConsumer) bool { return c.Name == consumer }) {
			return
		}
	}
	t.Fatalf("%s never read %s", consumer, stream)
}
