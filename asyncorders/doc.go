// Package asyncorders takes the order table off the sale's hot path, as
// every flash-sale course's 秒杀优化 step does: one Redis script checks the
// stock and the buyer, takes the units, adds the buyer and appends the order
// message to a Redis Stream (admit.lua); order workers read the stream in
// one consumer group and write the orders into the order table (package
// orders) later.
//
// # Keys
//
// One SKU of one stage keeps everything under one hash tag,
// "lockstep:<stage>:{<sku>}:": initial, stock, sold, buyers (a set),
// compensated (a set of order ids whose units went back), orders (the
// stream, with the group "order-workers"), dead (the dead-letter stream),
// lags (the last admission-to-row lags, in microseconds). reset.lua creates
// every one of them, so the admission and dead-letter scripts only ever run
// on keys that exist (a Redis Cluster refuses a multi-key script with a
// missing key while its slot moves).
//
// # A worker
//
// At start it handles its own pending entries (XREADGROUP from 0: a worker
// restarted under its name finishes what it had read); then it reads new
// entries (XREADGROUP >), and every ClaimEvery it takes entries pending
// longer than ClaimIdle from any consumer (XAUTOCLAIM): a killed worker's.
// For each entry it inserts the order by its id, which the shop made before
// the admission (orders.Store.Insert), then acknowledges it (XACK) and
// records its lag. While the database or Redis does not answer it waits and
// tries again (10 ms doubling to 1 s): the entry stays pending meanwhile,
// and its delivery count does not grow, so an outage sends nothing to the
// dead letters.
//
// An entry that cannot be an order (written by hand, a field missing or
// wrong) goes to the dead letters with its reason; nothing is returned, as
// no admission took a unit for it. An entry delivered more than
// MaxDeliveries times (it killed the workers that took it), or whose buyer
// has another order in the table, is given up: the worker first voids its
// order id (orders.Store.Void), so no late insert can ever land it, and only
// then runs compensate.lua, which returns its units, frees its buyer (not
// when another order of the buyer stands) and moves the entry to the dead
// letters, all once per order id.
//
// # Every call, when its reply is lost, when it runs twice, when it is late
//
//	call               reply lost / run twice                         late
//	admit.lua          run again: the buyer is in the set, so it       one script: all or nothing; its
//	                   answers ErrAlreadyBought and writes nothing;    entry's id, the order's admission
//	                   the first run's order is the buyer's one order  time, is when it ran, not sent
//	Insert (worker)    the retry finds its own row by id: nil, one     after a give-up: ErrVoided, the
//	                   order; the entry is acknowledged               worker only acknowledges
//	XACK + lag         XACK again is a no-op; the lag may be          an entry acknowledged late was
//	                   recorded twice (a figure, not an account)      claimed meanwhile: the claimer's
//	                                                                  insert found the row, one order
//	Void (give-up)     finds its own void row: nil                    after the insert: ErrOrdered, the
//	                                                                  order stands, nothing returned
//	compensate.lua     the compensated set has the order id: it only  two workers giving up the same
//	                   acknowledges, the unit is returned once        entry: the second only acknowledges
//
// A worker killed at any point leaves its entry pending; the entry is
// claimed (or re-read under the worker's name) and every step above is
// safe to run again: an order is written once or, when given up, its unit
// is returned once.
//
// Reset deletes the stream while workers may hold entries of the old round:
// an insert of one lands as a row the reset already deleted the others of.
// A run resets only after draining the stream.
package asyncorders
