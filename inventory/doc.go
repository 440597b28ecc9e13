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
// Keys are lockstep:<stage>:{<sku>}:<name>; the hash tag keeps the keys one
// transaction or script touches in one Redis Cluster slot, and segments of
// the segmented stage use {<sku>:<i>} so they spread over the shards.
package inventory
