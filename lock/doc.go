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
// repository's root what a holder can rely on.
package lock
