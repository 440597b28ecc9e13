package httpapi_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/lockstep/lockstep/internal/shop"
	"github.com/redis/go-redis/v9"
)

// markedReplicas are n shops with the sold-out mark on one Redis.
func markedReplicas(t *testing.T, n int, ttl time.Duration) ([]*shop.Shop, *redis.Client) {
	t.Helper()
	srv := redistest.Start(t)
	var out []*shop.Shop
	for i := range n {
		s, err := shop.New(shop.Config{
			RedisAddrs: []string{srv.Addr}, Replica: "r" + string(rune('0'+i)), AdminToken: testToken,
			LockWait: time.Second, SoldOutMarkTTL: ttl, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		out = append(out, s)
	}
	for _, s := range out { // the marks learn nothing until subscribed
		for deadline := time.Now().Add(5 * time.Second); metricValue(t, s, "lockstep_soldout_mark_listening") != 1; {
			if time.Now().After(deadline) {
				t.Fatal("a replica's mark never subscribed")
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return out, srv.Client(t)
}

func metricValue(t *testing.T, s *shop.Shop, name string) float64 {
	t.Helper()
	families, err := s.Metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			total += m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return total
}

func sellOn(s *shop.Shop) int {
	req := httptest.NewRequest(http.MethodPost, "/api/stages/atomic/deduct?sku=sku-1", nil)
	req.RemoteAddr = "192.0.2.1:1234"
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	if rec.Code == http.StatusConflict && !strings.Contains(rec.Body.String(), `"sold_out"`) {
		return -1
	}
	return rec.Code
}

// scriptRuns is how many scripts the Redis ran: every sale of atomic is one.
func scriptRuns(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, line := range strings.Split(info, "\r\n") {
		if strings.HasPrefix(line, "cmdstat_evalsha:") || strings.HasPrefix(line, "cmdstat_eval:") {
			calls, _, _ := strings.Cut(strings.TrimPrefix(line[strings.Index(line, ":")+1:], "calls="), ",")
			n, _ := strconv.ParseInt(calls, 10, 64)
			total += n
		}
	}
	return total
}

// Once a replica learned the SKU is sold out, it answers sold_out from
// memory: no script runs in Redis.
func TestSoldOutMarkAnswersFromMemory(t *testing.T) {
	r, rdb := markedReplicas(t, 1, time.Hour)
	if err := r[0].Inventory.Reset(context.Background(), "atomic", "sku-1", 1, 0); err != nil {
		t.Fatal(err)
	}
	for i, want := range []int{http.StatusOK, http.StatusConflict} {
		if got := sellOn(r[0]); got != want {
			t.Fatalf("sale %d = %d, want %d", i, got, want)
		}
	}
	before := scriptRuns(t, rdb)
	for range 20 {
		if got := sellOn(r[0]); got != http.StatusConflict {
			t.Fatalf("sale after the sell-out = %d, want 409 sold_out", got)
		}
	}
	if runs := scriptRuns(t, rdb) - before; runs != 0 {
		t.Fatalf("20 sales after the sell-out ran %d scripts in Redis, want 0", runs)
	}
	if got := metricValue(t, r[0], "lockstep_soldout_mark_answers_total"); got != 20 {
		t.Fatalf("lockstep_soldout_mark_answers_total = %v, want 20", got)
	}
}

// A reset during load clears every replica's mark through pub/sub: each
// replica sells again within the bound, though the marks' TTL is an hour.
func TestSoldOutMarkResetDuringLoad(t *testing.T) {
	// The reset's own round trips and pub/sub's delivery, on a loaded machine:
	// far below the marks' TTL, so only the message can have cleared them.
	const bound = 5 * time.Second
	r, _ := markedReplicas(t, 3, time.Hour)
	if err := r[0].Inventory.Reset(context.Background(), "atomic", "sku-1", 0, 0); err != nil {
		t.Fatal(err)
	}
	var resetAt atomic.Pointer[time.Time]
	firstSale := make([]atomic.Int64, len(r)) // ns after the reset
	var sold atomic.Int64
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i, s := range r {
		for range 2 {
			wg.Go(func() {
				for ctx.Err() == nil {
					switch sellOn(s) {
					case http.StatusOK:
						sold.Add(1)
						if at := resetAt.Load(); at != nil {
							firstSale[i].CompareAndSwap(0, int64(time.Since(*at)))
						} else {
							t.Error("a sale before the reset")
						}
					case http.StatusConflict:
					default:
						t.Error("a sale answered neither 200 nor 409 sold_out")
					}
				}
			})
		}
	}
	for _, s := range r { // every replica has learned the sell-out
		for deadline := time.Now().Add(5 * time.Second); metricValue(t, s, "lockstep_soldout_marks") != 1; {
			if time.Now().After(deadline) {
				t.Fatal("a replica never marked the sell-out")
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	now := time.Now()
	resetAt.Store(&now)
	if err := r[0].Inventory.Reset(context.Background(), "atomic", "sku-1", 60, 0); err != nil {
		t.Fatal(err)
	}
	time.Sleep(bound)
	stop()
	wg.Wait()
	for i := range r {
		took := time.Duration(firstSale[i].Load())
		if took == 0 || took > bound {
			t.Errorf("replica %d: first sale %v after the reset, want within %v", i, took, bound)
		}
		t.Logf("replica %d sold again %v after the reset", i, took)
	}
	if a, err := r[0].Inventory.Audit(context.Background(), "atomic", "sku-1"); err != nil || a.Sold != sold.Load() || !a.Consistent {
		t.Fatalf("audit %+v (%v), %d sales answered", a, err, sold.Load())
	}
}
