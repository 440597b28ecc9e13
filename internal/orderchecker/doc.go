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
// The reset-rung fault resets every rung (resetDuringSales): each one's
// reset fences a round in both stores, async-stream's too.
//
// go test (make test) runs TestOrderChecker for defaultTime with a new
// seed; make check-orders runs it for CHECKER_TIME (CHECKER_SEED), and
// TestOrderCheckerFindsDefects, which make test leaves out (a checker run
// per planted defect). A failure prints the command that runs its seed
// again:
//
//	go test -race -run '^TestOrderChecker$' ./internal/orderchecker/ -checker.seed=N -checker.time=2m
package orderchecker
