package asyncorders_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockstep/lockstep/asyncorders"
	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/lockstep/lockstep/orders"
)

// loseReply runs every EVALSHA of the script whose SHA1 is sha and loses
// its reply (the script ran) while budget lasts, keeping the last such
// request in sent, for a test to send it again late.
type loseReply struct {
	sha    string
	budget *atomic.Int32
	sent   *atomic.Pointer[[]any]
}

func (l loseReply) DialHook(next redis.DialHook) redis.DialHook { return next }
func (l loseReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if args := cmd.Args(); err == nil && cmd.Name() == "evalsha" && len(args) > 1 && args[1] == l.sha && l.budget.Add(-1) >= 0 {
			err = &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
			cmd.SetErr(err)
			l.sent.Store(&args)
		}
		return err
	}
}
func (l loseReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// scriptSHA is the SHA1 of the package's script name, as EVALSHA names it.
func scriptSHA(t *testing.T, name string) string {
	t.Helper()
	src, err := os.ReadFile("scripts/" + name)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha1.Sum(src)
	return hex.EncodeToString(sum[:])
}

// The two scripts that read or move the round (doc.go's table): run, their
// reply lost, run again, or run late after a reset, the stores end in one
// round with each unit once.
func TestTheRoundScriptsRunTwiceOrLate(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	// reset fully resets stage as the shop does: Redis past the table's
	// round, then the table into Redis's round.
	reset := func(t *testing.T, q *asyncorders.Queue, stage string) error {
		floor, err := e.store.Round(ctx, stage, sku)
		if err != nil {
			return err
		}
		round, err := q.Reset(ctx, sku, 10, floor)
		if err != nil {
			return err
		}
		return e.payments.Reset(ctx, stage, sku, 10, round)
	}
	watch := func(t *testing.T, script string) (*redis.Client, *atomic.Int32, *atomic.Pointer[[]any]) {
		rdb := redis.NewClient(&redis.Options{Addr: e.rdb.Options().Addr})
		t.Cleanup(func() { _ = rdb.Close() })
		budget, sent := &atomic.Int32{}, &atomic.Pointer[[]any]{}
		rdb.AddHook(loseReply{sha: scriptSHA(t, script), budget: budget, sent: sent})
		return rdb, budget, sent
	}

	t.Run("reset.lua", func(t *testing.T) {
		rdb, budget, sent := watch(t, "reset.lua")
		q := asyncorders.NewQueue(rdb, "reset-lost")
		if err := reset(t, q, "reset-lost"); err != nil {
			t.Fatal(err)
		}
		e.start(t, q, e.payingConfig("w1"))
		// Reply lost: the reset fails, and the admin sends it again (the
		// script runs twice; the table is reset into the second's round).
		budget.Store(1)
		if err := reset(t, q, "reset-lost"); err == nil {
			t.Fatal("a reset whose reply was lost answered nil")
		}
		if err := reset(t, q, "reset-lost"); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Admit(ctx, message("ann"), true); err != nil {
			t.Fatal(err)
		}
		drain(t, q)
		wantOrders(t, e, q, 1)
		// Late: the lost run's request arrives after that reset. It is a
		// reset of its own whose table half nobody runs: bob's sale after
		// it waits, pending (never dropped nor dead-lettered) ...
		if err := e.rdb.Do(ctx, *sent.Load()...).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Admit(ctx, message("bob"), true); err != nil {
			t.Fatal(err)
		}
		if inv := check(t, e, q); inv.Units != 1 || inv.DeadLetters != 0 || inv.Length != 1 || inv.Remaining != 9 {
			t.Fatalf("after a late reset.lua: %+v; want bob's entry waiting for the table's reset (ann's order not yet deleted by it)", inv)
		}
		// ... until a reset is sent again, which replaces his round too.
		if err := reset(t, q, "reset-lost"); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Admit(ctx, message("cid"), true); err != nil {
			t.Fatal(err)
		}
		drain(t, q)
		wantOrders(t, e, q, 1)
	})

	t.Run("admit.lua", func(t *testing.T) {
		rdb, budget, sent := watch(t, "admit.lua")
		q := asyncorders.NewQueue(rdb, "admit-lost")
		if err := reset(t, q, "admit-lost"); err != nil {
			t.Fatal(err)
		}
		e.start(t, q, e.payingConfig("w1"))
		// Reply lost: the outcome is unknown; the admission ran, and its
		// order lands. Run again: the buyer is in the set.
		budget.Store(1)
		if _, err := q.Admit(ctx, message("dan"), true); !errors.Is(err, asyncorders.ErrOutcomeUnknown) {
			t.Fatalf("an admission whose reply was lost: %v, want ErrOutcomeUnknown", err)
		}
		if _, err := q.Admit(ctx, message("dan"), true); !errors.Is(err, asyncorders.ErrAlreadyBought) {
			t.Fatalf("the admission run again: %v, want ErrAlreadyBought", err)
		}
		drain(t, q)
		wantOrders(t, e, q, 1)
		// Late, after a reset: it runs in the new round, takes a unit of the
		// new stock, and its order lands in that round.
		if err := reset(t, q, "admit-lost"); err != nil {
			t.Fatal(err)
		}
		if err := e.rdb.Do(ctx, *sent.Load()...).Err(); err != nil {
			t.Fatal(err)
		}
		drain(t, q)
		wantOrders(t, e, q, 1)
	})
}

// reset.lua's round never falls behind the order table's (the floor),
// whatever Redis kept: after Redis lost its data a reset moves past the
// floor and an initialise takes it, so the table never refuses the round
// as a late reset's, nor the entries admitted next as stale; run twice or
// late (an older floor), it moves on from Redis's own round as before.
func TestTheRoundNeverFallsBehindTheTables(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
	q := asyncorders.NewQueue(rdb, "floor")
	for _, tc := range []struct {
		name string
		// lost flushes Redis first; reset resets, else initialises.
		lost, reset bool
		floor, want int64
	}{
		{"a first reset", true, true, 0, 1},
		{"a reset run again, the table not yet moved", false, true, 0, 2},
		{"a reset after Redis lost its data", true, true, 5, 6},
		{"the same reset run again (its reply lost)", false, true, 5, 7},
		{"a reset late with an older floor", false, true, 3, 8},
		{"an initialise of a SKU Redis has", false, false, 3, 8},
		{"an initialise after Redis lost its data", true, false, 8, 8},
		{"the same initialise run again", false, false, 8, 8},
		{"an initialise of a never-reset SKU", true, false, 0, 0},
	} {
		if tc.lost {
			if err := rdb.FlushAll(ctx).Err(); err != nil {
				t.Fatal(err)
			}
		}
		var err error
		if tc.reset {
			_, err = q.Reset(ctx, sku, 10, tc.floor)
		} else {
			err = q.Initialise(ctx, sku, 10, tc.floor)
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		a, err := q.Admit(ctx, asyncorders.Message{OrderID: orders.NewID(), SKU: sku, User: fmt.Sprint("u", tc.want, tc.name), Qty: 1}, true)
		if err != nil || a.Round != tc.want {
			t.Fatalf("%s: the next admission's round %d (%v), want %d", tc.name, a.Round, err, tc.want)
		}
	}
}
