package shop_test

import (
	"net/http"
	"testing"

	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/lockstep/lockstep/segments"
)

// segmentKey is a key of segment i of sku-1's n on the segmented stage.
func segmentKey(i, n int, suffix string) string {
	return "lockstep:segmented:{" + segments.Tag("sku-1", i, n) + "}:" + suffix
}

// TestSegmentedSaleAnswersTheSKUsStock checks a segmented sale says the
// SKU's stock left, all segments together, and its segment's apart.
func TestSegmentedSaleAnswersTheSKUsStock(t *testing.T) {
	srv := redistest.Start(t)
	r := startReplicas(t, srv, 1)
	r.reset("segmented", 100, 4) // 25 in each segment
	for sold := 1; sold <= 3; sold++ {
		res := r.deduct(0, "segmented", "")
		if res.status != http.StatusOK {
			t.Fatalf("sale %d: %d %s", sold, res.status, res.body)
		}
		remaining, segment, ok := res.field("remaining"), res.field("segment_remaining"), res.field("segment") != nil
		if remaining != float64(100-sold) || !ok || segment == nil || segment.(float64) > 24 || segment.(float64) < 22 {
			t.Errorf("sale %d answered %s; want remaining %d (the SKU's) and its segment's apart", sold, res.body, 100-sold)
		}
	}
}
