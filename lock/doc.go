// Package lock implements Redisson-style distributed locks on Redis with
// go-redis v9: the reentrant watchdog lock, a fair lock, a read-write lock,
// MultiLock and RedLock, plus the three simple locks the flash-sale articles
// start from (SETNX, SET NX EX, SET NX PX with a Lua compare-and-delete), kept
// so their defects can be shown.
//
// A Client owns one pub/sub connection shared by all of its waiters and the
// watchdogs of the locks it holds. Each handle returned by Client.Mutex is one
// owner, like Redisson's client-id:thread-id: it is reentrant, and another
// handle (or another process) that calls Unlock gets ErrNotHeld.
//
// Handles of one Client that contend for the same lock form a cohort (Dice,
// Marathe and Shavit, "Lock Cohorting", PPoPP 2012): only one of them waits
// on Redis, and when the holder unlocks while another handle of the same
// Client is waiting, the Redis lock is passed to it inside the process without
// a round trip. A cohort passes the lock locally at most MaxLocalPasses times
// in a row (WithMaxLocalPasses), so other processes wait a bounded number of
// critical sections.
//
// Between Clients the lock is handed over rather than raced for: a waiting
// Client's leader queues the Client once in a list beside the lock, and the
// release grants the lock to the list's head and wakes that Client alone,
// which takes the grant with its next attempt. A Client that died while
// queued holds its grant for one lease at most.
//
// Every Lua script lives in scripts/ and runs with EVALSHA, falling back to
// EVAL when Redis does not have it cached. All keys and the pub/sub channel of
// one lock share a hash tag, so a lock works on Redis Cluster.
//
// The examples (ExampleClient_Mutex, ExampleMutex_LockContext,
// ExampleMutex_TryLock, ExampleClient_FencedMutex, ExampleNewRedLock,
// ExampleClient_RWMutex) run against a real Redis under go test; README.md
// in this directory gives the package at a glance, and docs/lock.md at the
// repository's root what a holder can rely on. checker_test.go checks the
// guarantees under random faults; MUTANTS.md measures the tests (make
// mutate) and names the mutants they do not kill, and why.
//
// # Unknown outcomes
//
// Any request may run in Redis and lose its reply, run twice (go-redis
// sends it again after a dropped connection or a read timeout: with its
// default options up to three times more), or arrive late, after a later
// request of the same owner. The library is correct with a go-redis client
// built with its default options; it needs nothing of the client. Three
// rules make it so:
//
//   - Every hold has a token, new for each acquisition (the Client's id and
//     a sequence number), written into Redis with the hold: the field
//     "hold" of a Mutex, FairMutex or FencedMutex hash, "<write field>:hold"
//     of a write lock, and a read hold's own field of a read lock. Every
//     script that acts on a hold names it by its token, so a renewal, a
//     reentrant level, a release or a leave of one hold can never act on a
//     later hold of the same owner.
//   - Every script is idempotent. An acquisition run again finds its own
//     token and changes nothing. Levels are counted by the Client, which
//     sends the count a level leaves (an acquisition: the levels it makes;
//     a release: the levels left), so a level added or released twice is
//     one level, and the last level's release deletes the hold whatever
//     Redis counts. The last release leaves a latch, a key named after the
//     hold's token beside the lock ("<key>:released:<token>"), kept for as
//     long as the go-redis client may send the request again (its tries ×
//     its read and write timeouts, plus the backoffs: 43 s for default
//     options), so a release run again answers "released" as its first run
//     did (Redisson's unlockInnerAsync keeps its unlock latch the same
//     way). One latch per release, not one per owner rewritten in place:
//     tokens are never reused, so a latch written on the importing master
//     of a migrating slot never meets one of the same name on the slot's
//     master, where MIGRATE without REPLACE would fail with BUSYKEY and
//     stop the reshard. A client that tries once (a *redis.Client with
//     MaxRetries: -1) never sends a request again, and gets no latch.
//   - A reentrant level finds its hold or fails: when Redis lost the hold
//     (it expired, Redis restarted without it, a failover lost it), the
//     level fails with ErrLockLost and the held context ends with it. It
//     never creates the lock again under a holder that believes it held on.
//
// Levels never cut a lease: a reentrant level and an inner release extend
// the TTL to their lease but never shorten it, and a read level's release
// hands its remaining time to the level below, so Redis keeps a hold at
// least as long as its holder's held context lasts. Close returns once its
// waiters have left the queues they joined, so a program that closes its
// go-redis client after Close leaves no place behind to be granted the
// lock.
//
// What each script does when it runs twice, runs late (after its caller
// gave up on it, and the owner went on), or ran but its reply was lost (the
// caller gets an error):
//
//	script             twice                     late                          reply lost
//	lock.lua (new)     finds its token: OK,      takes a free lock or a grant  the leader leaves with
//	fair_lock.lua,     nothing changes; the      for a hold nobody has: idle   the token: release.lua
//	fenced_lock.lua,   fenced token is the same  until its lease ends          ('leave') hands on or
//	write_lock.lua                               (no second owner)             frees what it took
//	read_lock.lua      same read level again     as above                      the hold's level is
//	                                                                           released by token
//	reentrant level    sets the same count;      token gone: nothing; same     depth unchanged; a
//	(all kinds)        TTL never shortened       hold: a stale count, which    stale count in Redis
//	                                             no release depends on         is harmless
//	release.lua        token gone: its own       token gone: latch or nil,     Unlock returns the
//	(last level)       latch (one per release)   nothing changes               error; the lock is
//	                   answers 1, as the first                                 free, or expires after
//	                   run did                                                 its lease (watchdog
//	                                                                           stopped first)
//	release.lua keep   kept again, or handed to  token gone: nothing           as release
//	                   a Client queued since
//	                   (that answer is used)
//	release.lua leave  the place is gone; the    removes a later place of the  the place lapses with
//	                   grant was handed on       Client (it queues again); a   the queue's TTL, a
//	                   already: nothing          grant to a later leader is    grant after one lease
//	                                             handed on (it waits longer)
//	unlock.lua,        sets the same count       token gone: nothing; same     as reentrant level;
//	fair_unlock.lua,   (inner level); latch      hold: a stale count           last level: as
//	read_unlock.lua,   answers 1 (last level):                                 release.lua
//	write_unlock.lua   no second wake-up
//	renew.lua,         TTL set again, never      token gone: 0, nothing        retried every 100 ms
//	read_renew.lua     shortened                 (the watchdog ignores a       until the hold's
//	                                             renewal of an ended hold)     expiry, which ends it
//	fair_leave.lua,    removes nothing more      removes a later place of the  the place lapses after
//	write_leave.lua                              handle: it is re-added at     the waiter timeout
//	                                             the next refresh (tail)
//	token_unlock.lua   0: TokenLock's Unlock     compares its token: nothing   the lock expires with
//	(TokenLock)        says ErrNotHeld though                                  its TTL
//	                   it released (the simple
//	                   locks keep no latch)
//
// A FencedMutex's token is the larger of its counter's next value and the
// Redis server's clock in microseconds, so a restart without persistence,
// a FLUSHALL or a failover that lost the counter never makes tokens go
// back (FencedMutex says what this assumes of the servers' clocks).
//
// The latch is best effort: while the lock's Cluster slot migrates, a key
// not yet on the node can be neither read nor written, and a release run
// twice then answers ErrNotHeld although it released. A release's own keys
// are all declared and exist when it runs; the latch, like a read level's
// timeout key, is named in ARGV with the lock's hash tag.
package lock
