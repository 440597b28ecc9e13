package shop_test

import (
	"net/http"
	"testing"

	"github.com/lockstep/lockstep/internal/redistest"
)

// TestEmptySegmentsGauge: lockstep_segments_empty counts the segmented
// audit's segments with no stock left, from none after a reset to every
// one once the stock is sold out.
func TestEmptySegmentsGauge(t *testing.T) {
	r := startReplicas(t, redistest.Start(t), 1)
	r.reset("segmented", 5, 4)
	const series = `lockstep_segments_empty{sku="sku-1",stage="segmented"}`
	scrape := func() float64 {
		t.Helper()
		v, ok := sample(string(r.do(0, http.MethodGet, "/metrics", "", nil).body), series)
		if !ok {
			t.Fatalf("no %s in /metrics", series)
		}
		return v
	}
	emptyInAudit := func() float64 {
		t.Helper()
		n := 0.0
		for _, s := range r.audit("segmented").Segments {
			if s.Stock == 0 {
				n++
			}
		}
		return n
	}
	if got := scrape(); got != 0 {
		t.Fatalf("after reset: %s = %v, want 0", series, got)
	}
	for sold := 1; sold <= 5; sold++ {
		if res := r.deduct(0, "segmented", ""); res.status != http.StatusOK {
			t.Fatalf("deduct %d: %d %s", sold, res.status, res.body)
		}
		if got, want := scrape(), emptyInAudit(); got != want {
			t.Errorf("after %d sales: %s = %v, the audit has %v empty segments", sold, series, got, want)
		}
	}
	if got := scrape(); got != 4 {
		t.Errorf("sold out: %s = %v, want all 4 segments", series, got)
	}
	// A stage without segments has no such series.
	r.reset("atomic", 2, 0)
	body := string(r.do(0, http.MethodGet, "/metrics", "", nil).body)
	if _, ok := sample(body, `lockstep_stock{sku="sku-1",stage="atomic"}`); !ok {
		t.Fatal("atomic's audit is not scraped")
	}
	if v, ok := sample(body, `lockstep_segments_empty{sku="sku-1",stage="atomic"}`); ok {
		t.Errorf("atomic, which has no segments, reports %v empty segments", v)
	}
}
