// Package lock implements Redisson-style distributed locks on Redis with
// go-redis v9: the reentrant watchdog lock, a fair lock, a read-write lock,
// MultiLock and RedLock, plus the three simple locks the flash-sale articles
// start from (SETNX, SET NX EX, SET NX PX with a Lua compare-and-delete), kept
// so their defects can be shown.
//
// # Usage
//
//	locks := lock.New(rdb)            // rdb: any go-redis v9 UniversalClient
//	defer locks.Close()
//
//	m := locks.Mutex("order:{sku-1}") // one handle = one owner; reentrant
//	held, err := m.LockContext(ctx)   // waits on pub/sub; a watchdog keeps the lock
//	if err != nil {
//		return err
//	}
//	defer m.Unlock(ctx)
//	doWork(held) // held is cancelled the moment the lock is lost
//
// A lock's name is its Redis key when it carries a hash tag ("order:{sku-1}"
// is the key order:{sku-1}); a name without one is wrapped in braces, so
// Mutex("orders") is the key {orders}. Either way every key and the channel
// of one lock share that hash tag.
//
// # How it works
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
// # Keys
//
// A lock named name is the key name when name has a hash tag, else
// "{name}"; a key that would begin with '~' is kept with one more
// ("~a{b}" is "~~a{b}"). Its unlock channel is "<key>:channel". The keys
// the library keeps beside it begin with '~', the kind and ':', then the
// lock's key, so that no lock's name can reach them (a lock's key never
// begins with '~' followed by a letter):
//
//	~queue:<key>                  the Clients waiting for a Mutex, or a FairMutex's waiters
//	~deadlines:<key>              a FairMutex's waiters' deadlines
//	~writers:<key>                an RWMutex's waiting writers
//	~rwlock_timeout:<key>:<token>:<level>   the timeout of each level of a read hold
//	~released:<key>               the release latch (below)
//	~token:<key>                  a FencedMutex's fencing counter (FencingCounterKey)
//	~attempts:<key>               a Semaphore's or CountDownLatch's attempt replies (below)
//	~attempt_ends:<key>           when each of those replies ends
//	~permits:<key>                a PermitExpirableSemaphore's taken permits and their leases' ends
//
// The examples (ExampleClient_Mutex, ExampleMutex_LockContext,
// ExampleMutex_TryLock, ExampleClient_FencedMutex, ExampleNewRedLock,
// ExampleClient_RWMutex, ExampleClient_Semaphore,
// ExampleClient_PermitExpirableSemaphore, ExampleClient_CountDownLatch) run
// against a real Redis under go test; README.md
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
//     Redis counts. The last release leaves the hold's token in the lock's
//     latch ("~released:<key>", a list of the tokens of its last 8
//     releases), kept for as long after the last as the go-redis client
//     may send a request again (every wait of its retry loop: each try's
//     write and read timeouts, and before each re-send the backoff, the
//     wait for a pooled connection and a new connection's dials and
//     handshake; 162.2 s for default options), so a release run again
//     answers "released" as its first run did (Redisson's
//     unlockInnerAsync keeps its unlock latch for the same reason, one
//     key per release). Its memory is one small key per lock released
//     within that window, whatever the rate of releases. An acquisition
//     whose token the latch has takes nothing: it is a first run that
//     arrives after its hold was released, or after its caller gave up on
//     it (a waiter that leaves, or an attempt whose reply was lost, puts
//     its token in the latch whether or not it took the lock). A FLUSHALL,
//     or a restart without persistence, takes the latch with the lock: an
//     acquisition sent before it that lands after it takes the free lock,
//     owned by nobody, for one lease. The scripts that use the latch
//     declare it, so that while a Cluster slot
//     migrates Redis refuses them when it is on the other master
//     (TRYAGAIN), and they run with the lock's key alone, without a latch:
//     written on the importing master while the slot's master still has
//     it, the latch would make MIGRATE without REPLACE fail with BUSYKEY
//     and stop the reshard. A client that tries once (a *redis.Client with
//     MaxRetries: -1) never sends a request again, and gets no latch. The
//     latch needs LPOS: Redis 6.0.6 or later.
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
//	lock.lua (new)     finds its token: OK,      its token in the latch (its   the leader leaves with
//	fair_lock.lua,     nothing changes; the      hold released, or its caller  the token: release.lua
//	fenced_lock.lua,   fenced token is the same  gave up on it): nothing.      ('leave') hands on or
//	write_lock.lua                               Else it takes a free lock or  frees what it took, and
//	read_lock.lua      same read level again     a grant for a hold nobody     latches the token; an
//	                                             has: idle until its lease     owned lock's unlock
//	                                             ends (no second owner); so    script does the same
//	                                             when the token fell out of    ('-1' levels left); the
//	                                             the latch, after 8 later      read hold's level is
//	                                             releases or the window, and   released by token
//	                                             with a client that never
//	                                             re-sends (no latch).
//	reentrant level    sets the same count;      token gone: nothing; same     depth unchanged; a
//	(all kinds)        TTL never shortened       hold: a stale count, which    stale count in Redis
//	                                             no release depends on         is harmless
//	release.lua        token gone: the latch     token gone: 1 if the latch    Unlock returns the
//	(last level)       has it and answers 1, as  has it, else nil; nothing     error; the lock is
//	                   the first run did; nil    changes                       free, or expires after
//	                   (ErrNotHeld) once it                                    its lease (watchdog
//	                   fell out: after 8 later                                 stopped first)
//	                   releases of the lock, or
//	                   the window
//	release.lua keep   kept again, or handed to  token gone: nothing           as release
//	                   a Client queued since
//	                   (that answer is used)
//	release.lua leave  the place is gone; the    removes a later place of the  the place lapses with
//	                   grant was handed on       Client (it queues again); a   the queue's TTL, a
//	                   already: nothing          grant to a later leader is    grant after one lease
//	                                             handed on (it waits longer)
//	unlock.lua,        sets the same count       token gone: nothing; same     as reentrant level;
//	fair_unlock.lua,   (inner level); as         hold: a stale count           last level: as
//	read_unlock.lua,   release.lua (last level): (inner level); as             release.lua
//	write_unlock.lua   no second wake-up         release.lua (last level)
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
// The latch is best effort: while the lock's Cluster slot migrates, the
// scripts may run without it (above), and a release run twice then
// answers ErrNotHeld although it released. A read level's timeout key is
// named in ARGV with the lock's hash tag.
//
// # Semaphores
//
// Client.Semaphore is Redisson's RSemaphore, Client.PermitExpirableSemaphore
// its RPermitExpirableSemaphore and Client.CountDownLatch its
// RCountDownLatch: a number under the name's key (as a lock's), changed by
// scripts that publish on "<key>:channel" when a waiter may go on. Their
// waiters listen on the Client's shared pub/sub connection and otherwise
// sleep: they never poll. A semaphore's message says how many permits are
// free, and each Client wakes, first come first, only the waiters those
// permits serve (waitqueue.go: a waiter that finds too few passes what it
// saw on; one that leaves with a wake unused passes it on), so a release
// costs a try or so per Client rather than one per waiter; a latch at zero
// wakes all its waiters.
//
// Every call that changes the number has an attempt id, new per call and
// the same for every try of one Acquire. The scripts keep each attempt's
// reply in "~attempts:<key>" (a hash, id to reply) for as long as
// go-redis may re-send it (the latch's window, 30 s at least), and drop
// ended replies as they go ("~attempt_ends:<key>", a zset of end times of
// Redis TIME); all three keys are declared and share the hash tag. So a
// script run twice changes nothing the second time and answers as the
// first did. An acquisition whose outcome its caller does not know (an
// error, or its context ended while a try ran) is given up before
// TryAcquire returns: semaphore_cancel.lua gives back what it took and
// marks it, so a first run that arrives later takes nothing. A call whose
// reply came back within the client's read and write timeouts came from
// its request's only write, so nothing can run it again: the Client's
// next call on the counter carries its id and drops its record
// (attemptacks.go). The record then holds, per counter, the calls in
// flight, a few acknowledged ones per Client (up to 64 per Client and
// counter when it stops calling), and the slow, failed or cancelled calls
// of the last window: 256 bytes after 100 000 releases, where keeping every
// call for the window held 22 MB (a hash field and a zset entry each).
// The limit: behind a proxy that still delivers a request after the
// client's connection to it failed fast, a quick re-sent call's first
// write could run after its record was dropped.
//
//	script                  twice               late                         reply lost
//	semaphore_acquire.lua   its reply: takes    after a cancel: 'X', takes   the caller's cancel gives
//	                        nothing more        nothing; else as on time     the permits back; a
//	                                            (a live caller waits for it) failed cancel leaks them
//	semaphore_add.lua       its reply: adds     adds (the caller wanted it)  the call errs; the
//	(Release, AddPermits)   nothing more                                     permits may be back: read
//	                                                                         AvailablePermits, do not
//	                                                                         call again
//	semaphore_cancel.lua    gives back nothing  marks a later first run      run with the caller's
//	                        more                                             deadline; if it fails,
//	                                                                         permits may stay taken
//	semaphore_drain.lua     its count: drains   drains what is there         the permits are drained
//	                        nothing more                                     and the count is lost
//	counter_set.lua         its reply           sets if still unset          set or not: read it
//	countdown.lua           its reply: counts   counts                       counted or not: read
//	                        once                                             Count
//	expirable_acquire.lua   as semaphore_       as semaphore_acquire.lua     the caller's cancel
//	                        acquire.lua                                      (expirable_release.lua
//	                                                                         'cancel') gives the permit
//	                                                                         back; a failed cancel
//	                                                                         leaks it for its lease only
//	expirable_release.lua   its reply: gives    gives back the permit if     given back or not: it
//	                        back once           still taken                  comes back at its lease's
//	                                                                         end anyway
//	expirable_consume.lua   its reply: consumes consumes the permits still   consumed or not: those not
//	(Consume)               once                taken (not after their       come back at their lease's
//	                                            lease's end)                 end
//	expirable_lease.lua     the lease set       sets the lease it carries    the lease may or may not
//	(UpdateLeaseTime,       again from a later  if the permit is still taken be updated: call again
//	AvailablePermits)       now: harmless       (not after a release)        (it is idempotent)
//
// A PermitExpirableSemaphore's leases end by Redis's clock: each of its
// scripts first gives back the permits whose lease ended, and a waiter
// sleeps at most until the first lease's end, so a permit whose holder
// died is taken by a waiter within a round trip of its lease's end.
//
// A record ends with its window: a re-send that comes after it (a client
// slower than go-redis's timeouts allow) runs as a first run.
package lock
