package shopapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/lockstep/lockstep/asyncorders"
	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/inventory"
)

// flakyAudits is a shop whose audits answer 503 redis_unavailable (its
// Redis read timed out) the first failures times, then answer.
func flakyAudits(t *testing.T, failures int64, answer report.Audit) (string, *atomic.Int64) {
	t.Helper()
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if calls.Add(1) <= failures {
			w.WriteHeader(http.StatusServiceUnavailable)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "redis_unavailable", "message": "read stock: i/o timeout"})
			return
		}
		_ = json.NewEncoder(w).Encode(answer)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &calls
}

// TestAFailedAuditIsReadAgain: an audit answered 503 is read again,
// bounded: the figures of the read that answers are the run's; one that
// never answers fails with its error.
func TestAFailedAuditIsReadAgain(t *testing.T) {
	c := New("")
	url, calls := flakyAudits(t, 2, report.Audit{Initial: 10, Stock: 4, Sold: 6})
	if a, err := c.AuditPatiently(context.Background(), url, "async-stream", "sku-1"); err != nil || a.Sold != 6 || calls.Load() != 3 {
		t.Errorf("audit %+v, %v after %d calls; want the third call's figures", a, err, calls.Load())
	}
	url, calls = flakyAudits(t, 1<<40, report.Audit{})
	if a, err := c.AuditPatiently(context.Background(), url, "async-stream", "sku-1"); err == nil || calls.Load() < 2 {
		t.Errorf("audit %+v, %v after %d calls; want the 503 after reading again", a, err, calls.Load())
	}
}

// TestADrainOutlivesAFailedAudit: the drain after an async run polls the
// audit; one poll answered 503 is polled again, and the drain ends on the
// audit that shows the stream drained (it failed the drain before).
func TestADrainOutlivesAFailedAudit(t *testing.T) {
	c := New("")
	url, calls := flakyAudits(t, 1, report.Audit{Initial: 10, Stock: 4, Sold: 6, Stream: &asyncorders.Stats{Length: 6}})
	a, _, err := c.Drain(context.Background(), url, "async-stream", "sku-1", report.Audit{Stream: &asyncorders.Stats{Undelivered: 6}})
	if err != nil || a.Stream == nil || !a.Stream.Drained() || a.Stream.Length != 6 {
		t.Fatalf("drain: %+v, %v after %d audits; want the drained stream of the second", a.Stream, err, calls.Load())
	}
}

// The run's drain waits, after the stream drained, until no cancelled
// order's unit is on its way back: its audit is the first with none.
func TestTheDrainWaitsForTheSweepersReturns(t *testing.T) {
	var audits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		var returning int64
		if audits.Add(1) < 3 {
			returning = 1
		}
		_ = json.NewEncoder(w).Encode(report.Audit{Initial: 2, Stream: &asyncorders.Stats{}, Orders: &inventory.OrderCounts{Returning: returning}})
	}))
	t.Cleanup(srv.Close)
	c := New("")
	first := report.Audit{Initial: 2, Stream: &asyncorders.Stats{}, Orders: &inventory.OrderCounts{Returning: 1}}
	a, _, err := c.Drain(context.Background(), srv.URL, "async-stream", "sku-1", first)
	if err != nil {
		t.Fatal(err)
	}
	if a.Orders.Returning != 0 || audits.Load() != 3 {
		t.Errorf("the drain ended with %d returning after %d audits; want 0 after 3", a.Orders.Returning, audits.Load())
	}
}
