package inventory_test

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/faultproxy"
	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/lockstep/lockstep/inventory"
	"github.com/redis/go-redis/v9"
)

// stallRenewals holds back every watchdog renewal (renew.lua's EVALSHA)
// while on, as a starved or cut-off renewal path would.
type stallRenewals struct {
	sha []byte
	on  atomic.Bool
}

func (p *stallRenewals) Request(chunk []byte) time.Duration {
	if p.on.Load() && bytes.Contains(chunk, p.sha) {
		return 3 * time.Second
	}
	return 0
}

func (p *stallRenewals) Reply(_, _ []byte) (time.Duration, bool) { return 0, false }

// A watchdog sale whose renewals stalled reaches its write with less than
// a third of its lease left; the process then stalls past the lease (the
// before-write hook waits until the lock is gone from Redis and another
// replica has sold). It must write nothing: written, its stale read would
// undo the other sale's unit (stock + sold = initial + 1; CI saw it on a
// loaded machine in the default scenario's watchdog and segmented rows).
func TestAWriteNeedsAThirdOfTheLeaseLeft(t *testing.T) {
	for _, stage := range []string{"watchdog", "segmented"} {
		t.Run(stage, func(t *testing.T) {
			src, err := os.ReadFile("../lock/scripts/renew.lua")
			if err != nil {
				t.Fatal(err)
			}
			sum := sha1.Sum(src)
			policy := &stallRenewals{sha: []byte(hex.EncodeToString(sum[:]))}
			srv := redistest.Start(t)
			proxy, err := faultproxy.Start(srv.Addr, policy)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(proxy.Close)
			throughProxy := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: -1})
			t.Cleanup(func() { _ = throughProxy.Close() })
			replica := func(rdb redis.UniversalClient) *inventory.Inventory {
				inv, err := inventory.New(inventory.Config{
					Redis: rdb, LockWait: 5 * time.Second, FaultRefresh: 50 * time.Millisecond,
					DefaultSegments: 1, // one segment: both sales meet on its lock
					Logger:          slog.New(slog.NewTextHandler(io.Discard, nil)), Exit: func(int) {},
				})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = inv.Close() })
				return inv
			}
			stalled, far := replica(throughProxy), replica(srv.Client(t))
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := far.Reset(ctx, stage, "sku-1", 10, 1); err != nil {
				t.Fatal(err)
			}
			const lease = 300 * time.Millisecond
			if err := far.SetFaults(ctx, stage, inventory.Faults{Work: 250 * time.Millisecond, LockTTL: lease}); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				if f, err := stalled.Faults(stage); err == nil && f.LockTTL == lease {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the stalled replica never read the faults")
				}
			}
			admin := srv.Client(t)
			var farSale error
			afterTheLease := func(ctx context.Context) error {
				for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
					keys, err := admin.Keys(ctx, "lockstep:"+stage+":*:lock").Result()
					if err != nil {
						return err
					}
					if len(keys) == 0 {
						break
					}
					if time.Now().After(deadline) {
						return errors.New("the lock never expired")
					}
				}
				_, farSale = far.Deduct(ctx, stage, "sku-1", 1)
				return nil
			}
			policy.on.Store(true)
			_, err = stalled.Deduct(inventory.WithBeforeWrite(ctx, afterTheLease), stage, "sku-1", 1)
			policy.on.Store(false)
			if !errors.Is(err, inventory.ErrLockBusy) {
				t.Errorf("the sale with a third of its lease left answered %v, want ErrLockBusy (nothing sold)", err)
			}
			if farSale != nil {
				t.Errorf("the other replica's sale: %v", farSale)
			}
			audit, err := far.Audit(ctx, stage, "sku-1")
			if err != nil {
				t.Fatal(err)
			}
			if !audit.Consistent || audit.Stock+audit.Sold != 10 {
				t.Fatalf("after the stalled sale: %+v, want stock + sold = 10", audit)
			}
		})
	}
}
