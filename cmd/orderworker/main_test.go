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
// any entry, after-insert with one (whose redelivery is a duplicate
// delivery). A second worker claims them: every sale is one order, nothing
// is pending, and the stock adds up.
func TestAWorkerKilledAtItsFaultPointLosesAndDoublesNothing(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "orderworker")
	if msg, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, msg)
	}
	for _, tc := range []struct {
		name     string
		at       asyncorders.FaultPoint
		bySignal bool
		rows     int64 // of the entries it held, how many had their order row
	}{
		{"-crash-at after-insert", asyncorders.AfterInsert, false, 1},
		{"SIGUSR1 arms after-read", asyncorders.AfterRead, true, 0},
		{"SIGUSR2 arms after-insert", asyncorders.AfterInsert, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			srv := redistest.Start(t)
			rdb := srv.Client(t)
			dbPath := filepath.Join(t.TempDir(), "orders.db")
			store, err := orders.OpenSQLite(ctx, dbPath)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = store.Close() })
			q := asyncorders.NewQueue(rdb, asyncorders.StageStream)
			const stock = 300
			if err := q.Reset(ctx, "sku-1", stock); err != nil {
				t.Fatal(err)
			}
			sold := 0
			sell := func() {
				m := asyncorders.Message{OrderID: orders.NewID(), SKU: "sku-1", User: fmt.Sprintf("b%d", sold), Qty: 1, Replica: "r"}
				if _, err := q.Admit(ctx, m, true); err != nil {
					t.Fatal(err)
				}
				sold++
			}
			worker := func(consumer string, extra ...string) *child {
				args := append([]string{"-redis-addr", srv.Addr, "-orders-sqlite", dbPath, "-stages", asyncorders.StageStream,
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
			var exit *exec.ExitError
			if err := dying.err; !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("the dying worker: %v; want killed by SIGKILL", dying.err)
			}
			held, err := q.HeldBy(ctx, "sku-1", "dies")
			if err != nil || len(held) == 0 {
				t.Fatalf("held after the death: %+v %v", held, err)
			}
			written, err := store.List(ctx, asyncorders.StageStream, "sku-1", "", stock)
			if err != nil {
				t.Fatal(err)
			}
			if rows := asyncorders.Written(held, written); rows != tc.rows {
				t.Fatalf("%d of the %d entries it held had their order row; want %d", rows, len(held), tc.rows)
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
			if err := live.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if <-live.done; live.err != nil {
				t.Fatalf("stop: %v", live.err)
			}
		})
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
