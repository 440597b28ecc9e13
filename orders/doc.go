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
// # Every write, when its reply is lost, when it runs twice, when it is late
//
// The order id is made by the caller (the shop) before the first attempt,
// and is the primary key, so:
//
//   - Insert, reply lost: the row may exist. Sending it again with the same
//     id finds its own row and answers nil: one order, never two.
//   - Insert run twice (a client library's retry): the second finds the
//     first's row by id and answers nil.
//   - Insert arriving late, after the shop gave up on it and called Void:
//     Void wrote a void row under that id first, so the late insert hits the
//     primary key and answers ErrVoided; nothing is ordered, and the shop
//     gave the stock back when Void succeeded.
//   - Void, reply lost or run twice: it finds its own void row and answers
//     nil. Void arriving after the insert landed answers ErrOrdered: the
//     order stands, and the stock must not be given back.
//   - Buy (the optimistic stages: INSERT the order, then UPDATE the stock
//     row only if the condition holds, in one transaction), reply of the
//     COMMIT lost: sent again, its INSERT finds its own row by id, so it
//     answers nil without running the UPDATE a second time; a Buy whose
//     condition failed rolled its INSERT back, so a retry may sell.
//   - Reset: a DELETE and an upsert, both the same when run twice. A sale's
//     insert arriving after a reset lands as a row of the new round; the
//     shop's reset waits for no sale, as the stock reset does not either.
package orders
