package frontdoor

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/lockstep/lockstep/inventory"
	"github.com/redis/go-redis/v9"
)

// runMark starts a mark on a fresh Redis, waits until it listens, and
// answers it with a client of that Redis.
func runMark(t *testing.T, ttl time.Duration, lose func(*redis.Message) bool) (*SoldOutMark, *redis.Client) {
	t.Helper()
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	m := NewSoldOutMark(rdb, ttl)
	m.lose = lose
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	eventually(t, time.Second, m.Listening)
	return m, rdb
}

func eventually(t *testing.T, within time.Duration, ok func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !ok() {
		if time.Since(start) > within {
			t.Fatalf("not within %v", within)
		}
		time.Sleep(time.Millisecond)
	}
	return time.Since(start)
}

func learn(m *SoldOutMark) { m.Learn("atomic", "sku-1", m.Begin()) }

func marked(m *SoldOutMark) bool { return m.Marked("atomic", "sku-1") }

// A stock-back message clears the mark on every replica: here, as soon as
// it arrives (the TTL is an hour).
func TestSoldOutMarkClearedByStockBack(t *testing.T) {
	m, rdb := runMark(t, time.Hour, nil)
	learn(m)
	if !marked(m) || m.Size() != 1 {
		t.Fatal("a learned sell-out is not marked")
	}
	if err := rdb.Publish(context.Background(), inventory.StockBackChannel, "atomic sku-1").Err(); err != nil {
		t.Fatal(err)
	}
	took := eventually(t, time.Second, func() bool { return !marked(m) })
	t.Logf("cleared %v after the message was published", took)
}

// A lost message leaves the mark until its TTL ends, no longer.
func TestSoldOutMarkLostMessageBoundedByTTL(t *testing.T) {
	var lost atomic.Int64
	const ttl = 300 * time.Millisecond
	m, rdb := runMark(t, ttl, func(*redis.Message) bool { lost.Add(1); return true })
	learned := time.Now()
	learn(m)
	if err := rdb.Publish(context.Background(), inventory.StockBackChannel, "atomic sku-1").Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Second, func() bool { return lost.Load() == 1 })
	if !marked(m) {
		t.Fatal("the mark cleared without its message")
	}
	eventually(t, time.Second, func() bool { return !marked(m) })
	if held := time.Since(learned); held > ttl+100*time.Millisecond {
		t.Fatalf("the mark held %v after a lost message, past its TTL of %v", held, ttl)
	}
}

// A sold-out answer of a sale begun before a clear is not learned: it may
// predate the reset the clear announced.
func TestSoldOutMarkIgnoresAnswersOlderThanAClear(t *testing.T) {
	m, rdb := runMark(t, time.Hour, nil)
	epoch := m.Begin()
	if err := rdb.Publish(context.Background(), inventory.StockBackChannel, "atomic sku-1").Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Second, func() bool { return m.Begin() != epoch })
	m.Learn("atomic", "sku-1", epoch)
	if marked(m) {
		t.Fatal("a sold-out answer from before the reset was learned")
	}
}

// A lost subscription drops every mark and learns nothing until it is back
// (go-redis resubscribes): a message sent meanwhile cannot be missed.
func TestSoldOutMarkLostSubscription(t *testing.T) {
	m, rdb := runMark(t, time.Hour, nil)
	learn(m)
	if err := rdb.ClientKillByFilter(context.Background(), "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Second, func() bool { return !marked(m) })
	eventually(t, 5*time.Second, m.Listening)
	learn(m)
	if !marked(m) {
		t.Fatal("nothing is learned after the subscription came back")
	}
}

// The give-back scripts announce the units they return: run as the shop
// and the order workers run them, each clears the mark.
func TestSoldOutMarkClearedByGiveBacks(t *testing.T) {
	for _, tc := range []struct {
		script string
		keys   []string
		args   []any
	}{
		{"../../inventory/scripts/segment_give_back.lua", []string{"{s}:stock", "{s}:sold"}, []any{1}},
		{"../../asyncorders/scripts/compensate.lua",
			[]string{"{s}:stock", "{s}:sold", "{s}:buyers", "{s}:compensated", "{s}:stream", "{s}:dead", "{s}:round"},
			[]any{"order-1", "", "workers", "cancelled", 1, "", "", "0"}},
	} {
		t.Run(tc.script, func(t *testing.T) {
			src, err := os.ReadFile(tc.script)
			if err != nil {
				t.Fatal(err)
			}
			m, rdb := runMark(t, time.Hour, nil)
			learn(m)
			// A sold-out SKU: compensate.lua gives nothing into a stock
			// Redis lost.
			if err := rdb.Set(context.Background(), "{s}:stock", 0, 0).Err(); err != nil {
				t.Fatal(err)
			}
			if err := rdb.Eval(context.Background(), string(src), tc.keys, tc.args...).Err(); err != nil {
				t.Fatal(err)
			}
			eventually(t, 5*time.Second, func() bool { return !marked(m) })
		})
	}
}
