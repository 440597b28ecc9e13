// Package orders is the order table of lockstep's order stages: the truth
// a run's report counts (orders, distinct buyers, buyers with more than one
// order, units ordered), and, for the MySQL optimistic-lock stages, the
// stock row they compare-and-set.
//
// One schema runs on two servers: MySQL/MariaDB (OpenMySQL) and an embedded
// pure-Go SQLite file (OpenSQLite, no cgo), which the workshop falls back to
// when no MariaDB is installed. Both have the same table, the same unique
// index and the same conditional UPDATE, so every stage shows its defect on
// either.
//
// # The unique index
//
// (stage, sku, one_per_user) is unique. A stage that keeps the index as its
// backstop (one-per-user-lua) writes the buyer there; the rungs that show
// what happens without it (one-per-user-naive, -synchronized, -lock, the
// articles' code) write NULL, which a unique index never compares equal,
// so their duplicates land as rows and the report counts them.
//
// # One buyer identity
//
// A buyer id is compared as its bytes, as Redis's buyer sets compare it:
// "alice " is not "alice", "ANN" is not "ann", and "张三" is stored as her
// UTF-8. On MySQL/MariaDB every buyer column (user_id and one_per_user of
// the order table, user_id of the payment table) is VARBINARY(64): no
// collation folds case or pads spaces (utf8mb4_bin is PAD SPACE) and no
// charset converts (the payment table once took the server's default,
// latin1_swedish_ci). SQLite's TEXT compares bytes (collation BINARY).
// The shop refuses no space: a buyer is what she sent, the same buyer in
// every store. OpenMySQL and Payments migrate tables an older version
// created (migrate in sql.go; docs/orders.md, "Upgrading").
//
// # One order id per sale
//
// A sale's order id is fixed before its first write and named by every
// write of that sale, so each write is idempotent by it and a write sent
// again finishes the sale it belongs to instead of starting another. A
// sale with an idempotency key derives it (KeyedID) from the stage, the
// SKU and the key, so a request sent again with the key names the same
// order; the next generation's id is used only once the previous one was
// voided (which proves that request sold nothing). A sale without a key
// draws one (NewID). Every order stage but optimistic-redis and the async
// ones uses the keyed id: their first write recognises its own id
// (one_per_user.lua, order_deduct.lua, Buy), so a request sent again after
// its replica died finishes the order the dead one started.
//
// # Every write, when it runs twice, runs late, or ran and lost its reply
//
// The same on MySQL/MariaDB and SQLite unless a cell says otherwise
// (the order id is the primary key on both; InnoDB row locks and SQLite's
// one writer serialize the writes of one id the same way).
//
//	call     | runs twice                        | runs late                                | ran, reply lost
//	---------+-----------------------------------+------------------------------------------+----------------------------------------
//	Insert   | finds its own row: nil, one order | after Void: ErrVoided, nothing written;  | the shop voids the id: ErrOrdered means
//	         |                                   | after a Reset to a later round:          | it landed (a sale); nil means it never
//	         |                                   | ErrStaleRound, nothing written           | will. A void that fails too: the sale
//	         |                                   |                                          | answers outcome unknown, the shop's
//	         |                                   |                                          | resolver voids it later
//	Void     | finds its own void row: nil       | after the insert: ErrOrdered, the order  | sent again until it answers (nil or
//	         |                                   | stands (the units are not given back)    | ErrOrdered); both are final
//	Buy      | finds its own row: nil, no second | after Void: ErrVoided, rolled back. An   | sent again with the same id until it
//	         | UPDATE (returns the stock row)    | attempt still on its way when another    | answers; the sale then voids the id
//	         |                                   | answered: fenced by the void the sale    | before saying "nothing sold" (an
//	         |                                   | writes before saying "nothing sold"      | attempt may still commit); no void:
//	         |                                   |                                          | outcome unknown, resolver voids it
//	Reset    | the same state; a reset of a      | a reset of an older round than the       | sent again (the admin retries): the
//	         | round already there deletes the   | table's changes nothing                  | same state
//	         | orders of the round again         |                                          |
//	HasOrder | a read                            | a read                                   | a read: the sale fails, nothing taken
//	Round    | a read                            | an older round is a floor only           | a read: the reset or initialise fails
//	         |                                   | (asyncorders keeps its Redis round at or |
//	         |                                   | past it)                                 |
//
// GroupCommit.Insert sends a sale's order in a batch (InsertBatch: one
// transaction) with the other sales' queued at the same time; each case
// above is then the batch's, and each sale gets its own answer:
//
//	batch    | runs twice                        | runs late                                | ran, reply lost
//	---------+-----------------------------------+------------------------------------------+----------------------------------------
//	Group-   | not sent twice: a sale whose ctx  | after a sale of it gave up (ErrUnavail-  | every sale of it gets ErrUnavailable,
//	Commit   | ends while its order is queued    | able) and voided its id: the void row    | as a one-row Insert whose reply was
//	Insert   | takes it out (never sent); a      | refuses the batch (ErrBatchRefused,      | lost, and voids its id: ErrOrdered
//	         | refused batch's sales insert      | nothing written); each sale still        | means its row landed. A sale whose ctx
//	         | alone, each finding its own row   | waiting inserts alone, the voided one    | ends while its batch is on the wire
//	         | if a run landed it                | gets ErrVoided                           | leaves the same way
//
// On MySQL an INSERT held in the network is serialized with the void by
// the id's primary key: whichever InnoDB sees first wins, and the other
// learns it (ErrOrdered or ErrVoided). On SQLite every write is a
// transaction of the one writer (_txlock=immediate), so the same holds.
//
// # Resets
//
// The order stages whose stock is in Redis (one-per-user-*, optimistic-
// redis, and the async stages: asyncorders, "Rounds") write an order after
// taking its units, so a reset between the two
// would either delete an order already answered or let an order of the old
// stock land in the new round. Each reset therefore moves a round: in
// Redis, in the same transaction as the stock (the deduction scripts
// answer the round they took the units in, which the sale writes into
// Order.Round), then here (lockstep_rounds). Insert lands only while the
// table's round is the order's: the subquery's read of the round row is a
// locking read on MySQL (INSERT ... SELECT), so Reset and Insert are
// serialized there as on SQLite. A sale that took from the new stock
// before the table's round moved is refused (ErrStaleRound) and gives its
// units back; one whose units came from the old stock is refused too, and
// its give-back, fenced by the same round in Redis, gives nothing (the
// units belonged to the stock the reset replaced). Like the fenced stage's
// reset, it fences rather than waits: no sale of one round lands in the
// next, and no order a sale answered is deleted except by a later reset.
// A reset that failed between the two stores refuses orders until it is
// sent again. Redis losing its keys starts its round again at 0: the async
// stages' reset and initialise take the table's round (Round) as a floor
// (asyncorders, "Redis lost its data"). The synchronous stages' reset
// takes it as a floor too (inventory's round_reset.lua); until that reset,
// a synchronous stage whose Redis lost its keys sells in round 0 and every
// order is refused as stale, its units given back: nothing is sold and
// nothing lost.
package orders
