// Package inventory is the flash-sale stock of lockstep: the Redis stock
// store with its sale accounting and audit, the fault knobs, and one
// implementation per stage of the article progression, from a naive
// GET/SET to the Redisson-style watchdog lock, segmented stock and a single
// Lua script.
//
// Every stage except atomic keeps the articles' read-modify-write shape —
// GET the stock, do the business work, SET the new stock — so each stage's
// race is real. The SET and the INCRBY of the sold counter go in one
// MULTI/EXEC, which keeps stock+sold == initial for every stage whose lock
// holds; a stage whose lock does not hold shows it as lost updates: sold grows
// past what stock lost, and past initial when it oversells.
//
// A watchdog sale that the lock reached by a local pass (lock.Tenure: the
// lock never left the process since the previous sale) skips the GET and
// uses the stock the previous sale wrote (heldStock): one round trip per
// sale instead of two. That stays the articles' read-modify-write as long as
// only holders write the stock; a reset in this process forgets it under
// the lock, and a commit that failed (it may have run) forgets it too. Where
// the cached value can be wrong, the lock's exclusion already failed (a
// reset elsewhere dropping a live lock, a wiped Redis), with one exception:
// a Redis that loses its last writes but keeps the lock key (an everysec
// append-only file after a machine crash; a replica promoted with the lock
// but not the last stock writes) is written over with the cached stock
// until the hold ends, where a GET would have read what Redis kept.
//
// The stages whose lock lives on a lock server (mysql, etcd, zookeeper)
// keep one rule: every acquire or release whose outcome is unknown — a
// reply lost, a deadline reached with the request on its way — is
// resolved. The stage knows the owner it tried, and removes that owner's
// row, lease or node in the background (resolver), retrying until it is
// gone or provably someone else's, until Close. And every call is bounded:
// an acquire by the sale's deadline and the lock wait, a release by the
// release bound (releaseTimeout). What is left is the seed's flaw on
// purpose: a crashed process leaves the mysql stage's row (no expiry).
//
// The order stages hand what a sale could not resolve before its answer
// (a void to confirm, a give-back to send again) to the same resolver, and
// keep it in Redis too (pending.go), so that it outlives the process: an
// entry in lockstep:<stage>:pending-orders is written before the sale
// answers, deleted once resolved, and adopted by a live replica once its
// owner's heartbeat (lockstep:resolvers:<owner>, a 3 s TTL renewed every
// second, deleted by Close) is gone. Each of these writes can run twice,
// run late or lose its reply:
//
//	write            | runs twice               | runs late                       | ran, reply lost
//	record (HSET)    | the same entry           | after its resolution: the entry | the resolver records it again
//	                 |                          | is back, its owner (or, once    | before it settles anything
//	                 |                          | that is gone, an adopter)       |
//	                 |                          | settles it again: the void      |
//	                 |                          | finds its void row or the order,|
//	                 |                          | the give-back gives once per id |
//	forget (HDEL)    | deletes nothing more     | after an adoption: the adopter  | the resolution runs again, as
//	                 |                          | still resolves what it queued   | above, then deletes again
//	adopt (script)   | answers 1: the entry is  | after another adopted or the    | the adopter's next sweep finds
//	                 | the adopter's already    | owner resolved it: 0, nothing   | the entry its own and unqueued,
//	                 |                          | written                         | and queues it
//	heartbeat (SET)  | the same TTL             | a dead owner's: adoption waits  | renewed at the next beat
//	                 |                          | one TTL more                    |
//
// What stays: a replica killed between the unknown outcome and the record,
// with Redis not answering the record (the sale's own write then needed
// Redis too), leaves the unit as before — undersold, no order — until a
// reset (docs/orders.md).
//
// Keys are lockstep:<stage>:{<sku>}:<name>; the hash tag keeps the keys one
// transaction or script touches in one Redis Cluster slot, and segments of
// the segmented stage use {<sku>:<i>} so they spread over the shards.
package inventory
