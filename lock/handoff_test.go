package lock

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// queued waits until the lock's Redis queue of waiting Clients is want.
func queued(t *testing.T, rdb *redis.Client, m *Mutex, want ...string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := rdb.LRange(t.Context(), ownKey("queue", m.Key()), 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue %v, want %v", got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// lockAsync starts m.Lock and returns the channel its result arrives on.
func lockAsync(ctx context.Context, m *Mutex) <-chan error {
	done := make(chan error, 1)
	go func() { done <- m.Lock(ctx) }()
	return done
}

// An unlock hands the lock to the first queued Client, which takes it as
// one level, with its own lease, and releases it like any other.
func TestReleaseHandsTheLockToTheQueuedClient(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	a, b, c := newClient(t, srv), newClient(t, srv), newClient(t, srv)
	ctx := ctxTimeout(t, 10*time.Second)
	ma := a.Mutex("handoff")
	if err := ma.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	mb, mc := b.Mutex("handoff"), c.Mutex("handoff")
	bDone := lockAsync(ctx, mb)
	queued(t, rdb, ma, b.ID())
	cDone := lockAsync(ctx, mc)
	queued(t, rdb, ma, b.ID(), c.ID())

	if err := ma.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-bDone; err != nil {
		t.Fatalf("first queued Client: %v", err)
	}
	if owners := rdb.HGetAll(ctx, ma.Key()).Val(); len(owners) != 2 || owners[b.ID()] != "1" || !strings.HasPrefix(owners[holdField], b.ID()) {
		t.Fatalf("lock hash %v, want only %s at one level, and its hold", owners, b.ID())
	}
	if ttl := rdb.PTTL(ctx, ma.Key()).Val(); ttl < defaultWatchdogTimeout-5*time.Second {
		t.Fatalf("TTL %v after the grant was taken, want the grantee's watchdog lease", ttl)
	}
	queued(t, rdb, ma, c.ID())
	select {
	case err := <-cDone:
		t.Fatalf("second queued Client acquired while the first holds: %v", err)
	default:
	}
	if err := mb.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-cDone; err != nil {
		t.Fatalf("second queued Client: %v", err)
	}
	if err := mc.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if n := rdb.Exists(ctx, ma.Key(), ownKey("queue", ma.Key())).Val(); n != 0 {
		t.Fatalf("%d of the lock's keys left after the last unlock", n)
	}
}

// A waiter that gives up leaves the queue: the next unlock frees the lock
// instead of granting it to nobody.
func TestWaiterThatGivesUpLeavesTheQueue(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	a, b := newClient(t, srv), newClient(t, srv)
	ctx := ctxTimeout(t, 10*time.Second)
	ma := a.Mutex("leave")
	if err := ma.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := b.Mutex("leave").TryLock(ctx, 100*time.Millisecond, 0); ok || err != nil {
		t.Fatalf("TryLock = %v, %v", ok, err)
	}
	queued(t, rdb, ma)
	if err := ma.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if n := rdb.Exists(ctx, ma.Key()).Val(); n != 0 {
		t.Fatalf("lock still held after its only holder unlocked: %v", rdb.HGetAll(ctx, ma.Key()).Val())
	}
}

// A Client granted the lock as it gives up (the grant and its leaving
// crossed) hands it on to the next queued Client.
func TestGrantToALeavingWaiterIsHandedOn(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	a, b := newClient(t, srv), newClient(t, srv)
	ctx := ctxTimeout(t, 10*time.Second)
	ma := a.Mutex("crossed")
	if err := ma.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	bDone := lockAsync(ctx, b.Mutex("crossed"))
	queued(t, rdb, ma, b.ID())
	// a's unlock granting to "gone", which leaves before it took the grant.
	keys := []string{ma.Key(), ownKey("queue", ma.Key()), latchKey(ma.Key())}
	if err := rdb.LPush(ctx, keys[1], "gone").Err(); err != nil {
		t.Fatal(err)
	}
	if err := ma.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if owners := rdb.HGetAll(ctx, ma.Key()).Val(); owners["gone"] != "1" {
		t.Fatalf("lock hash %v, want the grant to gone", owners)
	}
	if err := releaseScript.Run(ctx, rdb, keys, "gone", 30_000, releaseLeave, ma.channel, "publish", "gone:h1", 1000).Err(); err != nil {
		t.Fatal(err)
	}
	if err := <-bDone; err != nil {
		t.Fatalf("Client queued behind the leaving one: %v", err)
	}
}

// A Client that died while queued gets the lock granted when its turn
// comes; its grant lapses after one lease and the next live waiter takes
// the lock then, not later.
func TestDeadQueuedClientHoldsTheLockAtMostOneLease(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	// 900 ms, not less: a's watchdog keeps its hold while the dead Client
	// queues, and a loaded machine delays a renewal now and then.
	const lease = 900 * time.Millisecond
	a, b := newClient(t, srv, WithWatchdogTimeout(lease)), newClient(t, srv, WithWatchdogTimeout(lease))
	ctx := ctxTimeout(t, 10*time.Second)
	ma := a.Mutex("crash")
	if err := ma.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	// A waiting attempt of a Client that then crashed: it queued, and will
	// never take a grant nor leave.
	keys := []string{ma.Key(), ownKey("queue", ma.Key()), latchKey(ma.Key())}
	if _, err := lockScript.Run(ctx, rdb, keys, lease.Milliseconds(), "dead", "1", "dead:h1", "1").Result(); err != nil {
		t.Fatal(err)
	}
	bDone := lockAsync(ctx, b.Mutex("crash"))
	queued(t, rdb, ma, "dead", b.ID())

	unlocked := time.Now()
	if err := ma.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if owners := rdb.HGetAll(ctx, ma.Key()).Val(); owners["dead"] != "1" {
		t.Fatalf("lock hash %v, want the grant to the dead Client", owners)
	}
	select {
	case err := <-bDone:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(lease + 3*time.Second):
		t.Fatalf("live waiter still waiting %v after the unlock, past the dead Client's %v grant", time.Since(unlocked), lease)
	}
	// One lease, plus the scheduling of a loaded machine.
	if took := time.Since(unlocked); took > lease+time.Second {
		t.Errorf("live waiter acquired %v after the unlock; the dead Client's grant lasts %v", took, lease)
	}
	queued(t, rdb, ma)
}

// A Client's own place in the queue can only be stale (its leave failed);
// its release skips it rather than granting the lock back to itself.
func TestReleaseSkipsTheOwnersStalePlace(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	a := newClient(t, srv)
	ctx := ctxTimeout(t, 10*time.Second)
	ma := a.Mutex("stale")
	if err := ma.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rdb.RPush(ctx, ownKey("queue", ma.Key()), a.ID()).Err(); err != nil {
		t.Fatal(err)
	}
	if err := ma.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if n := rdb.Exists(ctx, ma.Key()).Val(); n != 0 {
		t.Fatalf("lock granted back to its releasing Client: %v", rdb.HGetAll(ctx, ma.Key()).Val())
	}
}

// A waiter whose grant message is lost (its pub/sub connection missed it)
// still takes the lock, by its timer: it sleeps no longer than the lock's
// TTL at its last attempt, so it waits past the free lock for at most one
// lease, never for ever, even with no wait limit of its own.
func TestAWaiterWhoseGrantMessageIsLostTakesTheLockByItsTimer(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	const lease = 900 * time.Millisecond // a's watchdog lease, and its grant's
	var dropped atomic.Int32
	var channel string
	// The release publishes on a channel nobody listens on: the message
	// is lost, as a pub/sub connection that missed it would lose it.
	dropGrant := scriptHook{sha: releaseScript.Hash(), around: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		args := cmd.Args()
		for i := range args {
			if args[i] == channel {
				args[i] = channel + ":nobody"
				dropped.Add(1)
			}
		}
		return next(ctx, cmd)
	}}
	ctx := ctxTimeout(t, 20*time.Second)
	if err := releaseScript.Load(ctx, rdb).Err(); err != nil { // an EVALSHA, which the hook sees
		t.Fatal(err)
	}
	a, b := hookedClient(t, srv, dropGrant, WithWatchdogTimeout(lease)), newClient(t, srv)
	ma := a.Mutex("lost-grant")
	channel = ma.channel
	if err := ma.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	bDone := lockAsync(ctx, b.Mutex("lost-grant")) // no wait limit but ctx
	queued(t, rdb, ma, b.ID())
	time.Sleep(lease) // b sleeps on a TTL a's watchdog renewed meanwhile

	unlocked := time.Now()
	if err := ma.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if dropped.Load() != 1 {
		t.Fatalf("%d grant messages dropped, want 1", dropped.Load())
	}
	if owners := rdb.HGetAll(ctx, ma.Key()).Val(); owners[b.ID()] != "1" {
		t.Fatalf("lock hash %v, want the grant to the waiter", owners)
	}
	select {
	case err := <-bDone:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(lease + 5*time.Second):
		t.Fatalf("waiter still waiting %v after the unlock whose grant message was lost (lease %v)", time.Since(unlocked), lease)
	}
	// One lease, plus the scheduling of a loaded machine.
	if took := time.Since(unlocked); took > lease+time.Second {
		t.Errorf("waiter acquired %v after the unlock whose grant message was lost; it sleeps one lease at most (%v)", took, lease)
	}
}
