package shop_test

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/lockstep/lockstep/internal/shop"
)

// TestRedlock: with three independent masters redlock is available, never
// oversells across three replicas, and keeps selling when one master (not
// the one holding the stock) fails.
func TestRedlock(t *testing.T) {
	stock, second, third := redistest.Start(t), redistest.Start(t), redistest.Start(t)
	r := startReplicas(t, stock, 3, func(c *shop.Config) {
		c.RedisAddrs = []string{stock.Addr, second.Addr, third.Addr}
	})
	var stages struct {
		Stages []struct {
			ID        string `json:"id"`
			Available bool   `json:"available"`
		} `json:"stages"`
	}
	if err := json.Unmarshal(r.do(0, http.MethodGet, "/api/stages", "", nil).body, &stages); err != nil {
		t.Fatal(err)
	}
	for _, s := range stages.Stages {
		if s.ID == "redlock" && !s.Available {
			t.Fatalf("redlock unavailable with three masters")
		}
	}
	r.setFaults("redlock", `{"work":"1ms"}`)
	a, _ := sellOut(t, r, "redlock", 60, 10*time.Second)
	if a.Oversold != 0 || !a.Consistent || a.Sold != 60 {
		t.Fatalf("redlock: %+v", a.Audit)
	}

	third.Stop()
	r.reset("redlock", 20, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	answers := r.hammer(ctx, "redlock", 12, 2*time.Millisecond)
	a = r.audit("redlock")
	t.Logf("redlock with one master down: %+v, answers %v", a.Audit, answers.status)
	if a.Sold != 20 || !a.Consistent || a.Oversold != 0 {
		t.Fatalf("redlock with one of three masters down: %+v", a.Audit)
	}
}

// TestMetrics: the SPEC's metrics, prefixed lockstep_ and labelled by stage,
// count what happened.
func TestMetrics(t *testing.T) {
	r := startReplicas(t, redistest.Start(t), 1)
	r.reset("atomic", 2, 0)
	for range 3 {
		r.deduct(0, "atomic", "")
	}
	r.setFaults("setnx-expire", `{"work":"60ms","lock_ttl":"20ms"}`)
	ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
	r.hammer(ctx, "setnx-expire", 8, 2*time.Millisecond)
	cancel()
	// Renewed every 100ms (at least three times in 400ms); a renewal 200ms
	// late on a loaded machine would still keep the lock.
	r.setFaults("watchdog", `{"work":"400ms","lock_ttl":"300ms"}`)
	if res := r.deduct(0, "watchdog", ""); res.status != http.StatusOK {
		t.Fatalf("watchdog deduct = %d %s", res.status, res.body)
	}
	rdb := r.redis.Client(t)
	rdb.Set(t.Context(), "lockstep:setnx:{sku-1}:lock", "someone", 0)
	r.deduct(0, "setnx", "")

	body := string(r.do(0, http.MethodGet, "/metrics", "", nil).body)
	for _, tc := range []struct {
		series string
		check  func(float64) bool
	}{
		{`lockstep_requests_total{result="sold",stage="atomic"}`, eq(2)},
		{`lockstep_requests_total{result="sold_out",stage="atomic"}`, eq(1)},
		{`lockstep_requests_total{result="lock_busy",stage="setnx"}`, eq(1)},
		{`lockstep_request_duration_seconds_count{stage="atomic"}`, eq(3)},
		{`lockstep_lock_acquisitions_total{result="busy",stage="setnx"}`, eq(1)},
		{`lockstep_lock_acquisitions_total{result="acquired",stage="watchdog"}`, eq(1)},
		{`lockstep_lock_wait_seconds_count{stage="watchdog"}`, eq(1)},
		{`lockstep_watchdog_renewals_total{result="renewed",stage="watchdog"}`, atLeast(3)},
		{`lockstep_foreign_unlocks_total{stage="setnx-expire"}`, atLeast(1)},
		{`lockstep_stock{sku="sku-1",stage="atomic"}`, eq(0)},
		{`lockstep_sold{sku="sku-1",stage="atomic"}`, eq(2)},
		{`lockstep_oversold{sku="sku-1",stage="atomic"}`, eq(0)},
		{`lockstep_consistent{sku="sku-1",stage="atomic"}`, eq(1)},
		{`lockstep_consistent{sku="sku-1",stage="setnx-expire"}`, eq(0)},
		{`lockstep_redis_pool_conns`, atLeast(1)},
	} {
		v, ok := sample(body, tc.series)
		if !ok || !tc.check(v) {
			t.Errorf("%s = %v (present %v)", tc.series, v, ok)
		}
	}
	// All but the shop-wide connection gauges (metrics.RedisPools,
	// metrics.HTTPConns) and the sold-out mark's (one mark per replica,
	// its state exported with or without it) are per stage.
	shopWide := strings.NewReplacer("lockstep_redis_pool_conns ", "", "lockstep_redis_pool_idle_conns ", "", "lockstep_http_open_conns ", "",
		"lockstep_soldout_marks ", "", "lockstep_soldout_mark_listening ", "")
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "lockstep_") && !strings.Contains(line, `stage="`) && shopWide.Replace(line) == line {
			t.Errorf("series without a stage label: %s", line)
		}
	}
}

func eq(want float64) func(float64) bool     { return func(v float64) bool { return v == want } }
func atLeast(min float64) func(float64) bool { return func(v float64) bool { return v >= min } }

// sample finds one series' value in a Prometheus exposition.
func sample(body, series string) (float64, bool) {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(m[1], 64)
	return v, err == nil
}
