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
// lags (the last admission-to-row lags, in microseconds), round (the reset
// round, below). reset.lua creates every one of them, so the admission and dead-letter scripts only ever run
// on keys that exist (a Redis Cluster refuses a multi-key script with a
// missing key while its slot moves).
//
// # A worker
//
// At start it handles its own pending entries (XREADGROUP from 0: a worker
// restarted under its name finishes what it had read); then it reads new
// entries (XREADGROUP >), and every ClaimEvery it takes entries pending
// longer than ClaimIdle from any consumer (XAUTOCLAIM): a killed worker's.
// A read or claimed batch (up to Batch entries) is written at once: one
// transaction inserts every order by its id, which the shop made before
// the admission, as one multi-row INSERT and opens their payments when the
// stage has payments (orders.SQLStore.InsertBatch); then one XACK
// acknowledges the batch and records its lags. A batch the database
// refuses as a whole (orders.ErrBatchRefused: one row is refused, a
// duplicate buyer, void or stale; nothing written) is handled entry by
// entry as below, so one poison entry is counted and dead-lettered alone,
// never its batch: an entry's order inserted on its own (orders.Store
// Insert), its payment opened, the entry acknowledged. While the database
// or Redis does not answer it waits and tries again (10 ms doubling to
// 1 s): the entries stay pending meanwhile.
//
// An entry that cannot be an order (written by hand, a field missing or
// wrong) goes to the dead letters with its reason; nothing is returned, as
// no admission took a unit for it. An entry whose order the database
// refused MaxDeliveries times (orders.ErrRefused: an error about the row,
// such as a value it cannot store or a trigger's SIGNAL), or whose buyer
// has another order in the table, is given up: the worker first voids its
// order id (orders.Store.Void), so no late insert can ever land it, and only
// then runs compensate.lua, which returns its units, frees its buyer (not
// when another order of the buyer stands) and moves the entry to the dead
// letters, all once per order id.
//
// # What counts toward a give-up
//
// Refusals, never deliveries. An admitted sale was answered 200 with its
// order id; giving it up breaks that promise, so it is given up only for a
// failure known to be its own. A delivery is not one: a worker restarted
// under its name re-reads its pending entries, every XAUTOCLAIM while the
// database is down delivers an entry again, and a worker killed mid-insert
// leaves an entry whose insert may have run — none of these says the row
// is bad, and each used to count (Redis's delivery count), so one worker
// restarted three times or four workers' claims during a 2.5 s outage sent
// admitted sales to the dead letters. An outage (orders.ErrUnavailable,
// any error the database does not say is about the row) is retried, never
// counted. An entry that kills every worker that takes it is therefore
// never given up: it stays pending, and the stream's oldest pending age
// (Stats, lockstep_stream_oldest_pending_seconds) shows it to an operator.
//
// The refusals of an entry are a Redis hash beside the stream, under the
// SKU's hash tag ("refusals", by entry id): durable (with the stream's
// persistence), shared by every worker that takes the entry, deleted by a
// reset. A refusal is counted by reading the count and writing count + 1
// as a value, each step retried on its own, so a write sent again after a
// lost reply counts once; two workers refused at the same moment may count
// one refusal for the two (the give-up comes one refusal later), never
// more than happened. Below MaxDeliveries the entry stays pending and a
// claim takes it again after ClaimIdle, which spaces the attempts.
//
// # A deleted group
//
// Someone deleting the group (XGROUP DESTROY) leaves the stream unread:
// Stats then counts every entry of the stream undelivered (never
// "drained"), and the first worker whose read answers NOGROUP creates the
// group again from the stream's start ("0"), not its end ("$", which would
// skip every entry admitted and not yet read: sales answered 200 that
// never become orders). All the stream's entries are delivered again
// (entries stay in the stream after their ack): each written order finds
// its row by id (one order; its payment, opened again, is unchanged), each
// given-up one meets its void row and compensate.lua's mark (only the
// ack), a malformed one its "entry:<id>" mark. The cost is one more insert
// attempt per entry of the stream; the pending entries of the deleted
// group lose their owners and delivery counts, which no longer matter
// (above). A stream that does not exist (a stage never reset) is left
// alone: reset.lua creates it with its group.
//
// # Every call, when its reply is lost, when it runs twice, when it is late
//
//	call               reply lost / run twice                         late
//	Round (the table's a read: sent again, it reads again; the        an older floor: reset.lua moves on
//	round, the floor)  reset or initialise fails (503) while the      from Redis's own round (a reset) or
//	                   table does not answer                          keeps it (an initialise): the floor
//	                                                                  only bounds the round from below
//	reset.lua          reply lost: the reset fails (503) and the      after a later reset: it is a reset
//	                   admin sends it again; run twice, the round     of its own (a new round); its
//	                   moves twice and the table is reset into the    caller, whose reply never came,
//	                   second (the first's round is skipped): the     resets no table, so the entries of
//	                   same state. The round is past the floor       the new round wait (pending) until
//	                   either way: max(Redis's, the table's) + 1      a reset is sent again
//	reset.lua as       run twice: the keys exist, it only reads the   after a reset: the keys exist, the
//	initialise (a      round; reply lost: the sale answers 503 (it    round is past the floor, nothing
//	sale finding no    sold nothing). Its round is the floor at       changes
//	stock)             least: Redis that lost its data takes the
//	                   table's round again
//	admit.lua          run again: the buyer is in the set, so it       one script: all or nothing; its
//	                   answers ErrAlreadyBought and writes nothing;    entry's id, the order's admission
//	                   the first run's order is the buyer's one order  time, is when it ran, not sent;
//	                                                                  after a reset: of the new round
//	                                                                  (its round is read as it runs)
//	InsertBatch        the retry (reply lost) or a second run (the    after another worker claimed the
//	(batch + payments, batch inserted, its worker killed before the  batch and wrote it: every id is
//	one transaction)   XACK: after-insert) reads every id live and    live, nothing written, nil; its
//	                   inserts none of them; the payments' INSERT     XACK is then a no-op. Racing that
//	                   IGNORE keeps theirs: one order and payment     worker's insert: a duplicate key,
//	                   each. Refused as a whole (ErrBatchRefused):    ErrBatchRefused, and each entry's
//	                   nothing written, each entry goes on its own    Insert finds its row (below)
//	Insert (worker)    the retry finds its own row by id: nil, one     after a give-up's Void: ErrVoided;
//	                   order; the entry is acknowledged. Unanswered   the worker finishes the give-up
//	                   (outage): retried, never counted; refused      (compensate.lua: a no-op but the
//	                   (ErrRefused: nothing written): counted below   ack if the units went back); after
//	                                                                  the sweeper's cancel (the payment
//	                                                                  cancelled): it finishes the cancel,
//	                                                                  no dead letter; after a reset:
//	                                                                  Rounds, below
//	HasOrder (give-up: a read: sent again, it reads again             no new sale of hers lands before the
//	free the buyer?)                                                  free (she is in the set); an entry of
//	                                                                  hers in flight may (the set lost
//	                                                                  her): freed, that order standing
//	XAUTOCLAIM         reply lost (or the claimer killed after it:    takes only entries idle ClaimIdle:
//	                   after-claim): the entries are its, one more    one acknowledged meanwhile is not
//	                   delivery each (which counts for nothing),      pending, one re-read is not idle
//	                   and the next claim takes them; run twice:
//	                   the second finds them not idle
//	XACK + lag         XACK (of one entry or a batch's) again is a    an entry acknowledged late was
//	                   no-op; the lags may be recorded twice (a       claimed meanwhile: the claimer's
//	                   figure, not an account)                        insert found the row, one order
//	Payments.Open      INSERT IGNORE by order id: again, the row      after the sweeper cancelled it (a
//	(after an insert,  stands as it is (unpaid, paid or cancelled);   redelivery of an old entry): the
//	or a give-up that  the reply lost: the entry is not acked, and    row exists, nothing changes; a
//	finds ErrOrdered)  whoever takes it next opens it again           worker killed before it: the next
//	                                                                  insert finds the row and opens it,
//	                                                                  a give-up finds ErrOrdered and does
//	refusal count      HGET, then HSET of count + 1 (a value): the    a late HSET of a slower worker may
//	(HGET + HSET)      HSET sent again writes the same count          write a count one lower: one more
//	                                                                  refusal before the give-up
//	XGROUP CREATE 0    BUSYGROUP: another worker made it first;       after a reset: the stream has its
//	(on NOGROUP)       the reply lost: the next read finds the group  group (BUSYGROUP), nothing changes
//	Void (give-up)     finds its own void row: nil                    after the insert: ErrOrdered, the
//	                                                                  order stands, nothing returned
//	compensate.lua     the compensated set has the order id: it only  two workers giving up the same
//	                   acknowledges, the unit is returned once        entry: the second only acknowledges;
//	                                                                  after a reset: the order's round is
//	                                                                  over, nothing returned, no dead
//	                                                                  letter, only the (no-op) XACK; the
//	                                                                  same after Redis lost the SKU's
//	                                                                  stock (its data)
//	Cancel (sweeper)   the second compare-and-set matches no row:     after a payment: matches no row, the
//	                   one cancel; the reply lost, the next pass      order stays paid; after the cancel, a
//	                   finds it cancelled and unreturned              payment answers ErrCancelled
//	compensate.lua     the order id's mark: returned once; a sweeper  a second sweeper's, after the first's:
//	(sweeper)          killed before it: the next pass's Unreturned   nothing more; after a reset (the
//	                   lists the order, and it runs then              round read with the cancel or the
//	                                                                  listing is over): nothing
//	MarkReturned       sets the same flag again                       a flag for Unreturned only: the audit
//	                                                                  reads the compensated set instead
//	Account (reads)    a read: sent again, it reads again             a stale figure, each unit counted once
//	                                                                  at that moment (below)
//	Pay (the shop)     compare-and-set unpaid → paid by id and buyer  after the sweeper's cancel:
//	                   (her bytes): again, finds paid, answers nil;   ErrCancelled, nothing changes;
//	                   reply lost: the client pays again, the same    before the payment row is open:
//	                   answer (orders.Payments)                       ErrNoOrder, nothing changes
//	HeldBy (XPENDING   reads only: run again, the same list or a      a list another worker has since
//	+ XRANGE)          newer one; nothing changes                     claimed from: the workshop's step
//	                                                                  reads it twice around what it
//	                                                                  compares, and fails if it moved
//
// Config.FaultHook is called at four named points of a batch (FaultPoint):
// after a read, before any insert; after an insert (a batch's or an
// entry's), before its ack; after
// a claim, before any insert; inside a give-up, after the Void and before
// compensate.lua. cmd/orderworker's crash hook kills the process with
// SIGKILL there, so a test or the workshop knows what the dead worker left
// pending: entries with no order row, one whose row is written (a
// duplicate delivery), claimed entries with one more delivery and no row,
// or an entry whose order id is void and whose units are not back. The
// last is finished by whoever takes the entry next: refused again, it is
// given up again (Void finds its own row); a duplicate buyer's meets the
// void row (ErrVoided) and runs compensate.lua. Either way the buyer is
// freed only when no live order of theirs stands (HasOrder), whichever
// cause the give-up had.
//
// # Both stores
//
// Every step above is the same on MariaDB and on the SQLite file: the
// order id is the primary key on both, Insert and Void tell their own row
// from another by reading it after a duplicate key, Payments.Open is an
// INSERT that ignores an existing row, and a buyer is compared as her
// bytes (orders, "One buyer identity"). They differ in what a refusal is
// (orders.ErrRefused: MariaDB's errors about the row's values and a
// trigger's SIGNAL; SQLite's TOOBIG and MISMATCH) and in who waits: an
// SQLite writer waits for the file's lock (busy_timeout) where MariaDB
// locks rows.
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
// # Rounds
//
// A reset runs while workers hold entries and sales go on, in two stores
// that no transaction spans: reset.lua (Redis), then the order table's
// reset (orders.Payments.Reset, or orders.Store.Reset without payments;
// one transaction with the payments). Each reset moves the SKU's round on,
// as the synchronous order stages' does (orders, "Resets"): reset.lua
// INCRs the round key, which no reset deletes, and the table's reset
// writes that round. admit.lua writes the round it read beside the
// message (the entry's "round" field; the caller never names it), and the
// order row lands only while the table is in that round (Insert,
// InsertBatch and Payments.Open are fenced by it). An insert the table
// refuses as stale (orders.ErrStaleRound) is told apart by Redis's round:
//
//	entry's round < Redis's: a reset ended its round; its units were in the
//	  stock the reset replaced and its buyer in the set it emptied: the
//	  entry is acknowledged and dropped, nothing returned, no dead letter
//	entry's round = Redis's: the table's reset is still to come (a sale
//	  admitted between the two resets): the worker waits and tries again
//	  (as through an outage), and the order lands once the table is in
//	  its round
//
// A give-back (compensate.lua) names the round too: the entry's, or for
// the sweeper the table's round read in the cancel's transaction (or with
// the listing of the cancelled payments, which a reset deletes in the
// transaction that moves the round), so one late across a reset gives
// nothing. reset.lua empties the stream (XTRIM) instead of deleting it, so
// its entry ids keep growing: an entry of the new round never takes the
// id of one a worker still holds, whose XACK would acknowledge it. A reset
// whose second half failed holds the new round's orders back (pending,
// never lost nor dead-lettered) until it is sent again. An entry without a
// round field (appended before the rounds were) is of round 0, the round
// of a SKU no reset moved on.
//
// # Redis lost its data
//
// A redis-server restarted without persistence (or with an AOF that lost
// its last writes) has no round key, while the order table keeps its
// round and refuses a lower one as a late reset's. Left at 0, Redis's
// round would hold every entry back for good: admitted in round 0 or 1,
// refused stale by a table in round r, and equal to Redis's round, so
// "the table's reset is still to come". So Redis's round never falls
// behind the table's: the shop reads the table's round (orders.Store
// Round) before reset.lua and passes it as a floor; a reset's round is
// max(Redis's, floor) + 1 and an initialise's at least the floor, in the
// script. The callers after a loss:
//
//	admit.lua        finds no stock (-2): the shop initialises the SKU in
//	                 the table's round, and the entry lands in it; the
//	                 buyer of before buys again (Redis forgot her), her
//	                 order stands, and the new entry is given up and its
//	                 unit returned (the table's unique buyer)
//	the worker       an entry it held from before the loss is of the
//	                 table's round or an older one: it lands, or is
//	                 dropped as stale once Redis is past it; while Redis
//	                 has no round (0) it waits, as for a reset to come
//	compensate.lua   gives nothing into a SKU without its stock (the units
//	                 were in the stock that is gone; an INCRBY would make
//	                 a stock without the SKU's other keys, and the next
//	                 sale would not initialise it); once initialised, a
//	                 sweeper's cancel of an order of before returns its
//	                 unit into the new stock (its round is the table's)
//	Payments.Open,   fenced by the table's round alone: unchanged
//	the sweeper
//
// What was lost stays lost: the stock starts again from the default, the
// entries not yet written are gone (sales answered 200 without an order),
// and the audit shows it (undersold below 0); with AOF everysec a kill of
// the process alone loses nothing (docs/async-orders.md).
package asyncorders
