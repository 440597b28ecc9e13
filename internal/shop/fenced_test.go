package shop_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/redistest"
)

// TestFencedRefusesAHolderThatLostItsLock loses the lock of a sale in the
// middle of its work — the key is deleted, as an expiry during a pause or a
// failover would — while the holder's watchdog has not noticed yet. A second
// sale then takes the lock and sells. watchdog lets the first holder write
// its stale read back (two sales, one unit gone: inconsistent); fenced
// refuses it (one sale, consistent).
func TestFencedRefusesAHolderThatLostItsLock(t *testing.T) {
	r := startReplicas(t, redistest.Start(t), 2)
	rdb := r.redis.Client(t)
	for _, tc := range []struct {
		stage      string
		consistent bool
	}{
		{"watchdog", false},
		{"fenced", true},
	} {
		t.Run(tc.stage, func(t *testing.T) {
			// Renewals every second: the 150ms of work never sees one.
			r.setFaults(tc.stage, `{"work":"150ms","lock_ttl":"3s"}`)
			r.reset(tc.stage, 10, 0)
			lockKey := "lockstep:" + tc.stage + ":{sku-1}:lock"
			var wg sync.WaitGroup
			answers := make([]response, 2)
			wg.Add(1)
			go func() { defer wg.Done(); answers[0] = r.deduct(0, tc.stage, "") }()
			waitUntil(t, func() bool { return rdb.Exists(t.Context(), lockKey).Val() == 1 })
			time.Sleep(30 * time.Millisecond) // the first holder has read the stock
			rdb.Del(t.Context(), lockKey)     // and loses its lock without knowing
			wg.Add(1)
			go func() { defer wg.Done(); answers[1] = r.deduct(1, tc.stage, "") }()
			wg.Wait()

			a := r.audit(tc.stage)
			t.Logf("%s: first %d %s, second %d %s, audit %+v", tc.stage,
				answers[0].status, answers[0].body, answers[1].status, answers[1].body, a.Audit)
			if a.Consistent != tc.consistent {
				t.Fatalf("%s: consistent = %v, want %v: %+v", tc.stage, a.Consistent, tc.consistent, a.Audit)
			}
			if tc.stage == "fenced" {
				if answers[0].status != http.StatusLocked || answers[1].status != http.StatusOK || a.Sold != 1 {
					t.Fatalf("fenced: first holder %d (want 423), second %d (want 200), sold %d (want 1)",
						answers[0].status, answers[1].status, a.Sold)
				}
			}
		})
	}
}

func TestFencedNeverOversells(t *testing.T) {
	r := startReplicas(t, redistest.Start(t), 3)
	r.setFaults("fenced", `{"work":"1ms","work_max":"2ms"}`)
	a, answers := sellOut(t, r, "fenced", 150, 10*time.Second)
	t.Logf("fenced, 3 replicas: %+v, answers %v", a.Audit, answers.status)
	if a.Oversold != 0 || !a.Consistent || a.Stock != 0 || a.Sold != 150 {
		t.Fatalf("fenced: %+v, want all 150 sold, none oversold, consistent", a)
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("condition not met within 3s")
}
