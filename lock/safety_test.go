package lock

import (
	"context"
	"errors"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// Tests of the ways a lock could end up with two owners, or with none while
// Redis still holds it: each one reproduces a defect found by review.

// scriptHook runs around every EVALSHA of one script, on one go-redis client,
// to delay, reorder or lose its replies as a network can.
type scriptHook struct {
	sha    string
	around func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error
}

func (h scriptHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h scriptHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if len(args) > 1 && cmd.Name() == "evalsha" && args[1] == h.sha {
			return h.around(ctx, cmd, next)
		}
		return next(ctx, cmd)
	}
}

func (h scriptHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// hookedClient is a lock Client whose Redis client runs hook. The scripts
// are loaded first, so that every run is an EVALSHA the hook sees.
func hookedClient(t *testing.T, srv *redistest.Server, hook redis.Hook, opts ...Option) *Client {
	t.Helper()
	rdb := srv.Client(t)
	for _, script := range []*redis.Script{lockScript, fairLockScript, fencedLockScript, renewScript} {
		if err := script.Load(context.Background(), rdb).Err(); err != nil {
			t.Fatal(err)
		}
	}
	rdb.AddHook(hook)
	c := New(rdb, opts...)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// heldLocker is a lock that hands out held contexts.
type heldLocker interface {
	Locker
	LockContext(ctx context.Context) (context.Context, error)
	TryLockContext(ctx context.Context, wait, lease time.Duration) (context.Context, bool, error)
}

// reentrantKinds are the reentrant lock kinds, each with its acquisition script.
var reentrantKinds = []struct {
	name   string
	script *redis.Script
	handle func(c *Client, name string) heldLocker
}{
	{"mutex", lockScript, func(c *Client, name string) heldLocker { return c.Mutex(name) }},
	{"fair", fairLockScript, func(c *Client, name string) heldLocker { return c.FairMutex(name) }},
	{"fenced", fencedLockScript, func(c *Client, name string) heldLocker { return c.FencedMutex(name) }},
}

func assertBusy(t *testing.T, other heldLocker, why string) {
	t.Helper()
	ok, err := other.TryLock(ctxTimeout(t, 5*time.Second), 0, 0)
	if ok || err != nil {
		t.Fatalf("another Client's TryLock = %v, %v; want false: %s", ok, err, why)
	}
}

func assertLive(t *testing.T, held context.Context) {
	t.Helper()
	if err := context.Cause(held); err != nil {
		t.Fatalf("held context ended: %v", err)
	}
}

// A reentrant level with a shorter lease must not shorten the hold it joins.
func TestReentrantShortLeaseKeepsTheHold(t *testing.T) {
	srv := redistest.Start(t)
	for _, kind := range reentrantKinds {
		t.Run(kind.name, func(t *testing.T) {
			ctx := ctxTimeout(t, 5*time.Second)
			c, other := newClient(t, srv), newClient(t, srv)
			l := kind.handle(c, "short-reentry-"+kind.name)
			held, err := l.LockContext(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if ok, err := l.TryLock(ctx, 0, 100*time.Millisecond); !ok || err != nil {
				t.Fatalf("reentrant TryLock = %v, %v", ok, err)
			}
			time.Sleep(300 * time.Millisecond)
			assertLive(t, held)
			assertBusy(t, kind.handle(other, "short-reentry-"+kind.name), "the outer watchdog hold is live")
			for range 2 {
				if err := l.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// An acquisition whose lease ran out before its reply arrived did not
// acquire: Redis may have let the lock go already.
func TestAcquisitionExpiredOnArrivalFails(t *testing.T) {
	srv := redistest.Start(t)
	for _, kind := range reentrantKinds {
		t.Run(kind.name, func(t *testing.T) {
			ctx := ctxTimeout(t, 5*time.Second)
			slowReply := scriptHook{sha: kind.script.Hash(), around: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
				err := next(ctx, cmd)
				time.Sleep(30 * time.Millisecond)
				return err
			}}
			c := hookedClient(t, srv, slowReply)
			l := kind.handle(c, "expired-on-arrival-"+kind.name)
			held, ok, err := l.TryLockContext(ctx, 0, 20*time.Millisecond)
			if ok || !errors.Is(err, ErrLockLost) || held != nil {
				t.Fatalf("TryLockContext = %v, %v, %v; want nil, false, ErrLockLost", held, ok, err)
			}
			if err := l.Unlock(ctx); !errors.Is(err, ErrNotHeld) {
				t.Fatalf("Unlock = %v, want ErrNotHeld", err)
			}
			if ok, err := kind.handle(newClient(t, srv), "expired-on-arrival-"+kind.name).TryLock(ctx, 0, time.Second); !ok || err != nil {
				t.Fatalf("another Client's TryLock = %v, %v; want true", ok, err)
			}
		})
	}
}

// A MultiLock that fails must leave alone a lock its caller held before.
func TestMultiLockLeavesLocksHeldOutsideIt(t *testing.T) {
	srv := redistest.Start(t)
	ctx := ctxTimeout(t, 5*time.Second)
	c := newClient(t, srv)
	m1 := c.Mutex("multi-outside-1")
	held, err := m1.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if ok, _ := NewMultiLock(m1, c.Mutex("multi-outside-2")).TryLock(cancelled, 0, 0); ok {
		t.Fatal("MultiLock acquired with a cancelled context")
	}
	assertLive(t, held)
	assertBusy(t, newClient(t, srv).Mutex("multi-outside-1"), "m1 is still held outside the MultiLock")
	if err := m1.Unlock(ctx); err != nil {
		t.Fatalf("m1.Unlock = %v", err)
	}
}

// Waiters of a closed Client end with ErrClosed and acquire nothing.
func TestWaitersEndWithTheirClient(t *testing.T) {
	for _, tc := range []struct {
		name string
		// The holder is a handle of the waiter's Client: the waiter queues
		// in the process instead of waiting in Redis.
		holderOfSameClient bool
	}{
		{"waiting in Redis", false},
		{"queued behind a handle of its Client", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			ctx := ctxTimeout(t, 10*time.Second)
			c, holderClient := newClient(t, srv), newClient(t, srv)
			if tc.holderOfSameClient {
				holderClient = c
			}
			holder := holderClient.Mutex("closed-waiter")
			if ok, err := holder.TryLock(ctx, 0, 500*time.Millisecond); !ok || err != nil {
				t.Fatalf("holder TryLock = %v, %v", ok, err)
			}
			waiter := lockAsync(ctx, c.Mutex("closed-waiter"))
			time.Sleep(100 * time.Millisecond)
			_ = c.Close()
			select {
			case err := <-waiter:
				if !errors.Is(err, ErrClosed) {
					t.Fatalf("waiter's Lock = %v, want ErrClosed", err)
				}
			case <-time.After(2 * time.Second):
				t.Fatal("the waiter of a closed Client still waits")
			}
			time.Sleep(700 * time.Millisecond) // the holder's lease is over
			if n := srv.Client(t).Exists(ctx, holder.Key()).Val(); n != 0 {
				t.Fatal("a closed Client's waiter acquired the lock")
			}
		})
	}
}

// A reentrant level that replication did not confirm is given back.
func TestUnreplicatedReentrantLevelIsGivenBack(t *testing.T) {
	primary := redistest.Start(t, "--repl-diskless-sync-delay", "0")
	replica := redistest.Start(t, "--replicaof", "127.0.0.1", portOf(primary.Addr))
	ctx := ctxTimeout(t, 10*time.Second)
	rrdb, rdb := replica.Client(t), primary.Client(t)
	waitFor(t, func() bool { return replicaLinked(ctx, rrdb) })
	c := newClient(t, primary, WithWaitReplicas(1, time.Second))
	held := make([]heldLocker, len(reentrantKinds))
	for i, kind := range reentrantKinds {
		held[i] = kind.handle(c, "unreplicated-reentry-"+kind.name)
		if ok, err := held[i].TryLock(ctx, 0, 0); !ok || err != nil {
			t.Fatalf("%s: TryLock = %v, %v", kind.name, ok, err)
		}
	}
	replica.Stop()
	waitFor(t, func() bool { return !replicaConnected(ctx, rdb) })
	for i, kind := range reentrantKinds {
		l := held[i]
		if ok, err := l.TryLock(ctx, 0, 0); ok || !errors.Is(err, ErrNotReplicated) {
			t.Errorf("%s: unreplicated reentrant TryLock = %v, %v; want false, ErrNotReplicated", kind.name, ok, err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Errorf("%s: Unlock = %v", kind.name, err)
		}
		if n := rdb.Exists(ctx, keyOf("unreplicated-reentry-"+kind.name)).Val(); n != 0 {
			t.Errorf("%s: the lock stayed in Redis after its one confirmed level was unlocked", kind.name)
		}
	}
}

func keyOf(name string) string {
	key, _ := lockKeys(name)
	return key
}

func replicaConnected(ctx context.Context, rdb *redis.Client) bool {
	info, _ := rdb.InfoMap(ctx, "replication").Result()
	return info["Replication"]["connected_slaves"] != "0"
}

// An acquisition whose reply was lost does not leave the lock held for a
// whole lease with nobody to use or release it.
func TestLostAcquisitionReplyIsCompensated(t *testing.T) {
	srv := redistest.Start(t)
	for _, kind := range reentrantKinds {
		t.Run(kind.name, func(t *testing.T) {
			ctx := ctxTimeout(t, 5*time.Second)
			var lost atomic.Bool
			lostReply := scriptHook{sha: kind.script.Hash(), around: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
				if err := next(ctx, cmd); err != nil || !lost.CompareAndSwap(false, true) {
					return err
				}
				timeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
				cmd.SetErr(timeout)
				return timeout
			}}
			c := hookedClient(t, srv, lostReply)
			l := kind.handle(c, "lost-reply-"+kind.name)
			if ok, err := l.TryLock(ctx, 0, 0); ok || err == nil {
				t.Fatalf("TryLock with its reply lost = %v, %v; want false and the error", ok, err)
			}
			if n := srv.Client(t).Exists(ctx, keyOf("lost-reply-"+kind.name)).Val(); n != 0 {
				t.Fatal("the lock acquired by the lost attempt is still held")
			}
			if ok, err := kind.handle(newClient(t, srv), "lost-reply-"+kind.name).TryLock(ctx, 0, time.Second); !ok || err != nil {
				t.Fatalf("another Client's TryLock = %v, %v; want true", ok, err)
			}
		})
	}
}

// Evicting a reentrant holder drops its cohort with the hold.
func TestEvictedReentrantHolderLeavesNoCohort(t *testing.T) {
	srv := redistest.Start(t)
	ctx := ctxTimeout(t, 5*time.Second)
	c := newClient(t, srv)
	m := c.Mutex("evicted-reentrant")
	for range 3 {
		if ok, err := m.TryLock(ctx, 0, 100*time.Millisecond); !ok || err != nil {
			t.Fatalf("TryLock = %v, %v", ok, err)
		}
	}
	time.Sleep(300 * time.Millisecond)
	if err := m.Unlock(ctx); !errors.Is(err, ErrLockLost) {
		t.Fatalf("Unlock after the lease = %v, want ErrLockLost", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.cohorts); n != 0 {
		t.Fatalf("%d cohorts still registered after the hold was evicted", n)
	}
	if n := len(c.subs.byChannel); n != 0 {
		t.Fatalf("%d channels still subscribed", n)
	}
}

// A waiter whose context ends while it subscribes gets its context's error,
// and the shared pub/sub connection is not redialled for it.
func TestShortWaitDeadlineKeepsThePubSubConnection(t *testing.T) {
	srv := redistest.Start(t)
	ctx := ctxTimeout(t, 10*time.Second)
	var dials atomic.Int32
	rdb := srv.Client(t)
	rdb.AddHook(dialCounter{&dials})
	c := New(rdb)
	t.Cleanup(func() { _ = c.Close() })
	holder := newClient(t, srv).Mutex("short-deadline")
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		short, cancel := context.WithTimeout(ctx, time.Duration(i%4+1)*time.Millisecond)
		err := c.Mutex("short-deadline").Lock(short)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("waiter %d: Lock = %v, want context.DeadlineExceeded", i, err)
		}
	}
	// One command connection and one pub/sub connection.
	if n := dials.Load(); n > 3 {
		t.Fatalf("%d dials for 20 short waits: the pub/sub connection was redialled", n)
	}
}

type dialCounter struct{ n *atomic.Int32 }

func (d dialCounter) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		d.n.Add(1)
		return next(ctx, network, addr)
	}
}
func (d dialCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (d dialCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
