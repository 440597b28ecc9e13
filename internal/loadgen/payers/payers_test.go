package payers

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/attack"
	"github.com/lockstep/lockstep/internal/loadgen/plan"
	"github.com/lockstep/lockstep/internal/loadgen/shopapi"
	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// TestLoadPayersPayTheOrdersOfTheSales: a payer starts for each sale whose
// answer names an order (none for a refusal or a sale without one), and its
// payment is counted paid, refused (409) or failed; a 404 is retried while
// the order is not written yet, and given up after the bound.
func TestLoadPayersPayTheOrdersOfTheSales(t *testing.T) {
	var mu sync.Mutex
	calls := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		order := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/api/orders/"), "/pay")
		mu.Lock()
		calls[order]++
		n := calls[order]
		mu.Unlock()
		switch {
		case order == "written-late" && n > 2, order == "paid":
			_, _ = w.Write([]byte(`{"status":"paid"}`))
		case order == "cancelled":
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte(`{"error":"order_cancelled","message":"cancelled"}`))
		default: // "never-written", and "written-late" twice
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error":"not_found","message":"no order"}`))
		}
	}))
	defer srv.Close()
	lp := Start(context.Background(), shopapi.New(""), srv.URL, plan.PaymentStep{PayWithin: plan.Duration(10 * time.Millisecond), Share: 1})
	lp.giveUpAfter = 300 * time.Millisecond
	sale := func(code uint16, body string) *vegeta.Result {
		return &vegeta.Result{Code: code, Body: []byte(body), Timestamp: time.Now()}
	}
	for _, r := range []*vegeta.Result{
		sale(200, `{"order":"paid","user":"u1"}`),
		sale(200, `{"order":"written-late","user":"u2"}`),
		sale(200, `{"order":"cancelled","user":"u3"}`),
		sale(200, `{"order":"never-written","user":"u4"}`),
		sale(200, `{"remaining":3}`),
		sale(409, `{"error":"sold_out"}`),
	} {
		lp.Observe(attack.Result{Result: r})
	}
	rep := lp.Wait()
	if rep.Orders != 4 || rep.Payers != 4 || rep.Paid != 2 || rep.Refused != 1 || rep.Failed != 1 ||
		rep.SentDuringLoad != 4 || !rep.DuringLoad || !strings.Contains(rep.FirstFailure, "404") {
		t.Errorf("report %+v", *rep)
	}
	if calls["written-late"] != 3 || calls["never-written"] < 3 {
		t.Errorf("calls %v: want written-late paid at its third, never-written retried until the bound", calls)
	}
}
