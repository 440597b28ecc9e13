// Package orderchecker holds the randomized checker of the order half
// (issue 33), TestOrderChecker: two shop processes and two order-worker
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
// go test ./... runs it for its short default (defaultTime, a new seed
// each run); make check-orders runs it longer (CHECKER_TIME, CHECKER_SEED),
// and a failure prints the command that runs its seed again:
//
//	go test -race -run '^TestOrderChecker$' ./internal/orderchecker/ -checker.seed=N -checker.time=2m
package orderchecker
