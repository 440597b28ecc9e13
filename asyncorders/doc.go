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
//	Insert (worker)    the retry finds its own row by id: nil, one     after a give-up's Void: ErrVoided;
//	                   order; the entry is acknowledged               the worker finishes the give-up
//	                                                                  (compensate.lua: a no-op but the
//	                                                                  ack if the units went back)
//	HasOrder (give-up: a read: sent again, it reads again             no new sale of hers lands before the
//	free the buyer?)                                                  free (she is in the set); an entry of
//	                                                                  hers in flight may (the set lost
//	                                                                  her): freed, that order standing
//	XAUTOCLAIM         reply lost (or the claimer killed after it:    takes only entries idle ClaimIdle:
//	                   after-claim): the entries are its, one more    one acknowledged meanwhile is not
//	                   delivery each, and the next claim takes them;  pending, one re-read is not idle
//	                   run twice: the second finds them not idle
//	XACK + lag         XACK again is a no-op; the lag may be          an entry acknowledged late was
//	                   recorded twice (a figure, not an account)      claimed meanwhile: the claimer's
//	                                                                  insert found the row, one order
//	Void (give-up)     finds its own void row: nil                    after the insert: ErrOrdered, the
//	                                                                  order stands, nothing returned
//	compensate.lua     the compensated set has the order id: it only  two workers giving up the same
//	                   acknowledges, the unit is returned once        entry: the second only acknowledges
//	Cancel (sweeper)   the second compare-and-set matches no row:     after a payment: matches no row, the
//	                   one cancel; the reply lost, the next pass      order stays paid; after the cancel, a
//	                   finds it cancelled and unreturned              payment answers ErrCancelled
//	compensate.lua     the order id's mark: returned once; a sweeper  a second sweeper's, after the first's:
//	(sweeper)          killed before it: the next pass's Unreturned   nothing more
//	                   lists the order, and it runs then
//	MarkReturned       sets the same flag again                       a flag for Unreturned only: the audit
//	                                                                  reads the compensated set instead
//	Account (reads)    a read: sent again, it reads again             a stale figure, each unit counted once
//	                                                                  at that moment (below)
//	HeldBy (XPENDING   reads only: run again, the same list or a      a list another worker has since
//	+ XRANGE)          newer one; nothing changes                     claimed from: the workshop's step
//	                                                                  reads it twice around what it
//	                                                                  compares, and fails if it moved
//
// Config.FaultHook is called at four named points of a batch (FaultPoint):
// after a read, before any insert; after an insert, before its ack; after
// a claim, before any insert; inside a give-up, after the Void and before
// compensate.lua. cmd/orderworker's crash hook kills the process with
// SIGKILL there, so a test or the workshop knows what the dead worker left
// pending: entries with no order row, one whose row is written (a
// duplicate delivery), claimed entries with one more delivery and no row,
// or an entry whose order id is void and whose units are not back. The
// last is finished by whoever takes the entry next: delivered too often,
// it is given up again (Void finds its own row); a duplicate buyer's,
// delivered once more, meets the void row (ErrVoided) and runs
// compensate.lua. Either way the buyer is freed only when no live order of
// theirs stands (HasOrder), whichever cause the give-up had.
//
// A worker killed at any point leaves its entry pending; the entry is
// claimed (or re-read under the worker's name) and every step above is
// safe to run again: an order is written once or, when given up, its unit
// is returned once.
//
// # The audit while the sweeper works
//
// A sweeper cancels an unpaid order in the order database (t1: its
// payment cancelled and its order row voided, one transaction), then gives
// its unit back in Redis (t2 > t1: compensate.lua adds the order id to
// the compensated set and the unit to the stock, one script). Between t1
// and t2 the unit is neither on sale nor in a live order. Account counts it
// as returning: a cancelled order whose id is not in the compensated set.
// It reads Redis first (r: the stock and the compensated set, one MULTI),
// then the order database (m > r: the live orders and the cancelled ones,
// one snapshot). For one order, with t1 < t2 and r < m:
//
//	r < t2 (not back at r), m < t1 (live at m): in the live units only
//	r < t2, m > t1 (cancelled at m): not in the stock, not live: returning
//	r > t2 (back at r), so m > r > t2 > t1: in the stock; cancelled but
//	compensated at r: not returning
//
// Each unit counts once. The other order of reads would count twice an
// order cancelled and returned between them (live at m, back at r), and a
// Ledger of two separate statements one cancelled between them (live in
// the first, cancelled and not yet back in the second).
// TestAuditWhileTheSweeperWorks reads at each step by hooks. This is
// exact against the sweepers and the workers' give-ups (whose return and
// acknowledgement are one script, so an entry pending at the stream's read
// holds "drained" false); a sale admitted between the two reads, while a
// load runs, may still count twice (on sale at r, its order live at m),
// which is why a row is judged after its load.
//
// A sweeper killed between t1 and t2 leaves its order cancelled with
// returned = 0: the next pass of any sweeper lists it (Unreturned) and
// gives the unit back, once (the mark). Until then the audit shows it
// returning, and a run's drain waits for none to be.
//
// Reset deletes the stream while workers may hold entries of the old round:
// an insert of one lands as a row the reset already deleted the others of.
// A run resets only after draining the stream.
package asyncorders
