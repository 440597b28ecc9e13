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

// Issue 33, checker seed 20: a sale answered that its outcome is unknown
// (its insert's reply lost, the void refused), then the replica that owes
// its void and give-back stopped before the database came back. Another
// replica must finish them: the resolution was written to Redis before the
// answer, and is adopted once its owner is gone — closed (its heartbeat
// deleted) or cut off from Redis as a killed process is (its heartbeat
// lapses).
func TestAnOrderResolutionOfAStoppedReplicaIsFinishedByAnother(t *testing.T) {
	for name, store := range orderStores(t) {
		for _, stage := range []string{"one-per-user-lua", "one-per-user-lock"} {
			for _, stop := range []string{"closed", "killed"} {
				t.Run(name+"/"+stage+"/"+stop, func(t *testing.T) {
					srv := redistest.Start(t)
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
					defer store.set(func(h *hookedOrders) { h.insert, h.void = nil, nil })
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
					other := newOrderInventory(t, srv.Client(t), store, "r1")
					eventually(t, settled(other, stage, 0, 10))
					if stage == "one-per-user-lock" {
						return // her buyer lock stays with the stopped replica until its lease lapses
					}
					next, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					defer cancel()
					if _, err := other.DeductFor(next, stage, "sku-1", "alice", 1); err != nil {
						t.Fatalf("alice's next sale, once her first was voided: %v", err)
					}
					eventually(t, settled(other, stage, 1, 9))
				})
			}
		}
	}
}

// noFaults forwards every chunk as it comes: a link a test only cuts.
type noFaults struct{}

func (noFaults) Request([]byte) time.Duration            { return 0 }
func (noFaults) Reply(_, _ []byte) (time.Duration, bool) { return 0, false }
