package main

import (
	"math"
	"testing"
)

// A keyed sale's own work runs inside the key's check: it counts in the
// rows of what it does, not in the idempotency check's.
func TestSharesOfClaimsEachSampleOnce(t *testing.T) {
	const traces = `File: shop
Type: cpu
-----------+-------------------------------------------------------
      20ms   encoding/json.Marshal
             github.com/lockstep/lockstep/internal/httpapi.(*idempotency).run
             github.com/lockstep/lockstep/internal/httpapi.(*idempotency).do
             net/http.(*conn).serve
-----------+-------------------------------------------------------
      30ms   github.com/redis/go-redis/v9.(*Script).EvalSha
             github.com/lockstep/lockstep/inventory.(*store).atomicDeduct
             github.com/lockstep/lockstep/internal/httpapi.(*Server).sell
             github.com/lockstep/lockstep/internal/httpapi.(*idempotency).run
             net/http.(*conn).serve
-----------+-------------------------------------------------------
      10ms   github.com/lockstep/lockstep/internal/httpapi.saleBody.appendJSON (inline)
             github.com/lockstep/lockstep/internal/httpapi.(*Server).sell
             github.com/lockstep/lockstep/internal/httpapi.(*idempotency).run
-----------+-------------------------------------------------------
     1.04s   runtime.futex
             runtime.findRunnable
-----------+-------------------------------------------------------
`
	shares, err := sharesOf(traces)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]float64{0: 2, 2: 1, 4: 3, len(parts): 104} // of 110 ms: idempotency, JSON, Redis client, the rest
	for i, got := range shares {
		if w := want[i] * 100 / 110; math.Abs(got-w) > 1e-9 {
			name := "the rest"
			if i < len(parts) {
				name = parts[i].name
			}
			t.Errorf("%s: %.2f%%, want %.2f%%", name, got, w)
		}
	}
}
