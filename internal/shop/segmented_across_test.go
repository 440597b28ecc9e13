package shop_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"

	"github.com/lockstep/lockstep/internal/redistest"
)

// A sale of 2 from stock 3 in 2 segments (2 + 1), after one unit sold from
// the 2-unit segment, takes one unit from each segment: 1 + 1 remain.
func TestSegmentedSellsAcrossSegments(t *testing.T) {
	r := startReplicas(t, redistest.Start(t), 1)
	for _, stage := range segmentedStages {
		t.Run(stage, func(t *testing.T) { sellsAcrossSegments(t, r, stage) })
	}
}

// segmentedStages are the stages that split the stock into segments.
var segmentedStages = []string{"segmented", "segmented-atomic"}

func sellsAcrossSegments(t *testing.T, r *replicas, stage string) {
	for {
		r.reset(stage, 3, 2)
		res := r.deduct(0, stage, "")
		if res.status != http.StatusOK {
			t.Fatalf("first unit: %d %s", res.status, res.body)
		}
		if res.field("segment") == 0.0 { // the random pick took the 2-unit segment
			break
		}
	}
	res := r.deduct(0, stage, "?qty=2")
	if res.status != http.StatusOK || res.field("remaining") != 0.0 || fmt.Sprint(res.field("segments")) != "[0 1]" {
		t.Fatalf("qty 2 with 1 + 1 left = %d %s, want 200 from segments [0 1]", res.status, res.body)
	}
	if res := r.deduct(0, stage, ""); res.status != http.StatusConflict || res.code() != "sold_out" {
		t.Fatalf("with nothing left = %d %s, want sold out", res.status, res.body)
	}
	if a := r.audit(stage); a.Sold != 3 || a.Stock != 0 || !a.Consistent || a.Segments[0].Sold != 2 || a.Segments[1].Sold != 1 {
		t.Fatalf("audit %+v", a.Audit)
	}
}

// Many SKUs, random quantities, concurrent sales across replicas: no SKU
// oversells, every answered unit is counted, and a sale is refused only
// when the SKU held less than it asked for. Stock only falls, so a refused
// qty must exceed the stock left at the end. Segments hold 1-3 units and
// sales ask for up to 6: most sales must be served by several segments.
func TestSegmentedRefusesOnlyWhatTheSKUCannotServe(t *testing.T) {
	r := startReplicas(t, redistest.Start(t), 3)
	for _, stage := range segmentedStages {
		t.Run(stage, func(t *testing.T) { refusesOnlyWhatTheSKUCannotServe(t, r, stage) })
	}
}

func refusesOnlyWhatTheSKUCannotServe(t *testing.T, r *replicas, stage string) {
	r.setFaults(stage, `{"work":"1ms"}`)
	rng := rand.New(rand.NewPCG(1, 2))
	const skus = 8
	initial := make(map[string]int64, skus)
	var supply int64
	for i := range skus {
		sku := fmt.Sprintf("across-%d", i)
		n := 2 + rng.IntN(7)
		initial[sku] = int64(n + rng.IntN(2*n+1)) // 1-3 units a segment
		supply += initial[sku]
		body := fmt.Sprintf(`{"sku":%q,"stock":%d,"segments":%d}`, sku, initial[sku], n)
		if res := r.do(0, http.MethodPost, "/api/stages/"+stage+"/reset", body, r.admin()); res.status != http.StatusOK {
			t.Fatalf("reset %s: %d %s", sku, res.status, res.body)
		}
	}
	type refusal struct {
		sku string
		qty int64
	}
	var (
		mu       sync.Mutex
		sold     = make(map[string]int64)
		refused  []refusal
		wg       sync.WaitGroup
		ctx      = t.Context()
		requests = make(chan refusal)
	)
	for k := range 12 {
		wg.Go(func() {
			for req := range requests {
				res := r.deduct(k%3, stage, fmt.Sprintf("?sku=%s&qty=%d", req.sku, req.qty))
				mu.Lock()
				switch {
				case res.status == http.StatusOK:
					sold[req.sku] += req.qty
				case res.code() == "sold_out":
					refused = append(refused, req)
				case res.status == http.StatusLocked: // busy: a truthful "try again"
				default:
					t.Errorf("%s qty %d: %d %s", req.sku, req.qty, res.status, res.body)
				}
				mu.Unlock()
			}
		})
	}
	// As many units asked for as there are, at random: some SKUs sell out,
	// others end with stock left, and refusals happen in both.
	for demand := int64(0); demand < supply && ctx.Err() == nil; {
		req := refusal{sku: fmt.Sprintf("across-%d", rng.IntN(skus)), qty: 1 + rng.Int64N(6)}
		select {
		case requests <- req:
			demand += req.qty
		case <-ctx.Done():
		}
	}
	close(requests)
	wg.Wait()

	left := make(map[string]int64, skus)
	var served int64
	for sku, stock := range initial {
		res := r.do(0, http.MethodGet, "/api/stages/"+stage+"/audit?sku="+sku, "", nil)
		var a auditResult
		if err := json.Unmarshal(res.body, &a); err != nil || res.status != http.StatusOK {
			t.Fatalf("audit %s: %d %s", sku, res.status, res.body)
		}
		if a.Initial != stock || !a.Consistent || a.Oversold != 0 || a.Sold != sold[sku] {
			t.Errorf("%s: audit %+v, %d units answered sold", sku, a.Audit, sold[sku])
		}
		left[sku], served = a.Stock, served+a.Sold
	}
	for _, ref := range refused {
		if left[ref.sku] >= ref.qty {
			t.Errorf("%s: a sale of %d was refused sold out, yet %d units are left at the end", ref.sku, ref.qty, left[ref.sku])
		}
	}
	t.Logf("%d units sold, %d refusals, left %v", served, len(refused), left)
	if served == 0 {
		t.Fatal("nothing sold: the test proves nothing")
	}
}
