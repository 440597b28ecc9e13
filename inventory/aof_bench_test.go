package inventory_test

import (
	"testing"

	"github.com/lockstep/lockstep/asyncorders"
	"github.com/lockstep/lockstep/internal/lockserver/lockservertest"
	"github.com/lockstep/lockstep/internal/redistest"
)

// BenchmarkAOFCost is what an append-only file costs a sale: atomic's
// deduction and async-stream's admission, each on a redis-server without
// persistence (the workshop's default) and on one with appendonly yes,
// appendfsync everysec (what keeps async-stream's order stream through a
// kill -9, docs/async-orders.md), the two servers alternated slice by slice
// in one run. No worker runs: the sale's path only. Each sub-benchmark
// reports the sales/s of both and aof÷none.
//
//	go test -run '^$' -bench BenchmarkAOFCost -benchtime 7x ./inventory/
func BenchmarkAOFCost(b *testing.B) {
	none := redistest.Start(b).Client(b)
	aof := redistest.Start(b, "--appendonly", "yes", "--appendfsync", "everysec").Client(b)
	store := mariaDBOrders(b, lockservertest.MariaDB(b))
	nextUser := newBuyers()
	for _, stage := range []string{"atomic", asyncorders.StageStream} {
		b.Run(stage, func(b *testing.B) {
			sideBySide(b, []*contender{
				{name: "none", op: benchSale(b, none, store, stage, nextUser)},
				{name: "aof", op: benchSale(b, aof, store, stage, nextUser)},
			})
		})
	}
}
