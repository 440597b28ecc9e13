package lock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// cohort is the state one Client keeps for one Mutex key: which of its handles
// holds the lock, the Redis hold behind it, and the handles queued for it.
// Only one handle at a time — the leader — talks to Redis to acquire, and
// holds the Client's one place in the lock's queue of waiting Clients; the
// others wait in FIFO order and are passed the lock inside the process.
type cohort struct {
	c            *Client
	key, channel string
	keys         []string // key, waiter queue and release latch, as the scripts take them
	pins         int      // handles acquiring or holding; guarded by Client.mu

	waker *waker // wakes the leader on unlocks and on the lock's grant to this Client

	mu        sync.Mutex
	holder    *Mutex
	hold      *hold // the Redis lock as this Client holds it, nil when not held
	leading   bool  // a handle is acquiring the Redis lock for the cohort
	releasing bool  // a global unlock is on its way to Redis
	queue     []*waiter
	passes    int // local passes since the Redis lock was acquired or kept
}

type waiter struct {
	m     *Mutex
	lease time.Duration
	grant chan grant // capacity 1, sent under cohort.mu
}

type grant struct {
	lead bool // false: the lock was passed to the waiter; true: it must acquire it in Redis
}

func newCohort(c *Client, key, channel string) *cohort {
	co := &cohort{c: c, key: key, channel: channel, keys: []string{key, ownKey("queue", key), latchKey(key)}}
	co.waker = newWaker(c.id)
	return co
}

// reset makes a dropped cohort as good as new for reuse. Only stale pub/sub
// deliveries may have touched it since it was dropped.
func (co *cohort) reset() {
	co.mu.Lock()
	co.passes = 0
	co.mu.Unlock()
	select {
	case <-co.waker.notify:
	default:
	}
}

// acquire takes the lock for m, waiting at most wait (negative: until ctx is
// done; zero: one attempt). It reports whether m now holds the lock.
func (co *cohort) acquire(ctx context.Context, m *Mutex, wait, lease time.Duration) (bool, error) {
	start := time.Now()
	co.mu.Lock()
	switch {
	case co.holder == m:
		co.mu.Unlock()
		return co.reenter(ctx, m, lease)
	case co.holder == nil && !co.leading && !co.releasing:
		co.leading = true
		co.mu.Unlock()
		return co.lead(ctx, m, start, wait, lease)
	case wait == 0:
		co.mu.Unlock()
		return false, nil
	}
	w := &waiter{m: m, lease: lease, grant: make(chan grant, 1)}
	co.queue = append(co.queue, w)
	co.mu.Unlock()

	var expired <-chan time.Time
	if wait > 0 {
		timer := time.NewTimer(wait)
		defer timer.Stop()
		expired = timer.C
	}
	select {
	case g := <-w.grant:
		if !g.lead {
			return true, nil
		}
		if wait > 0 && time.Since(start) >= wait {
			co.abdicate()
			return false, nil
		}
		return co.lead(ctx, m, start, wait, lease)
	case <-expired:
		return false, co.abandon(w, nil)
	case <-ctx.Done():
		return false, co.abandon(w, ctx.Err())
	case <-co.c.life.Done():
		return false, co.abandon(w, context.Cause(co.c.life))
	}
}

// abandon takes w out of the queue when its wait ended. A grant that raced
// with the end of the wait is handed on.
func (co *cohort) abandon(w *waiter, err error) error {
	co.mu.Lock()
	for i, q := range co.queue {
		if q == w {
			co.queue = append(co.queue[:i], co.queue[i+1:]...)
			co.mu.Unlock()
			return err
		}
	}
	co.mu.Unlock()
	if g := <-w.grant; g.lead {
		co.abdicate()
	} else {
		ctx, cancel := co.c.cleanupContext(context.Background())
		defer cancel()
		_ = co.release(ctx, w.m)
	}
	return err
}

// abdicate gives up the leadership without acquiring.
func (co *cohort) abdicate() {
	co.mu.Lock()
	co.leading = false
	co.promoteLocked()
	co.mu.Unlock()
}

// promoteLocked makes the first queued handle the leader when nobody holds,
// leads or releases.
func (co *cohort) promoteLocked() {
	if co.holder != nil || co.leading || co.releasing || len(co.queue) == 0 {
		return
	}
	w := co.queue[0]
	co.queue = co.queue[1:]
	co.leading = true
	w.grant <- grant{lead: true}
}

// lead acquires the Redis lock for m as the cohort's leader. Close waits
// until the hold is taken or given back: an attempt that took the lock as
// the Client closed gives it back, since nobody would release it.
func (co *cohort) lead(ctx context.Context, m *Mutex, start time.Time, wait, lease time.Duration) (bool, error) {
	if !co.c.startTask() {
		co.abdicate()
		return false, ErrClosed
	}
	defer co.c.goroutines.Done()
	h, err := co.acquireRedis(ctx, start, wait, lease)
	if h != nil && !h.alive() { // its Client closed meanwhile
		releaseCtx, cancel := co.c.cleanupContext(ctx)
		defer cancel()
		err = h.endCause()
		// redis.Nil: the hold was gone already (its lease ran out).
		if releaseErr := co.runRelease(releaseCtx, releaseGive, h.token).Err(); releaseErr != nil && !errors.Is(releaseErr, redis.Nil) {
			err = errors.Join(err, fmt.Errorf("give back: %w", releaseErr))
		}
		h = nil
	}
	co.mu.Lock()
	defer co.mu.Unlock()
	co.leading = false
	if h == nil {
		co.promoteLocked()
		return false, err
	}
	co.holder, co.hold, m.depth = m, h, 1
	co.passes = 0
	m.lost.Store(false)
	return true, nil
}

// evict ends the local hold of a lock lost in Redis (its lease ran out, or
// the watchdog found it gone): the lock may already have another owner, so
// the next queued handle goes to Redis for it. The evicted holder learns it
// from its held context and from its Unlock.
func (co *cohort) evict(h *hold) {
	co.mu.Lock()
	m := co.holder
	if co.hold != h || m == nil {
		co.mu.Unlock()
		return
	}
	levels := m.depth
	m.depth = 0
	m.endHeld(ErrLockLost)
	m.lost.Store(true)
	co.holder, co.hold = nil, nil
	co.promoteLocked()
	co.mu.Unlock()
	for range levels { // each level pinned the cohort, and no Unlock will unpin it
		co.c.unpin(co)
	}
}

// acquireRedis acquires the Redis lock for the cohort, waiting as waitFor
// does. A waiting attempt takes the Client's place in the lock's queue, and
// the holder's release hands the lock to the queue's head; a leader that
// gives up leaves the queue, handing on a grant that came meanwhile. So does
// one whose attempt's reply was lost: the attempt may have taken the lock,
// and nobody else would release it before its lease ran out. Every attempt
// of one call names the same hold, so a retried attempt finds its first
// run's acquisition and the leave hands on what any of them took. Close
// waits for the leave (lead's startTask).
func (co *cohort) acquireRedis(ctx context.Context, start time.Time, wait, lease time.Duration) (*hold, error) {
	var h *hold
	token := co.c.newToken()
	queued, lost := false, false
	_, err := co.c.waitFor(ctx, co.waker, co.channel, start, wait, forever,
		func(ctx context.Context, waiting bool) (bool, time.Duration, error) {
			var ttl time.Duration
			var err error
			h, ttl, err = co.attempt(ctx, token, lease, waiting)
			queued = queued || waiting
			lost = lost || (h == nil && replyLost(err))
			return h != nil, ttl, err
		})
	// The cohort holds nothing in Redis while it leads: a field of its
	// Client there is a grant or the lost attempt's.
	if h == nil && (queued || lost) {
		leaveCtx, cancel := co.c.cleanupContext(ctx)
		defer cancel()
		if leaveErr := co.runRelease(leaveCtx, releaseLeave, token).Err(); leaveErr != nil && !errors.Is(leaveErr, redis.Nil) {
			// The place lapses with the queue's TTL, a grant with its lease:
			// the attempt's error, when there is one, is the one to report.
			if err == nil {
				err = fmt.Errorf("leave the wait queue: %w", leaveErr)
			}
		}
	}
	return h, err
}

// The modes of release.lua.
const (
	releaseGive  = "release" // give the lock up, to the next queued Client if any
	releaseKeep  = "keep"    // give it up only to a queued Client, else keep it
	releaseLeave = "leave"   // leave the queue; hand on a grant that came meanwhile
)

// runRelease runs release.lua in mode for the hold named token. A
// message the script published that no subscriber of its node heard is
// published again where the waiters listen: on a Cluster, the master the
// slot map names for the channel — not the importing master the script
// ran on if the lock's keys moved there and the slot has not followed
// (issue 24). It is a wake-up: a second copy costs its waiter an attempt.
func (co *cohort) runRelease(ctx context.Context, mode, token string) *redis.Cmd {
	cmd := co.c.eval(ctx, releaseScript, co.keys, co.c.idArg, co.c.watchdogTTLArg, mode, co.channel, co.c.publishArg,
		token, co.c.latchTTLArg)
	if message, unheard := cmd.Val().(string); unheard {
		if co.c.subs.sharded != nil {
			// Best effort: a waiter that misses it wakes by its timer.
			_ = co.c.subs.sharded.SPublish(ctx, co.channel, message).Err()
		}
		cmd.SetVal(int64(1))
	}
	return cmd
}

// The scripts' flag and level arguments, boxed once (see Client.idArg).
var (
	argZero any = "0"
	argOne  any = "1"
)

// attempt runs the acquire script once for the cohort's Client, for a new
// hold named token. A waiting attempt queues the Client, or takes the lock
// granted to it.
func (co *cohort) attempt(ctx context.Context, token string, lease time.Duration, waiting bool) (*hold, time.Duration, error) {
	ttl := lease
	if ttl <= 0 {
		ttl = co.c.opts.watchdogTimeout
	}
	waitingArg := argZero
	if waiting {
		waitingArg = argOne
	}
	sent := time.Now()
	acquired, pttl, err := co.c.attempt(ctx, lockScript, co.keys, co.c.ttlArg(ttl), co.c.idArg, waitingArg, token, argOne)
	if !acquired {
		return nil, pttl, err
	}
	if err == nil {
		err = expiredOnArrival(sent, ttl)
	}
	if err != nil { // not replicated, or expired before we knew: give it back
		cleanupCtx, cancel := co.c.cleanupContext(ctx)
		defer cancel()
		_ = co.runRelease(cleanupCtx, releaseGive, token).Err()
		return nil, 0, err
	}
	return co.c.newHold(co.key, token, sent, lease, co), 0, nil
}

func (co *cohort) renew(ctx context.Context, h *hold) (bool, error) {
	return renewHold(ctx, co.c, co.key, holdField, h.token, co.c.opts.watchdogTimeout)
}

// reenter adds one level to m's hold, in Redis too (the hash field counts
// levels, as in Redisson), so a reentrant lease also renews the TTL. The
// script finds the hold by its token or fails: a hold Redis lost is never
// re-created under a holder that believes it held on.
func (co *cohort) reenter(ctx context.Context, m *Mutex, lease time.Duration) (bool, error) {
	co.mu.Lock()
	h, levels := co.hold, m.depth
	co.mu.Unlock()
	if !h.alive() {
		return false, fmt.Errorf("reentrant acquisition: %w", ErrLockLost)
	}
	ttl := lease
	if ttl <= 0 {
		ttl = h.lease
	}
	sent := time.Now()
	acquired, _, err := co.c.attempt(ctx, lockScript, co.keys, co.c.ttlArg(ttl), co.c.idArg, argZero, h.token, strconv.Itoa(levels+1))
	switch {
	case acquired && err != nil: // the level is not replicated: give it back
		cleanupCtx, cancel := co.c.cleanupContext(ctx)
		defer cancel()
		return false, errors.Join(err, co.releaseLevel(cleanupCtx, h, levels))
	case err != nil:
		// A lost reply may have set the level count in Redis: harmless,
		// since the last level's release deletes the hold whatever it counts.
		return false, err
	case !acquired:
		h.end(ErrLockLost)
		co.evict(h)
		return false, fmt.Errorf("reentrant acquisition: %w", ErrLockLost)
	case !h.extend(sent, ttl):
		// The hold expired as the level was added; its eviction is under way.
		return false, fmt.Errorf("reentrant acquisition: %w", ErrLockLost)
	}
	co.mu.Lock()
	m.depth++
	co.mu.Unlock()
	return true, nil
}

// release gives up one level of m's hold. The last level passes the lock to
// the next queued handle when the cohort may (watchdog holds only, within
// the pass bound, and no other Client announced itself); otherwise it is
// released in Redis and the next queued handle becomes the leader.
func (co *cohort) release(ctx context.Context, m *Mutex) error {
	co.mu.Lock()
	if co.holder != m {
		co.mu.Unlock()
		return ErrNotHeld
	}
	h := co.hold
	if m.depth > 1 {
		m.depth--
		left := m.depth
		co.mu.Unlock()
		return co.releaseLevel(ctx, h, left)
	}
	m.depth = 0
	m.endHeld(releaseCause(h))
	if !h.alive() {
		co.holder, co.hold = nil, nil
		co.promoteLocked()
		co.mu.Unlock()
		return fmt.Errorf("%w: %w", ErrNotHeld, ErrLockLost)
	}
	if len(co.queue) > 0 && co.mayPassLocked(h, co.queue[0]) {
		if co.passes < co.c.opts.maxLocalPasses {
			co.passLocked()
			co.mu.Unlock()
			return nil
		}
		// At the bound: other Clients get their turn, if any waits.
		co.holder, co.releasing = nil, true
		co.mu.Unlock()
		kept, err := co.runRelease(ctx, releaseKeep, h.token).Int()
		co.mu.Lock()
		co.releasing = false
		if err == nil && kept == 0 {
			if co.hold == h && len(co.queue) > 0 && co.mayPassLocked(h, co.queue[0]) {
				co.passes = 0
				co.passLocked()
				co.mu.Unlock()
				return nil
			}
			// Kept, but the waiter left or the hold ended meanwhile.
			return co.releaseRedisLocked(ctx, h)
		}
		if co.hold == h {
			co.hold = nil
		}
		co.promoteLocked()
		co.mu.Unlock()
		h.end(ErrReleased)
		return unlockResult(co.key, err)
	}
	return co.releaseRedisLocked(ctx, h)
}

// releaseRedisLocked gives the lock up in Redis, to the next queued Client
// if any, and makes the next local waiter the leader. Called under co.mu
// with the last level released; returns with it unlocked.
func (co *cohort) releaseRedisLocked(ctx context.Context, h *hold) error {
	co.holder, co.hold, co.releasing = nil, nil, true
	co.mu.Unlock()

	h.end(ErrReleased) // stops the watchdog before the unlock is sent
	err := co.runRelease(ctx, releaseGive, h.token).Err()

	co.mu.Lock()
	co.releasing = false
	co.promoteLocked()
	co.mu.Unlock()
	return unlockResult(co.key, err)
}

// passLocked passes the lock to the first local waiter.
func (co *cohort) passLocked() {
	next := co.queue[0]
	co.queue = co.queue[1:]
	co.holder, next.m.depth = next.m, 1
	co.passes++
	next.grant <- grant{}
}

// mayPassLocked reports whether the lock may stay in the process for next:
// watchdog holds only, and cohorting on. The pass bound is the caller's.
func (co *cohort) mayPassLocked(h *hold, next *waiter) bool {
	return h.watchdog && next.lease <= 0 && h.alive() && co.c.opts.maxLocalPasses > 0
}

// releaseLevel releases an inner reentrant level of h in Redis, leaving
// left levels.
func (co *cohort) releaseLevel(ctx context.Context, h *hold, left int) error {
	if !h.alive() {
		return fmt.Errorf("%w: %w", ErrNotHeld, ErrLockLost)
	}
	return unlockResult(co.key, co.c.eval(ctx, unlockScript, []string{co.key, co.keys[2]}, co.c.ttlArg(h.lease), co.c.idArg, co.channel, co.c.publishArg,
		h.token, strconv.Itoa(left), co.c.latchTTLArg).Err())
}

func unlockResult(key string, err error) error {
	switch {
	case errors.Is(err, redis.Nil):
		return fmt.Errorf("%w: %s expired before unlock", ErrNotHeld, key)
	case err != nil:
		return fmt.Errorf("unlock %s: %w", key, err)
	}
	return nil
}
