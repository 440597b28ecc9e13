package shop_test

import (
	"bytes"
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/redistest"
)

// TestIdempotencyAcrossReplicas: 20 concurrent requests with one key, spread
// over three replicas, sell exactly once and all get the first answer.
func TestIdempotencyAcrossReplicas(t *testing.T) {
	r := startReplicas(t, redistest.Start(t), 3)
	for _, stage := range []string{"watchdog", "atomic", "segmented"} {
		t.Run(stage, func(t *testing.T) {
			r.reset(stage, 100, 0)
			r.setFaults(stage, `{"work":"20ms"}`) // so the retries race the first attempt
			key := map[string]string{"Idempotency-Key": "order-" + stage}
			answers := make([]response, 20)
			var wg sync.WaitGroup
			for i := range answers {
				wg.Go(func() { answers[i] = r.do(i, http.MethodPost, "/api/stages/"+stage+"/deduct?qty=2", "", key) })
			}
			wg.Wait()
			replayed := 0
			for i, a := range answers {
				if a.status != http.StatusOK || !bytes.Equal(a.body, answers[0].body) {
					t.Errorf("answer %d = %d %s, want the first answer 200 %s", i, a.status, a.body, answers[0].body)
				}
				if a.header.Get("Idempotent-Replayed") == "true" {
					replayed++
				}
			}
			if replayed != len(answers)-1 {
				t.Errorf("%d answers replayed, want %d", replayed, len(answers)-1)
			}
			if a := r.audit(stage); a.Sold != 2 || !a.Consistent {
				t.Errorf("audit after 20 tries of one sale: %+v", a.Audit)
			}
			// A later retry still gets the first answer; another key sells again.
			if res := r.do(1, http.MethodPost, "/api/stages/"+stage+"/deduct?qty=2", "", key); !bytes.Equal(res.body, answers[0].body) {
				t.Errorf("late retry = %d %s", res.status, res.body)
			}
			other := map[string]string{"Idempotency-Key": "other-" + stage}
			if res := r.do(2, http.MethodPost, "/api/stages/"+stage+"/deduct?qty=2", "", other); res.status != http.StatusOK {
				t.Errorf("another key = %d %s", res.status, res.body)
			}
			if res := r.do(0, http.MethodPost, "/api/stages/"+stage+"/deduct?qty=3", "", key); res.status != http.StatusBadRequest {
				t.Errorf("key reused for another qty = %d %s", res.status, res.body)
			}
			if a := r.audit(stage); a.Sold != 4 || !a.Consistent {
				t.Errorf("audit: %+v, want 4 sold", a.Audit)
			}
		})
	}

	t.Run("sold out is not kept: it sold nothing", func(t *testing.T) {
		r.reset("atomic", 0, 0)
		key := map[string]string{"Idempotency-Key": "too-late"}
		if first := r.do(0, http.MethodPost, "/api/stages/atomic/deduct", "", key); first.status != http.StatusConflict {
			t.Fatalf("sale of an empty stock = %d %s", first.status, first.body)
		}
		r.reset("atomic", 10, 0)
		if again := r.do(1, http.MethodPost, "/api/stages/atomic/deduct", "", key); again.status != http.StatusOK {
			t.Errorf("retry after restock = %d %s, want a sale", again.status, again.body)
		}
	})

	t.Run("busy is not kept", func(t *testing.T) {
		r.reset("setnx", 10, 0)
		rdb := r.redis.Client(t)
		lockKey := "lockstep:setnx:{sku-1}:lock"
		rdb.Set(t.Context(), lockKey, "someone", 0)
		key := map[string]string{"Idempotency-Key": "busy-then-free"}
		if res := r.do(0, http.MethodPost, "/api/stages/setnx/deduct", "", key); res.status != http.StatusLocked {
			t.Fatalf("deduct with the lock held = %d %s", res.status, res.body)
		}
		rdb.Del(t.Context(), lockKey)
		if res := r.do(1, http.MethodPost, "/api/stages/setnx/deduct", "", key); res.status != http.StatusOK {
			t.Errorf("retry once the lock is free = %d %s, want a sale", res.status, res.body)
		}
		if a := r.audit("setnx"); a.Sold != 1 {
			t.Errorf("audit: %+v", a.Audit)
		}
	})
}

// TestRedisOutage: with Redis gone every stage answers 503 redis_unavailable
// within a second and readiness fails; once it is back sales resume, and the
// correct stages stayed consistent throughout (Redis keeps its data on disk
// here, so the audit spans the outage).
func TestRedisOutage(t *testing.T) {
	srv := redistest.Start(t, "--appendonly", "yes", "--appendfsync", "always")
	r := startReplicas(t, srv, 3)
	stages := []string{"watchdog", "segmented", "atomic"}
	for _, s := range stages {
		r.reset(s, 100000, 0)
		// A lock whose holder lost Redis expires soon after it returns.
		r.setFaults(s, `{"work":"1ms","lock_ttl":"1s"}`)
	}

	ctx, stopLoad := context.WithCancel(context.Background())
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		sales = make(map[string]int)
	)
	for k := range 24 {
		wg.Go(func() {
			stage := stages[k%len(stages)]
			for ctx.Err() == nil {
				if res := r.deduct(k, stage, ""); res.status == http.StatusOK {
					mu.Lock()
					sales[stage]++
					mu.Unlock()
				} else {
					time.Sleep(10 * time.Millisecond)
				}
			}
		})
	}
	time.Sleep(300 * time.Millisecond)
	srv.Stop()
	time.Sleep(100 * time.Millisecond)
	for i, s := range append(stages, "setnx", "naive") {
		res := r.deduct(i, s, "")
		if res.status != http.StatusServiceUnavailable || res.code() != "redis_unavailable" || res.elapsed > time.Second {
			t.Errorf("%s with Redis down = %d %s after %v, want 503 redis_unavailable within 1s", s, res.status, res.body, res.elapsed)
		}
	}
	for i := range r.urls {
		if res := r.do(i, http.MethodGet, "/readyz", "", nil); res.status != http.StatusServiceUnavailable || res.elapsed > time.Second {
			t.Errorf("readyz of replica %d with Redis down = %d after %v", i, res.status, res.elapsed)
		}
		if res := r.do(i, http.MethodGet, "/healthz", "", nil); res.status != http.StatusOK {
			t.Errorf("healthz of replica %d with Redis down = %d: liveness must not depend on Redis", i, res.status)
		}
	}

	srv.Restart()
	mu.Lock()
	before := map[string]int{}
	for s, n := range sales {
		before[s] = n
	}
	mu.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	for _, s := range stages {
		for {
			mu.Lock()
			resumed := sales[s] > before[s]
			mu.Unlock()
			if resumed {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no sale within 5s of Redis coming back", s)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	stopLoad()
	wg.Wait()
	for i := range r.urls {
		if res := r.do(i, http.MethodGet, "/readyz", "", nil); res.status != http.StatusOK {
			t.Errorf("readyz of replica %d after Redis came back = %d %s", i, res.status, res.body)
		}
	}
	for _, s := range stages {
		a := r.audit(s)
		t.Logf("%s: %d answered sales, audit %+v", s, sales[s], a.Counts)
		// A write whose answer was lost with Redis may have happened, so the
		// audit may count more sales than were answered 200, never fewer.
		if !a.Consistent || a.Oversold != 0 || a.Sold < int64(sales[s]) {
			t.Errorf("%s after the outage: %+v with %d answered sales", s, a.Audit, sales[s])
		}
	}
}

// TestSetnxCrashLeavesTheLockStuck: a replica that "dies" right after taking
// the setnx lock (the injected exit returns instead of ending the process)
// leaves a lock with no TTL: no replica sells until a reset drops it. The
// crash fault fires once, on one replica.
func TestSetnxCrashLeavesTheLockStuck(t *testing.T) {
	r := startReplicas(t, redistest.Start(t), 3)
	r.reset("setnx", 10, 0)
	r.setFaults("setnx", `{"crash_holding_lock":true}`)
	if res := r.deduct(0, "setnx", ""); res.status != http.StatusInternalServerError {
		t.Fatalf("deduct that crashes = %d %s", res.status, res.body)
	}
	if len(r.exits) != 1 || r.exits[0] != 137 {
		t.Fatalf("exit calls = %v, want one with 137", r.exits)
	}
	rdb := r.redis.Client(t)
	if ttl := rdb.TTL(t.Context(), "lockstep:setnx:{sku-1}:lock").Val(); ttl != -1 {
		t.Fatalf("TTL of the stuck lock = %v, want -1 (none)", ttl)
	}
	for i := range 3 {
		if res := r.deduct(i, "setnx", ""); res.status != http.StatusLocked {
			t.Errorf("deduct on replica %d after the crash = %d %s, want 423", i, res.status, res.body)
		}
	}
	if len(r.exits) != 1 {
		t.Errorf("the crash fault fired %d times, want once", len(r.exits))
	}
	r.reset("setnx", 10, 0)
	if res := r.deduct(1, "setnx", ""); res.status != http.StatusOK {
		t.Errorf("deduct after reset = %d %s", res.status, res.body)
	}
	if a := r.audit("setnx"); a.Sold != 1 || !a.Consistent {
		t.Errorf("audit: %+v", a.Audit)
	}
}

// TestWatchdogRecoversFromACrash: a replica dying while it holds the
// watchdog lock stops renewing it, so the others sell again once the
// watchdog timeout (here 300ms) runs out, with nothing oversold.
func TestWatchdogRecoversFromACrash(t *testing.T) {
	var r *replicas
	r = startReplicas(t, redistest.Start(t), 3, withCrashClosing(&r))
	r.reset("watchdog", 10, 0)
	r.setFaults("watchdog", `{"lock_ttl":"300ms","crash_holding_lock":true}`)
	if res := r.deduct(0, "watchdog", ""); res.status != http.StatusInternalServerError {
		t.Fatalf("deduct that crashes = %d %s", res.status, res.body)
	}
	crashed := time.Now()
	for {
		res := r.deduct(1, "watchdog", "")
		if res.status == http.StatusOK {
			break
		}
		if time.Since(crashed) > 3*time.Second {
			t.Fatalf("no sale 3s after the crash: last answer %d %s", res.status, res.body)
		}
	}
	recovery := time.Since(crashed)
	t.Logf("first sale %v after the crash", recovery)
	if recovery < 200*time.Millisecond {
		t.Errorf("sold %v after the crash: the crashed holder's lock cannot have expired yet", recovery)
	}
	if a := r.audit("watchdog"); a.Sold != 1 || !a.Consistent {
		t.Errorf("audit: %+v", a.Audit)
	}
}
