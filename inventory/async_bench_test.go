package inventory_test

import (
	"testing"

	"github.com/lockstep/lockstep/asyncorders"
	"github.com/lockstep/lockstep/internal/lockserver/lockservertest"
	"github.com/lockstep/lockstep/internal/redistest"
)

// BenchmarkAsyncAdmit sets async-stream's admission beside atomic's
// deduction, alternated slice by slice in one run on one Redis, with no
// worker running: what the sale's path costs, apart from the workers' load
// on the machine (BENCHMARKS.md has both). one-per-user-lua's script
// without its insert sits between them: atomic's script plus the buyer
// check and SADD, so the two ratios split async-stream's extra cost into
// the buyer's part and the XADD's (with the order id and message). Each
// also reports its CPU per sale, in this process and in redis-server's
// main thread: the sales/s on a machine where the one or the other is the
// bottleneck, which the shared machine's load does not move as it moves
// the rates.
//
//	go test -run '^$' -bench BenchmarkAsyncAdmit -benchtime 7x ./inventory/
func BenchmarkAsyncAdmit(b *testing.B) {
	rdb := redistest.Start(b).Client(b)
	store := mariaDBOrders(b, lockservertest.MariaDB(b))
	nextUser := newBuyers()
	sideBySide(b, []*contender{
		{name: "atomic", server: rdb, op: benchSale(b, rdb, store, "atomic", nextUser)},
		{name: "buyer-script", server: rdb, op: benchSale(b, rdb, noOrders{store}, "one-per-user-lua", nextUser)},
		{name: asyncorders.StageStream, server: rdb, op: benchSale(b, rdb, store, asyncorders.StageStream, nextUser)},
	})
}
