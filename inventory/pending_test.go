package inventory_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockstep/lockstep/internal/faultproxy"
	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/lockstep/lockstep/inventory"
	"github.com/lockstep/lockstep/orders"
)

// stranded is a sale of alice answered that its outcome is unknown (its
// insert's reply lost, the void refused) on a replica whose resolver then
// stops before the database answers again: closed (its heartbeat deleted)
// or, killed, cut off from Redis (its heartbeat lapses). The database
// answers once it returns; srv is the Redis both replicas use.
func stranded(t *testing.T, store *hookedOrders, stage, stop string) (srv *redistest.Server) {
	t.Helper()
	srv = redistest.Start(t)
	link, err := faultproxy.Start(srv.Addr, noFaults{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(link.Close)
	ownerRedis := redis.NewClient(&redis.Options{Addr: link.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = ownerRedis.Close() })
	owner, err := inventory.New(inventory.Config{
		Redis: ownerRedis, Orders: store, Replica: "r0", LockWait: 5 * time.Second, FaultRefresh: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Exit: func(int) {},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := owner.Reset(context.Background(), stage, "sku-1", 10, 0); err != nil {
		t.Fatal(err)
	}
	var voidDown atomic.Bool
	voidDown.Store(true)
	store.set(func(h *hookedOrders) {
		h.insert = func(context.Context, orders.Order) error { return lostReply("insert") }
		h.void = func(ctx context.Context, o orders.Order) error {
			if voidDown.Load() {
				return fmt.Errorf("orders: void: %w: %w", orders.ErrUnavailable, errDown)
			}
			return h.Store.Void(ctx, o)
		}
	})
	t.Cleanup(func() { store.set(func(h *hookedOrders) { h.insert, h.void = nil, nil }) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := owner.DeductFor(ctx, stage, "sku-1", "alice", 1); !errors.Is(err, inventory.ErrOutcomeUnknown) {
		t.Fatalf("sale whose order may still land: %v, want its outcome unknown", err)
	}
	switch stop {
	case "closed":
		_ = owner.Close()
	case "killed":
		link.Close() // it can neither resolve nor renew its heartbeat
		t.Cleanup(func() { _ = owner.Close() })
	}
	store.set(func(h *hookedOrders) { h.insert = nil })
	voidDown.Store(false)
	return srv
}

// Issue 33, checker seed 20: a replica that answered a sale's outcome
// unknown stops before it resolved it. Another replica must finish the
// void and the give-back: the resolution was written to Redis before the
// answer, and is adopted once its owner is gone.
func TestAnOrderResolutionOfAStoppedReplicaIsFinishedByAnother(t *testing.T) {
	for name, store := range orderStores(t) {
		for _, stage := range []string{"one-per-user-lua", "one-per-user-lock"} {
			for _, stop := range []string{"closed", "killed"} {
				t.Run(name+"/"+stage+"/"+stop, func(t *testing.T) {
					srv := stranded(t, store, stage, stop)
					other := newOrderInventory(t, srv.Client(t), store, "r1")
					eventually(t, settled(other, stage, 0, 10))
					if stage == "one-per-user-lock" {
						return // her buyer lock stays with the stopped replica until its lease lapses
					}
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					defer cancel()
					if _, err := other.DeductFor(ctx, stage, "sku-1", "alice", 1); err != nil {
						t.Fatalf("alice's next sale, once her first was voided: %v", err)
					}
					eventually(t, settled(other, stage, 1, 9))
				})
			}
		}
	}
}

// The writes of a pending resolution, each run twice or late: the adoption
// script run again after its reply was lost answers that the entry is the
// adopter's, and the adopter still resolves it; an entry recorded again
// after it was resolved (a late HSET) is resolved again, giving nothing
// more back; its deletion run twice deletes nothing more.
func TestThePendingResolutionWritesRunTwiceOrLate(t *testing.T) {
	const stage = "one-per-user-lua"
	store := orderStores(t)["sqlite"]
	srv := stranded(t, store, stage, "killed")
	rdb := srv.Client(t)
	ctx := context.Background()
	key := "lockstep:" + stage + ":pending-orders"
	entries, err := rdb.HGetAll(ctx, key).Result()
	if err != nil || len(entries) != 1 {
		t.Fatalf("pending entries %v (%v), want the stranded sale's", entries, err)
	}
	var id, raw string
	for id, raw = range entries {
	}
	time.Sleep(4 * time.Second) // the stopped owner's heartbeat lapses

	// The adoption ran, its reply lost: run again, it answers adopted.
	adopt := loadedScript(t, rdb, "pending_adopt.lua")
	mine := `{"owner":"r9-adopter"}`
	for run := range 2 {
		if n, err := rdb.EvalSha(ctx, adopt, []string{key}, id, raw, mine).Int(); err != nil || n != 1 {
			t.Fatalf("adoption run %d: %d, %v; want 1", run+1, n, err)
		}
	}
	if n, err := rdb.EvalSha(ctx, adopt, []string{key}, id, raw, `{"owner":"r8-late"}`).Int(); err != nil || n != 0 {
		t.Fatalf("an adoption of the entry as it was, after another's: %d, %v; want 0", n, err)
	}
	// The real entry back, as a late record from its owner would write it.
	if err := rdb.HSet(ctx, key, id, raw).Err(); err != nil {
		t.Fatal(err)
	}
	other := newOrderInventory(t, rdb, store, "r1")
	eventually(t, settled(other, stage, 0, 10))
	eventually(t, func() error {
		if n, err := rdb.HLen(ctx, key).Result(); err != nil || n != 0 {
			return fmt.Errorf("%d pending entries (%v), want none once resolved", n, err)
		}
		return nil
	})
	// Recorded late after its resolution: resolved again, nothing more given back.
	if err := rdb.HSet(ctx, key, id, raw).Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() error {
		if n, err := rdb.HLen(ctx, key).Result(); err != nil || n != 0 {
			return fmt.Errorf("%d pending entries (%v), want the late one resolved", n, err)
		}
		return nil
	})
	if err := settled(other, stage, 0, 10)(); err != nil {
		t.Fatalf("after the late entry was resolved again: %v", err)
	}
}

// noFaults forwards every chunk as it comes: a link a test only cuts.
type noFaults struct{}

func (noFaults) Request([]byte) time.Duration            { return 0 }
func (noFaults) Reply(_, _ []byte) (time.Duration, bool) { return 0, false }
