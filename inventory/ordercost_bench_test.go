package inventory_test

import (
	"testing"

	"github.com/lockstep/lockstep/internal/lockserver/lockservertest"
	"github.com/lockstep/lockstep/internal/redistest"
)

// BenchmarkOrderRungsCost sets the correct order rungs (#33's limit: none
// may be more than 10 % slower than before its fixes) beside atomic's
// deduction, alternated slice by slice in one run on one Redis and one
// MariaDB: one-per-user-lua with one INSERT per sale (the path the fixes
// changed; the shop's group commit is BenchmarkOrderSalesSideBySide's),
// one-per-user-lock, optimistic-mysql and async-stream's admission (no
// worker running). It uses only what the code before the fixes (d11a29f)
// has, so the file builds there too: the limit is checked by building
// both with it and alternating the two binaries, comparing each rung's
// ratio to atomic (docs/benchmarks-history.md).
//
//	go test -run '^$' -bench BenchmarkOrderRungsCost -benchtime 5x ./inventory/
func BenchmarkOrderRungsCost(b *testing.B) {
	rdb := redistest.Start(b).Client(b)
	store := mariaDBOrders(b, lockservertest.MariaDB(b))
	nextUser := newBuyers()
	sale := func(stage string) *contender {
		return &contender{name: stage, server: rdb, op: benchSale(b, rdb, store, stage, nextUser)}
	}
	sideBySide(b, []*contender{
		sale("atomic"), sale("one-per-user-lua"), sale("one-per-user-lock"), sale("optimistic-mysql"), sale("async-stream"),
	})
}
