package inventory_test

import (
	"slices"
	"testing"

	"github.com/lockstep/lockstep/asyncorders"
	"github.com/lockstep/lockstep/internal/lockserver/lockservertest"
	"github.com/lockstep/lockstep/internal/redistest"
)

// BenchmarkAOFCost is what an append-only file costs a sale: atomic's
// deduction and async-stream's admission, each on a redis-server without
// persistence (the workshop's default) and on one with appendonly yes,
// appendfsync everysec (what keeps async-stream's order stream through a
// kill -9, docs/async-orders.md), alternated slice by slice in one run. No
// worker runs: the sale's path only. Each round runs none, aof, aof, none
// (ABBA): in a round run none then aof only, the second of the pair came
// out 3–11 % faster whichever it was, so each server takes each place
// once. Each sub-benchmark reports every slot's median sales/s, its ratio
// to the first slot's, and abba-aof/none: the median over the rounds of
// the round's two aof slices ÷ its two none slices.
//
//	go test -run '^$' -bench BenchmarkAOFCost -benchtime 9x ./inventory/
func BenchmarkAOFCost(b *testing.B) {
	none := redistest.Start(b).Client(b)
	aof := redistest.Start(b, "--appendonly", "yes", "--appendfsync", "everysec").Client(b)
	store := mariaDBOrders(b, lockservertest.MariaDB(b))
	nextUser := newBuyers()
	for _, stage := range []string{"atomic", asyncorders.StageStream} {
		b.Run(stage, func(b *testing.B) {
			abba := []*contender{
				{name: "none", server: none, op: benchSale(b, none, store, stage, nextUser)},
				{name: "aof", server: aof, op: benchSale(b, aof, store, stage, nextUser)},
				{name: "aof-again", server: aof, op: benchSale(b, aof, store, stage, nextUser)},
				{name: "none-again", server: none, op: benchSale(b, none, store, stage, nextUser)},
			}
			sideBySide(b, abba)
			ratios := make([]float64, len(abba[0].rates))
			for i := range ratios {
				ratios[i] = (abba[1].rates[i] + abba[2].rates[i]) / (abba[0].rates[i] + abba[3].rates[i])
			}
			slices.Sort(ratios)
			b.ReportMetric(ratios[len(ratios)/2], "abba-aof/none")
		})
	}
}
