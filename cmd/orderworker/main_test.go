package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/lockstep/lockstep/asyncorders"
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
	} {
		if _, err := parseFlags(args, func(string) string { return "" }); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// Two worker processes drain one stream; one exits as kill -9 would after
// its 20th insert, before that order's ack (a forced duplicate delivery, and
// a worker dead mid-batch with entries pending). The other claims them:
// every sale is one order, nothing is pending, and the stock adds up.
func TestAWorkerKilledMidBatchLosesAndDoublesNothing(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "orderworker")
	if msg, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, msg)
	}
	ctx := context.Background()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	dbPath := filepath.Join(dir, "orders.db")
	store, err := orders.OpenSQLite(ctx, dbPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	q := asyncorders.NewQueue(rdb, asyncorders.StageStream)
	const sales = 300
	if err := q.Reset(ctx, "sku-1", sales); err != nil {
		t.Fatal(err)
	}
	for i := range sales {
		m := asyncorders.Message{OrderID: orders.NewID(), SKU: "sku-1", User: fmt.Sprintf("b%d", i), Qty: 1, Replica: "r"}
		if _, err := q.Admit(ctx, m, true); err != nil {
			t.Fatal(err)
		}
	}
	worker := func(consumer string, extra ...string) *exec.Cmd {
		args := append([]string{"-redis-addr", srv.Addr, "-orders-sqlite", dbPath, "-stages", asyncorders.StageStream,
			"-consumer", consumer, "-batch", "50", "-claim-idle", "500ms", "-claim-every", "200ms", "-block", "100ms"}, extra...)
		cmd := exec.Command(bin, args...)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	dying := worker("dies", "-die-after-inserts", "20")
	var exit *exec.ExitError
	if err := dying.Wait(); !errors.As(err, &exit) || exit.ExitCode() != killedExitCode {
		t.Fatalf("the dying worker: %v", err)
	}
	if s, err := q.Stats(ctx, "sku-1"); err != nil || s.Pending == 0 {
		t.Fatalf("after the death, nothing pending: %+v %v", s, err)
	}
	live := worker("lives")
	dctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := q.Drain(dctx, "sku-1"); err != nil {
		t.Fatal(err)
	}
	inv, err := q.Check(ctx, store, "sku-1")
	if err != nil || !inv.Holds || inv.Units != sales {
		t.Fatalf("invariant %+v %v", inv, err)
	}
	c, err := store.Counts(ctx, asyncorders.StageStream, "sku-1")
	if err != nil || c.Orders != sales || c.DuplicateBuyers != 0 {
		t.Fatalf("counts %+v %v", c, err)
	}
	// A stop finishes what the worker holds and exits 0.
	if err := live.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := live.Wait(); err != nil {
		t.Fatalf("stop: %v", err)
	}
}
