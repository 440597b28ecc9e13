package lock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockstep/lockstep/internal/redistest"
)

// Tests of the guards each script enforces, run by EVALSHA against a real
// Redis with the arguments the Go side sends, and of the hold, cohort and
// wait guards the mutation list (mutants.txt) found no test for. Each one
// kills the mutants named in its comment.

// scriptRig runs the package's scripts on one Redis.
type scriptRig struct {
	t   *testing.T
	ctx context.Context
	rdb *redis.Client
}

func newScriptRig(t *testing.T) *scriptRig {
	srv := redistest.Start(t)
	return &scriptRig{t: t, ctx: ctxTimeout(t, 10*time.Second), rdb: srv.Client(t)}
}

// run runs script by EVALSHA, loading it first.
func (r *scriptRig) run(script *redis.Script, keys []string, args ...any) (any, error) {
	r.t.Helper()
	if err := script.Load(r.ctx, r.rdb).Err(); err != nil {
		r.t.Fatal(err)
	}
	return r.rdb.EvalSha(r.ctx, script.Hash(), keys, args...).Result()
}

// want runs script and fails the test unless it answers want.
func (r *scriptRig) want(want any, script *redis.Script, keys []string, args ...any) {
	r.t.Helper()
	got, err := r.run(script, keys, args...)
	if errors.Is(err, redis.Nil) {
		got, err = nil, nil
	}
	if err != nil || got != want {
		r.t.Fatalf("script answered %#v, %v; want %#v", got, err, want)
	}
}

// pttl is key's TTL in ms (negative: none, or no key).
func (r *scriptRig) pttl(key string) int64 {
	r.t.Helper()
	return r.rdb.PTTL(r.ctx, key).Val().Milliseconds()
}

// subscribe listens on channel and returns the next message's payload, or
// "" when none comes within 2s.
func (r *scriptRig) subscribe(channel string) func() string {
	r.t.Helper()
	ps := r.rdb.Subscribe(r.ctx, channel)
	r.t.Cleanup(func() { _ = ps.Close() })
	if _, err := ps.Receive(r.ctx); err != nil { // the confirmation
		r.t.Fatal(err)
	}
	return func() string {
		ctx, cancel := context.WithTimeout(r.ctx, 2*time.Second)
		defer cancel()
		msg, err := ps.ReceiveMessage(ctx)
		if err != nil {
			return ""
		}
		return msg.Payload
	}
}

const (
	gKey     = "{g}"
	gQueue   = "~queue:{g}"
	gChannel = "{g}:channel"
	gLatch   = "~released:{g}"
)

var gKeys = []string{gKey, gQueue, gLatch}

// u01: a waiter that takes a free lock leaves the queue.
func TestScriptLockTakesTheWaiterOutOfTheQueue(t *testing.T) {
	r := newScriptRig(t)
	r.rdb.RPush(r.ctx, gQueue, "A", "B")
	r.want(acquiredOK, lockScript, gKeys, lockArgs("30000", "A", "1", "tA", "1")...)
	if q := r.rdb.LRange(r.ctx, gQueue, 0, -1).Val(); len(q) != 1 || q[0] != "B" {
		t.Fatalf("queue %v after A acquired, want [B]", q)
	}
}

// lock-reentry-recreates: a reentrant level of a hold Redis lost fails and
// creates nothing; lock-reentry-shortens: a level never shortens the lock.
func TestScriptLockReentry(t *testing.T) {
	r := newScriptRig(t)
	if res, err := r.run(lockScript, gKeys, lockArgs("30000", "A", "0", "tA", "2")...); err != nil || res == acquiredOK {
		t.Fatalf("a level of a hold Redis does not have = %v, %v; want its PTTL", res, err)
	}
	if n := r.rdb.Exists(r.ctx, gKey).Val(); n != 0 {
		t.Fatal("a reentrant level re-created a lost hold")
	}
	r.want(acquiredOK, lockScript, gKeys, lockArgs("60000", "A", "0", "tA", "1")...)
	r.want(acquiredOK, lockScript, gKeys, lockArgs("1000", "A", "0", "tA", "2")...)
	if ttl := r.pttl(gKey); ttl < 50000 {
		t.Fatalf("a 1s level cut a 60s hold to %d ms", ttl)
	}
	if n := r.rdb.HGet(r.ctx, gKey, "A").Val(); n != "2" {
		t.Fatalf("levels %q, want 2", n)
	}
}

// lock-grant-anyone, lock-free-ignores-grant: a lock granted to one Client
// is taken by that Client's waiting attempt only.
func TestScriptLockGrantIsForItsClientOnly(t *testing.T) {
	r := newScriptRig(t)
	r.rdb.HSet(r.ctx, gKey, "A", 1, "hold", "")
	r.rdb.PExpire(r.ctx, gKey, 30*time.Second)
	for _, waiting := range []string{"0", "1"} {
		if res, _ := r.run(lockScript, gKeys, lockArgs("30000", "B", waiting, "tB", "1")...); res == acquiredOK {
			t.Fatalf("B (waiting %s) took the lock granted to A", waiting)
		}
	}
	r.want(acquiredOK, lockScript, gKeys, lockArgs("30000", "A", "1", "tA", "1")...)
	if hold := r.rdb.HGet(r.ctx, gKey, "hold").Val(); hold != "tA" {
		t.Fatalf("hold %q after A took its grant, want tA", hold)
	}
}

// lock-dup-place, lock-queue-forever: a waiting Client has one place, and
// the queue lapses unless refreshed.
func TestScriptLockQueuesOncePerClient(t *testing.T) {
	r := newScriptRig(t)
	r.want(acquiredOK, lockScript, gKeys, lockArgs("30000", "X", "0", "tX", "1")...)
	for range 2 {
		if _, err := r.run(lockScript, gKeys, lockArgs("30000", "A", "1", "tA", "1")...); err != nil {
			t.Fatal(err)
		}
	}
	if q := r.rdb.LRange(r.ctx, gQueue, 0, -1).Val(); len(q) != 1 {
		t.Fatalf("queue %v, want A once", q)
	}
	if ttl := r.pttl(gQueue); ttl <= 0 {
		t.Fatalf("queue TTL %d: a dead Client's place would never lapse", ttl)
	}
}

// u02: the last level's unlock publishes; unlock-no-owner: another hold's
// unlock touches nothing; unlock-inner-releases, unlock-inner-cuts: an
// inner level leaves the lock and its longer TTL; unlock-no-latch: a
// replayed unlock answers as the first did.
func TestScriptUnlock(t *testing.T) {
	r := newScriptRig(t)
	next := r.subscribe(gChannel)
	r.want(acquiredOK, lockScript, gKeys, lockArgs("60000", "A", "0", "tA", "1")...)
	r.want(acquiredOK, lockScript, gKeys, lockArgs("60000", "A", "0", "tA", "2")...)
	unlock := func(lease, token, left string) []any {
		return []any{lease, "A", gChannel, "publish", token, left, "10000"}
	}
	r.want(nil, unlockScript, []string{gKey, gLatch}, unlock("1000", "tOld", "1")...)
	r.want(int64(0), unlockScript, []string{gKey, gLatch}, unlock("1000", "tA", "1")...)
	if ttl := r.pttl(gKey); ttl < 50000 {
		t.Fatalf("an inner unlock with a 1s lease cut the 60s TTL to %d ms", ttl)
	}
	r.want(int64(1), unlockScript, []string{gKey, gLatch}, unlock("60000", "tA", "0")...)
	if msg := next(); msg != "uA" {
		t.Fatalf("unlock published %q, want uA", msg)
	}
	r.want(int64(1), unlockScript, []string{gKey, gLatch}, unlock("60000", "tA", "0")...) // a retried request
}

// u03: a grant lasts one grant lease; release-grant-silent: it wakes the
// grantee; release-own-place: the releaser's stale place is skipped;
// release-no-latch: a replayed release answers 1; release-any-hold: a late
// release of an earlier hold touches nothing.
func TestScriptReleaseGrants(t *testing.T) {
	r := newScriptRig(t)
	next := r.subscribe(gChannel)
	r.want(acquiredOK, lockScript, gKeys, lockArgs("60000", "A", "0", "tA", "1")...)
	r.rdb.RPush(r.ctx, gQueue, "A", "B")
	release := func(token, mode string) []any {
		return []any{"A", "1000", mode, gChannel, "publish", token, "10000"}
	}
	r.want(nil, releaseScript, gKeys, release("tOld", releaseGive)...)
	r.want(int64(1), releaseScript, gKeys, release("tA", releaseGive)...)
	if ttl := r.pttl(gKey); ttl > 1000 || ttl <= 0 {
		t.Fatalf("granted lock's TTL %d ms, want the 1000 ms grant lease", ttl)
	}
	if got := r.rdb.HGetAll(r.ctx, gKey).Val(); got["B"] != "1" || got["hold"] != "" || got["A"] != "" {
		t.Fatalf("lock %v after the grant, want B's with an empty hold", got)
	}
	if msg := next(); msg != "gB" {
		t.Fatalf("release published %q, want gB", msg)
	}
	r.want(int64(1), releaseScript, gKeys, release("tA", releaseGive)...) // a retried request
	if got := r.rdb.HGet(r.ctx, gKey, "B").Val(); got != "1" {
		t.Fatal("a retried release took B's grant")
	}
}

// release-keep-gives-up: 'keep' with nobody queued keeps the lock;
// release-leave-stays: 'leave' takes the place out of the queue.
func TestScriptReleaseKeepAndLeave(t *testing.T) {
	r := newScriptRig(t)
	r.want(acquiredOK, lockScript, gKeys, lockArgs("60000", "A", "0", "tA", "1")...)
	r.want(int64(0), releaseScript, gKeys, "A", "1000", releaseKeep, gChannel, "publish", "tA", "10000")
	if ttl := r.pttl(gKey); ttl < 50000 {
		t.Fatalf("kept lock's TTL %d ms", ttl)
	}
	r.rdb.RPush(r.ctx, gQueue, "C", "D")
	r.want(nil, releaseScript, gKeys, "C", "1000", releaseLeave, gChannel, "publish", "tC", "10000")
	if q := r.rdb.LRange(r.ctx, gQueue, 0, -1).Val(); len(q) != 1 || q[0] != "D" {
		t.Fatalf("queue %v after C left, want [D]", q)
	}
}

// u04: a renewal never shortens; renew-any-hold: it renews its own hold only.
func TestScriptRenew(t *testing.T) {
	r := newScriptRig(t)
	r.want(acquiredOK, lockScript, gKeys, lockArgs("60000", "A", "0", "tA", "1")...)
	r.want(int64(1), renewScript, gKeys[:1], "1000", holdField, "tA")
	if ttl := r.pttl(gKey); ttl < 50000 {
		t.Fatalf("a 1s renewal cut the 60s TTL to %d ms", ttl)
	}
	r.rdb.PExpire(r.ctx, gKey, time.Second)
	r.want(int64(0), renewScript, gKeys[:1], "60000", holdField, "tOld")
	if ttl := r.pttl(gKey); ttl > 1000 {
		t.Fatalf("a renewal of an earlier hold extended the lock to %d ms", ttl)
	}
}

var fKeys = []string{"{f}", "~queue:{f}", "~deadlines:{f}", "~released:{f}"}

func fLockArgs(lease, owner, queue, token, levels string) []any {
	return []any{lease, owner, "5000", queue, token, levels}
}

func fUnlockArgs(lease, owner, token, left string) []any {
	return []any{lease, owner, "{f}:channel", "publish", token, left, "10000"}
}

// u05: the queue's head gets a free fair lock first; u06: it leaves no
// deadline behind; fair-no-queue: a waiter queues; fair-unlock-silent: the
// unlock wakes the head.
func TestScriptFairHeadFirst(t *testing.T) {
	r := newScriptRig(t)
	r.want(acquiredOK, fairLockScript, fKeys, fLockArgs("30000", "X", "0", "tX", "1")...)
	for _, w := range []string{"A", "B"} {
		if res, _ := r.run(fairLockScript, fKeys, fLockArgs("30000", w, "1", "t"+w, "1")...); res == acquiredOK {
			t.Fatalf("%s acquired a held fair lock", w)
		}
	}
	if q := r.rdb.LRange(r.ctx, fKeys[1], 0, -1).Val(); len(q) != 2 || q[0] != "A" {
		t.Fatalf("queue %v, want [A B]", q)
	}
	next := r.subscribe("{f}:channel:A")
	r.want(int64(1), fairUnlockScript, fKeys, fUnlockArgs("30000", "X", "tX", "0")...)
	if msg := next(); msg != "u" {
		t.Fatalf("fair unlock published %q to the head, want u", msg)
	}
	if res, _ := r.run(fairLockScript, fKeys, fLockArgs("30000", "B", "1", "tB", "1")...); res == acquiredOK {
		t.Fatal("B took the fair lock ahead of A, the queue's head")
	}
	r.want(acquiredOK, fairLockScript, fKeys, fLockArgs("30000", "A", "1", "tA", "1")...)
	if err := r.rdb.ZScore(r.ctx, fKeys[2], "A").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("A's deadline entry after it acquired: %v", err)
	}
}

// fair-dead-head-stays: a head that stopped refreshing is dropped.
func TestScriptFairDropsADeadHead(t *testing.T) {
	r := newScriptRig(t)
	r.rdb.RPush(r.ctx, fKeys[1], "dead")
	r.rdb.ZAdd(r.ctx, fKeys[2], redis.Z{Score: 1, Member: "dead"}) // long past
	r.want(acquiredOK, fairLockScript, fKeys, fLockArgs("30000", "A", "0", "tA", "1")...)
}

// u07: a fair unlock checks the hold; fair-inner-cuts: an inner level
// keeps the longer TTL; fair-reentry-recreates, fair-reentry-shortens.
func TestScriptFairLevels(t *testing.T) {
	r := newScriptRig(t)
	if res, _ := r.run(fairLockScript, fKeys, fLockArgs("30000", "A", "0", "tA", "2")...); res == acquiredOK {
		t.Fatal("a fair reentrant level re-created a lost hold")
	}
	r.want(acquiredOK, fairLockScript, fKeys, fLockArgs("500", "A", "0", "tA", "1")...)
	r.want(acquiredOK, fairLockScript, fKeys, fLockArgs("60000", "A", "0", "tA", "2")...)
	r.want(acquiredOK, fairLockScript, fKeys, fLockArgs("1000", "A", "0", "tA", "3")...)
	r.want(nil, fairUnlockScript, fKeys, fUnlockArgs("500", "A", "tOld", "2")...)
	r.want(int64(0), fairUnlockScript, fKeys, fUnlockArgs("500", "A", "tA", "2")...)
	if ttl := r.pttl(fKeys[0]); ttl < 50000 {
		t.Fatalf("fair levels and an inner unlock left a TTL of %d ms, want the 60s level's", ttl)
	}
}

// fair-leave-stays, fair-leave-silent: a head that gives up leaves and
// wakes the next.
func TestScriptFairLeave(t *testing.T) {
	r := newScriptRig(t)
	r.want(acquiredOK, fairLockScript, fKeys, fLockArgs("30000", "X", "0", "tX", "1")...)
	for _, w := range []string{"A", "B"} {
		_, _ = r.run(fairLockScript, fKeys, fLockArgs("30000", w, "1", "t"+w, "1")...)
	}
	r.rdb.Del(r.ctx, fKeys[0]) // expired
	next := r.subscribe("{f}:channel:B")
	r.want(int64(1), fairLeaveScript, fKeys[:3], "A", "{f}:channel", "publish")
	if q := r.rdb.LRange(r.ctx, fKeys[1], 0, -1).Val(); len(q) != 1 || q[0] != "B" {
		t.Fatalf("queue %v after A left, want [B]", q)
	}
	if msg := next(); msg != "u" {
		t.Fatalf("the next waiter got %q, want u", msg)
	}
}

// fenced-same-token, fenced-reentry-recreates.
func TestScriptFencedTokens(t *testing.T) {
	r := newScriptRig(t)
	keys := []string{"{n}", "~token:{n}", "~released:{n}"}
	token := func(owner, tok, levels string) any {
		res, err := r.run(fencedLockScript, keys, "30000", owner, tok, levels, keys[1])
		if err != nil {
			t.Fatal(err)
		}
		if v, ok := res.([]any); ok {
			return v[0]
		}
		return nil
	}
	first := token("A", "tA", "1")
	if got := token("A", "tA", "2"); got != first {
		t.Fatalf("a reentrant level got token %v, want its hold's %v", got, first)
	}
	r.rdb.Del(r.ctx, "{n}") // wiped
	if got := token("A", "tA", "3"); got != nil {
		t.Fatalf("a level of a lost fenced hold got token %v, want a refusal", got)
	}
	if got := token("B", "tB", "1"); got.(int64) <= first.(int64) {
		t.Fatalf("the next holder's token %v is not above %v", got, first)
	}
}

var rwKeys = []string{"{rw}", "~writers:{rw}", "~released:{rw}"}

func readArgs(lease, token string) []any {
	return []any{lease, token, "o-" + token + ":write", "1", "~rwlock_timeout:{rw}:" + token, "1"}
}

// u08: a shared read level never shortens the hash; read-into-write: a
// reader stays out of another owner's write lock; read-no-writers-first:
// new readers wait behind a waiting writer.
func TestScriptReadLock(t *testing.T) {
	r := newScriptRig(t)
	r.want(acquiredOK, readLockScript, rwKeys, readArgs("60000", "r1")...)
	r.want(acquiredOK, readLockScript, rwKeys, readArgs("1000", "r2")...)
	if ttl := r.pttl(rwKeys[0]); ttl < 50000 {
		t.Fatalf("a 1s reader cut the 60s read lock to %d ms", ttl)
	}
	r.rdb.ZAdd(r.ctx, rwKeys[1], redis.Z{Score: float64(time.Now().Add(time.Minute).UnixMilli()), Member: "w:write"})
	if res, _ := r.run(readLockScript, rwKeys, readArgs("30000", "r3")...); res == acquiredOK {
		t.Fatal("a new reader got in ahead of a waiting writer")
	}
	r.rdb.Del(r.ctx, rwKeys...)
	r.want(acquiredOK, writeLockScript, rwKeys, "30000", "w:write", "0", "5000", "tw", "1")
	if res, _ := r.run(readLockScript, rwKeys, readArgs("30000", "r4")...); res == acquiredOK {
		t.Fatal("a reader got into another owner's write lock")
	}
}

// u09: the last waiting writer that leaves wakes the readers.
func TestScriptWriteLeaveWakesReaders(t *testing.T) {
	r := newScriptRig(t)
	next := r.subscribe("{rw}:channel")
	r.rdb.ZAdd(r.ctx, rwKeys[1], redis.Z{Score: float64(time.Now().Add(time.Minute).UnixMilli()), Member: "w:write"})
	r.want(int64(1), writeLeaveScript, rwKeys[1:2], "w:write", "{rw}:channel", "publish")
	if msg := next(); msg != "u" {
		t.Fatalf("readers got %q, want u", msg)
	}
}

// write-no-place, write-place-stays: a waiting writer holds a place until
// it acquires; write-unlock-silent, write-inner-releases.
func TestScriptWriteLock(t *testing.T) {
	r := newScriptRig(t)
	r.want(acquiredOK, readLockScript, rwKeys, readArgs("30000", "r1")...)
	if res, _ := r.run(writeLockScript, rwKeys, "30000", "w:write", "1", "5000", "tw", "1"); res == acquiredOK {
		t.Fatal("a writer got into a read lock")
	}
	if err := r.rdb.ZScore(r.ctx, rwKeys[1], "w:write").Err(); err != nil {
		t.Fatalf("the waiting writer's place: %v", err)
	}
	r.rdb.Del(r.ctx, rwKeys[0])
	r.want(acquiredOK, writeLockScript, rwKeys, "30000", "w:write", "1", "5000", "tw", "1")
	if err := r.rdb.ZScore(r.ctx, rwKeys[1], "w:write").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("the writer's place after it acquired: %v", err)
	}
	r.want(acquiredOK, writeLockScript, rwKeys, "30000", "w:write", "0", "5000", "tw", "2")
	next := r.subscribe("{rw}:channel")
	unlock := func(left string) []any {
		return []any{"30000", "w:write", "{rw}:channel", "publish", "tw", left, "10000", rwKeys[1]}
	}
	r.want(int64(0), writeUnlockScript, []string{rwKeys[0], rwKeys[2]}, unlock("1")...)
	if n := r.rdb.Exists(r.ctx, rwKeys[0]).Val(); n != 1 {
		t.Fatal("an inner write unlock released the lock")
	}
	r.want(int64(1), writeUnlockScript, []string{rwKeys[0], rwKeys[2]}, unlock("0")...)
	if msg := next(); msg != "u" {
		t.Fatalf("write unlock published %q, want u", msg)
	}
}

// u10: a reentrant level with a longer lease extends a lease hold.
func TestReentrantLongerLeaseExtendsTheHold(t *testing.T) {
	srv := redistest.Start(t)
	for _, kind := range reentrantKinds {
		t.Run(kind.name, func(t *testing.T) {
			ctx := ctxTimeout(t, 10*time.Second)
			l := kind.handle(newClient(t, srv), "longer-reentry-"+kind.name)
			held, ok, err := l.TryLockContext(ctx, 0, 300*time.Millisecond)
			if !ok || err != nil {
				t.Fatalf("TryLock = %v, %v", ok, err)
			}
			if ok, err := l.TryLock(ctx, 0, 3*time.Second); !ok || err != nil {
				t.Fatalf("reentrant TryLock = %v, %v", ok, err)
			}
			time.Sleep(600 * time.Millisecond)
			assertLive(t, held)
			assertBusy(t, kind.handle(newClient(t, srv), "longer-reentry-"+kind.name), "the 3s level holds it")
		})
	}
}

// u12: a local waiter whose wait was cancelled leaves the cohort's queue,
// and the lock goes to the next one.
func TestCancelledLocalWaiterLeavesTheQueue(t *testing.T) {
	srv := redistest.Start(t)
	ctx := ctxTimeout(t, 10*time.Second)
	c := newClient(t, srv)
	holder, gaveUp, next := c.Mutex("cancelled-local"), c.Mutex("cancelled-local"), c.Mutex("cancelled-local")
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := gaveUp.Lock(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("gave-up Lock = %v", err)
	}
	acquired := lockAsync(ctx, next)
	time.Sleep(100 * time.Millisecond)
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-acquired:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the lock went to a waiter that had given up")
	}
}

// u13: a handle that asked for a lease is not passed a watchdog hold.
func TestLeaseWaiterIsNotPassedAWatchdogHold(t *testing.T) {
	srv := redistest.Start(t)
	ctx := ctxTimeout(t, 10*time.Second)
	c := newClient(t, srv)
	holder, leased := c.Mutex("lease-pass"), c.Mutex("lease-pass")
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	acquired := make(chan error, 1)
	go func() {
		ok, err := leased.TryLock(ctx, 5*time.Second, 500*time.Millisecond)
		if !ok && err == nil {
			err = errors.New("not acquired")
		}
		acquired <- err
	}()
	time.Sleep(100 * time.Millisecond)
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-acquired; err != nil {
		t.Fatal(err)
	}
	if ttl := srv.Client(t).PTTL(ctx, leased.Key()).Val(); ttl > 500*time.Millisecond {
		t.Fatalf("the 500ms lease holder's lock has a TTL of %v: it was passed the watchdog hold", ttl)
	}
}

// u14: Close wakes a waiter asleep on a lock held for the whole watchdog
// timeout.
func TestCloseWakesASleepingWaiter(t *testing.T) {
	srv := redistest.Start(t)
	ctx := ctxTimeout(t, 20*time.Second)
	c := newClient(t, srv)
	if err := newClient(t, srv).Mutex("close-wakes").Lock(ctx); err != nil {
		t.Fatal(err)
	}
	waiter := lockAsync(ctx, c.Mutex("close-wakes"))
	time.Sleep(200 * time.Millisecond) // asleep, on a 30s TTL
	closed := make(chan struct{})
	go func() {
		_ = c.Close()
		close(closed)
	}()
	select {
	case err := <-waiter:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("waiter's Lock = %v, want ErrClosed", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Close did not wake the sleeping waiter")
	}
	<-closed
}

// wait-no-retry-after-subscribe: an unlock between a waiter's first
// attempt and its subscription publishes nothing (nobody was queued), so
// the waiter tries again once subscribed instead of sleeping on the TTL
// (Redisson #1763).
func TestUnlockBeforeTheSubscriptionIsNotMissed(t *testing.T) {
	srv := redistest.Start(t)
	ctx := ctxTimeout(t, 10*time.Second)
	holder := newClient(t, srv).Mutex("before-subscribe")
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	releaseAfterFirstAttempt := scriptHook{sha: lockScript.Hash(), around: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		err := next(ctx, cmd)
		once.Do(func() {
			if err := holder.Unlock(context.Background()); err != nil {
				t.Error(err)
			}
		})
		return err
	}}
	waiter := hookedClient(t, srv, releaseAfterFirstAttempt).Mutex("before-subscribe")
	start := time.Now()
	ok, err := waiter.TryLock(ctx, 5*time.Second, 0)
	if waited := time.Since(start); !ok || err != nil || waited > 2*time.Second {
		t.Fatalf("TryLock = %v, %v after %v: the unlock before the subscription was missed", ok, err, waited)
	}
}

// renew-expiry-from-reply: a renewal's expiry counts from when it was
// sent. Redis's TTL runs from the renewal's arrival, so a reply that comes
// late must not stretch the hold past it.
func TestLateRenewalReplyDoesNotStretchTheHold(t *testing.T) {
	srv := redistest.Start(t)
	ctx := ctxTimeout(t, 10*time.Second)
	const watchdog = 1500 * time.Millisecond
	var renewals atomic.Int32
	renewedAt := make(chan time.Time, 1)
	lateReply := scriptHook{sha: renewScript.Hash(), around: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if renewals.Add(1) > 1 {
			return errors.New("renewal refused") // every later renewal fails
		}
		renewedAt <- time.Now() // before Redis has it: its TTL ends later
		err := next(ctx, cmd)
		time.Sleep(800 * time.Millisecond) // the reply comes late
		return err
	}}
	c := hookedClient(t, srv, lateReply, WithWatchdogTimeout(watchdog))
	held, err := c.Mutex("late-renewal-reply").LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sent := <-renewedAt
	time.Sleep(time.Until(sent.Add(watchdog + 400*time.Millisecond)))
	if context.Cause(held) == nil {
		t.Fatal("the held context is live 400 ms after the TTL its last renewal gave the lock ran out")
	}
}
