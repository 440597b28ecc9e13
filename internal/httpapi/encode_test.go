package httpapi

import (
	"encoding/json"
	"testing"
)

// A sale's answer is rendered by hand; it must be the bytes json.Marshal
// writes, whatever the replica is named.
func TestSaleBodyEncodesAsJSONMarshal(t *testing.T) {
	three := 3
	for _, b := range []saleBody{
		{Stage: "atomic", SKU: "sku-1", Qty: 1, Remaining: 499, Replica: "r0"},
		{Stage: "segmented", SKU: "A.b_C-9", Qty: 100, Remaining: 0, Replica: "shop-2", Segment: &three},
		{Stage: "segmented", SKU: "sku-1", Qty: 5, Remaining: 2, Replica: "r1", Segments: []int{0, 7, 12}},
		{Stage: "segmented", SKU: "sku-1", Qty: 2, Remaining: 0, Replica: "r1", Segments: []int{3}},
		{Stage: "naive", SKU: "x", Qty: 7, Remaining: -3, Replica: ""},
		{Stage: "atomic", SKU: "sku-1", Qty: 1, Remaining: 1_000_000_000, Replica: `a "quoted" \ name`},
		{Stage: "atomic", SKU: "sku-1", Qty: 1, Remaining: 1, Replica: "<b>&amp;</b>"},
		{Stage: "atomic", SKU: "sku-1", Qty: 1, Remaining: 1, Replica: "tab\there\nnew\x00\x7f"},
		{Stage: "atomic", SKU: "sku-1", Qty: 1, Remaining: 1, Replica: "réplica \u2028 \xff"},
	} {
		want, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		if got := b.appendJSON(nil); string(got) != string(want) {
			t.Errorf("appendJSON(%+v)\n got %s\nwant %s", b, got, want)
		}
	}
}
