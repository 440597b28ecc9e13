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
// The test files carry the build tag orderchecker, so go test ./... does not
// run them while the checker still finds defects at some seeds: a shop
// killed between the Redis deduction and the order insert (the crash
// window docs/orders.md documents) leaves a unit, and on one-per-user-lua
// a buyer, without an order. The reset-rung fault resets every rung
// (resetDuringSales): async-stream's reset fences a round too.
// make check-orders runs TestOrderChecker (CHECKER_TIME, CHECKER_SEED);
// go test -tags orderchecker also runs TestOrderCheckerFindsDefects. A
// failure prints the command that runs its seed again:
//
//	go test -tags orderchecker -race -run '^TestOrderChecker$' ./internal/orderchecker/ -checker.seed=N -checker.time=2m
package orderchecker
