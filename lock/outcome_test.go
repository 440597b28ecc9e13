package lock

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// Tests of requests whose outcome the client does not know (doc.go,
// "Unknown outcomes"): a reply lost after the script ran and the request
// sent again by go-redis's own retry, and a request that arrives late.
// Each reproduces one defect of issue 21 on a go-redis client built with
// its default options.

// replyDropper is a go-redis hook that lets a chosen script run in Redis
// and then drops the connection before the client reads the reply, as a
// network that fails at the worst moment does. go-redis, built with its
// defaults, sends the request again on a new connection.
type replyDropper struct {
	mu      sync.Mutex
	sha     []byte // of the script whose replies to drop
	left    int    // how many replies still to drop
	dropped atomic.Int32
}

// arm drops the next n replies of script.
func (d *replyDropper) arm(script *redis.Script, n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sha, d.left = []byte(script.Hash()), n
}

// take reports whether a request written as p is to lose its reply.
func (d *replyDropper) take(p []byte) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.left == 0 || !bytes.Contains(p, d.sha) {
		return false
	}
	d.left--
	return true
}

func (d *replyDropper) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &droppingConn{Conn: conn, d: d}, nil
	}
}

func (d *replyDropper) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (d *replyDropper) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// droppingConn is one connection of a replyDropper; go-redis uses a
// connection from one goroutine at a time.
type droppingConn struct {
	net.Conn
	d         *replyDropper
	dropReply bool
}

func (c *droppingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if err == nil && c.d.take(p) {
		c.dropReply = true
	}
	return n, err
}

func (c *droppingConn) Read(p []byte) (int, error) {
	if !c.dropReply {
		return c.Conn.Read(p)
	}
	// The reply's first bytes prove the script ran; the client never
	// sees them.
	_, _ = c.Conn.Read(p)
	c.dropReply = false
	_ = c.Conn.Close()
	c.d.dropped.Add(1)
	return 0, io.EOF
}

// loadScripts loads every script of the package, so that each run is an
// EVALSHA a hook can tell by its hash.
func loadScripts(t *testing.T, rdb redis.Cmdable) {
	t.Helper()
	err := fs.WalkDir(scriptFiles, "scripts", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		src, err := scriptFiles.ReadFile(path)
		if err != nil {
			return err
		}
		return rdb.ScriptLoad(context.Background(), string(src)).Err()
	})
	if err != nil {
		t.Fatal(err)
	}
}

// defaultClient is a lock Client on a go-redis client built with default
// options (MaxRetries 3), plus hook.
func defaultClient(t *testing.T, srv *redistest.Server, hook redis.Hook, opts ...Option) *Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	rdb.AddHook(hook) // first: a connection dialled before it would not be wrapped
	loadScripts(t, rdb)
	c := New(rdb, opts...)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// lockKind is one kind of lock with the scripts that acquire, release an
// inner level and renew it, and a rival another Client uses against it.
type lockKind struct {
	name                   string
	acquire, unlock, renew *redis.Script
	handle                 func(c *Client, name string) heldLocker
	rival                  func(c *Client, name string) Locker
}

var lockKinds = []lockKind{
	{"mutex", lockScript, unlockScript, renewScript,
		func(c *Client, name string) heldLocker { return c.Mutex(name) },
		func(c *Client, name string) Locker { return c.Mutex(name) }},
	{"fair", fairLockScript, fairUnlockScript, renewScript,
		func(c *Client, name string) heldLocker { return c.FairMutex(name) },
		func(c *Client, name string) Locker { return c.FairMutex(name) }},
	{"fenced", fencedLockScript, unlockScript, renewScript,
		func(c *Client, name string) heldLocker { return c.FencedMutex(name) },
		func(c *Client, name string) Locker { return c.FencedMutex(name) }},
	{"read", readLockScript, readUnlockScript, readRenewScript,
		func(c *Client, name string) heldLocker { return c.RWMutex(name).read },
		func(c *Client, name string) Locker { return c.RWMutex(name).WriteLocker() }},
	{"write", writeLockScript, writeUnlockScript, renewScript,
		func(c *Client, name string) heldLocker { return c.RWMutex(name).write },
		func(c *Client, name string) Locker { return c.RWMutex(name).WriteLocker() }},
}

func assertRivalBusy(t *testing.T, rival Locker, why string) {
	t.Helper()
	ok, err := rival.TryLock(ctxTimeout(t, 5*time.Second), 0, time.Second)
	if ok || err != nil {
		t.Fatalf("another Client's TryLock = %v, %v; want false: %s", ok, err, why)
	}
}

// assertRivalTakes checks that another Client's rival takes the lock.
func assertRivalTakes(t *testing.T, srv *redistest.Server, kind lockKind, name, after string) {
	t.Helper()
	ok, err := kind.rival(newClient(t, srv), name).TryLock(ctxTimeout(t, 5*time.Second), time.Second, time.Second)
	if !ok || err != nil {
		t.Fatalf("another Client's TryLock after %s = %v, %v; want true", after, ok, err)
	}
}

// droppingHandle is a handle of kind on a default go-redis client whose
// replies d drops when armed.
func droppingHandle(t *testing.T, srv *redistest.Server, kind lockKind, test string) (l heldLocker, name string, d *replyDropper) {
	d = &replyDropper{}
	name = test + "-" + kind.name
	return kind.handle(defaultClient(t, srv, d, WithMaxLocalPasses(0)), name), name, d
}

func assertDropped(t *testing.T, d *replyDropper, want int32) {
	t.Helper()
	if n := d.dropped.Load(); n != want {
		t.Fatalf("%d replies dropped, want %d: the test did not lose the reply it meant to", n, want)
	}
}

// Defect 1: go-redis re-sends an inner level's unlock whose reply was lost;
// the second run must not release the level the holder still has.
func TestRetriedUnlockReleasesOneLevel(t *testing.T) {
	srv := redistest.Start(t)
	for _, kind := range lockKinds {
		t.Run(kind.name, func(t *testing.T) {
			ctx := ctxTimeout(t, 10*time.Second)
			l, name, d := droppingHandle(t, srv, kind, "retried-unlock")
			held, err := l.LockContext(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if ok, err := l.TryLock(ctx, 0, 0); !ok || err != nil {
				t.Fatalf("reentrant TryLock = %v, %v", ok, err)
			}
			d.arm(kind.unlock, 1)
			if err := l.Unlock(ctx); err != nil {
				t.Fatalf("inner Unlock, its reply lost and the request re-sent = %v", err)
			}
			assertDropped(t, d, 1)
			assertLive(t, held)
			assertRivalBusy(t, kind.rival(newClient(t, srv), name), "the holder kept one level")
			if err := l.Unlock(ctx); err != nil {
				t.Fatalf("last Unlock = %v", err)
			}
			assertRivalTakes(t, srv, kind, name, "the last Unlock")
		})
	}
}

// Defect 1: a first acquisition run twice by go-redis's retry is one level;
// the holder's one Unlock releases the lock.
func TestRetriedAcquisitionTakesOneLevel(t *testing.T) {
	srv := redistest.Start(t)
	for _, kind := range lockKinds {
		t.Run(kind.name, func(t *testing.T) {
			ctx := ctxTimeout(t, 10*time.Second)
			l, name, d := droppingHandle(t, srv, kind, "retried-acquisition")
			d.arm(kind.acquire, 1)
			if ok, err := l.TryLock(ctx, 0, 0); !ok || err != nil {
				t.Fatalf("TryLock, its reply lost and the request re-sent = %v, %v; want true", ok, err)
			}
			assertDropped(t, d, 1)
			if err := l.Unlock(ctx); err != nil {
				t.Fatalf("Unlock = %v", err)
			}
			assertRivalTakes(t, srv, kind, name, "the only Unlock (did the retry leave a level behind?)")
		})
	}
}

// Defect 1: a last Unlock whose reply was lost and whose request go-redis
// re-sent answers what the first run did: released.
func TestRetriedLastUnlockReportsTheRelease(t *testing.T) {
	srv := redistest.Start(t)
	for _, kind := range lockKinds {
		t.Run(kind.name, func(t *testing.T) {
			ctx := ctxTimeout(t, 10*time.Second)
			l, _, d := droppingHandle(t, srv, kind, "retried-last-unlock")
			if err := l.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			last := kind.unlock
			if kind.name == "mutex" {
				last = releaseScript
			}
			d.arm(last, 1)
			if err := l.Unlock(ctx); err != nil {
				t.Fatalf("last Unlock, its reply lost and the request re-sent = %v; want nil", err)
			}
			assertDropped(t, d, 1)
		})
	}
}

// Defects 2 and 3: releasing an inner level with a long lease keeps the
// lock as long as the hold lasts: Redis and the held context agree.
func TestInnerUnlockNeverCutsTheLease(t *testing.T) {
	srv := redistest.Start(t)
	for _, kind := range lockKinds {
		t.Run(kind.name, func(t *testing.T) {
			ctx := ctxTimeout(t, 10*time.Second)
			c := newClient(t, srv)
			name := "inner-unlock-lease-" + kind.name
			l := kind.handle(c, name)
			held, ok, err := l.TryLockContext(ctx, 0, 500*time.Millisecond)
			if !ok || err != nil {
				t.Fatalf("TryLock = %v, %v", ok, err)
			}
			if ok, err := l.TryLock(ctx, 0, 5*time.Second); !ok || err != nil {
				t.Fatalf("reentrant TryLock = %v, %v", ok, err)
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if kind.name == "read" {
				// Another reader's last release sets the lock's TTL to the
				// longest level left: the inner release's time must be in
				// the levels, not only in the lock's TTL.
				other := kind.handle(newClient(t, srv), name)
				if ok, err := other.TryLock(ctx, 0, time.Second); !ok || err != nil {
					t.Fatalf("another reader's TryLock = %v, %v", ok, err)
				}
				if err := other.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(800 * time.Millisecond) // past the first level's lease
			assertLive(t, held)
			assertRivalBusy(t, kind.rival(newClient(t, srv), name), "the hold lasts 5 s")
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Defect 4: a watchdog renewal that reaches Redis after its hold was
// released must leave a later hold of the same owner alone. The renewal is
// held back past the Unlock and sent with a context the Unlock cannot
// cancel, as a request already on the wire is.
func TestLateRenewalLeavesALaterHoldAlone(t *testing.T) {
	srv := redistest.Start(t)
	for _, kind := range lockKinds {
		t.Run(kind.name, func(t *testing.T) {
			ctx := ctxTimeout(t, 10*time.Second)
			inFlight, proceed, ran := make(chan struct{}), make(chan struct{}), make(chan error, 1)
			var delayed atomic.Bool
			lateRenewal := scriptHook{sha: kind.renew.Hash(), around: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
				if !delayed.CompareAndSwap(false, true) {
					return next(ctx, cmd)
				}
				close(inFlight)
				<-proceed
				err := next(context.WithoutCancel(ctx), cmd)
				ran <- err
				return err
			}}
			c := defaultClient(t, srv, lateRenewal, WithWatchdogTimeout(3*time.Second))
			name := "late-renewal-" + kind.name
			l := kind.handle(c, name)
			if err := l.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			<-inFlight // the first renewal is on its way
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			const lease = 300 * time.Millisecond
			held, ok, err := l.TryLockContext(ctx, 0, lease)
			close(proceed)
			if !ok || err != nil {
				t.Fatalf("TryLock = %v, %v", ok, err)
			}
			if err := <-ran; err != nil {
				t.Fatalf("the late renewal failed: %v", err)
			}
			if ttl := srv.Client(t).PTTL(ctx, keyOf(name)).Val(); ttl > lease {
				t.Fatalf("the later hold's %v lease set to %v by the earlier hold's renewal", lease, ttl)
			}
			<-held.Done() // the lease ran out
			assertRivalTakes(t, srv, kind, name, "the later hold's lease")
		})
	}
}

// Defect 5: a closed Client is not granted the lock. Close returns once
// its waiting leader left the queue, so the program may close its go-redis
// client next; the leave is slowed down so that, were Close not to wait,
// the go-redis client would be closed before the leave is sent.
func TestCloseLeavesTheQueueBeforeItReturns(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := ctxTimeout(t, 10*time.Second)
	const name = "close-leaves"
	holder := newClient(t, srv).Mutex(name)
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}

	slowLeave := scriptHook{sha: releaseScript.Hash(), around: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		time.Sleep(200 * time.Millisecond)
		return next(ctx, cmd)
	}}
	closingRedis := redis.NewClient(&redis.Options{Addr: srv.Addr})
	loadScripts(t, closingRedis)
	closingRedis.AddHook(slowLeave)
	closing := New(closingRedis)
	closingDone := lockAsync(ctx, closing.Mutex(name))
	queued(t, rdb, holder, closing.ID())

	live := newClient(t, srv)
	liveDone := lockAsync(ctx, live.Mutex(name))
	queued(t, rdb, holder, closing.ID(), live.ID())

	if err := closing.Close(); err != nil {
		t.Fatal(err)
	}
	if err := closingRedis.Close(); err != nil { // the usual defer order
		t.Fatal(err)
	}
	if err := <-closingDone; !errors.Is(err, ErrClosed) {
		t.Fatalf("closed Client's Lock = %v, want ErrClosed", err)
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-liveDone:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Second):
		t.Fatalf("the live waiter did not get the lock: granted to the closed Client? %v", rdb.HGetAll(ctx, holder.Key()).Val())
	}
}

// Defect 6: a reentrant level finds its own hold in Redis or fails with
// ErrLockLost and ends the held context; it never re-creates a lock that
// was wiped and taken by another owner meanwhile.
func TestReentrantLevelFindsItsHoldOrFails(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	for _, kind := range lockKinds {
		t.Run(kind.name, func(t *testing.T) {
			ctx := ctxTimeout(t, 10*time.Second)
			c := newClient(t, srv)
			name := "wiped-reentry-" + kind.name
			l := kind.handle(c, name)
			held, err := l.LockContext(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := rdb.FlushAll(ctx).Err(); err != nil { // a restart without persistence, a failover
				t.Fatal(err)
			}
			rival := kind.rival(newClient(t, srv), name)
			if ok, err := rival.TryLock(ctx, 0, 0); !ok || err != nil {
				t.Fatalf("another Client's TryLock after the wipe = %v, %v", ok, err)
			}
			if err := rival.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if ok, err := l.TryLock(ctx, 0, 0); ok || !errors.Is(err, ErrLockLost) {
				t.Fatalf("reentrant TryLock after the wipe = %v, %v; want false, ErrLockLost", ok, err)
			}
			if cause := context.Cause(held); !errors.Is(cause, ErrLockLost) {
				t.Fatalf("held context's cause = %v, want ErrLockLost", cause)
			}
			if n := rdb.Exists(ctx, keyOf(name)).Val(); n != 0 {
				t.Fatalf("the reentrant attempt re-created the lock: %v", rdb.HGetAll(ctx, keyOf(name)).Val())
			}
		})
	}
}

// A read release run twice sets the levels the Client counts, not one
// fewer: a read lock's hold keeps its levels in Redis, and its last
// release and the other readers' count on them (read_unlock.lua keeps the
// lock alive as long as the longest of every reader's levels).
func TestRetriedInnerReadUnlockKeepsTheCount(t *testing.T) {
	srv := redistest.Start(t)
	ctx := ctxTimeout(t, 10*time.Second)
	kind := lockKinds[3]
	l, name, d := droppingHandle(t, srv, kind, "retried-read-unlock")
	if _, err := l.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if ok, err := l.TryLock(ctx, 0, 0); !ok || err != nil {
			t.Fatalf("reentrant TryLock = %v, %v", ok, err)
		}
	}
	d.arm(kind.unlock, 1)
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("inner Unlock, its reply lost and the request re-sent = %v", err)
	}
	assertDropped(t, d, 1)
	side := l.(*ownedLock)
	side.mu.Lock()
	token := side.hold.token
	side.mu.Unlock()
	key, _ := lockKeys(name)
	if n, err := srv.Client(t).HGet(ctx, key, token).Int(); n != 2 || err != nil {
		t.Fatalf("the hold's levels in Redis after a re-sent inner release of 3 = %d, %v; want 2", n, err)
	}
}

// A wipe takes the latch too (doc.go, "late"): an acquisition whose caller
// gave up — and left, latching its token — before a FLUSHALL, and which
// lands after it, takes the free lock, owned by nobody, until its lease
// ends. The lock checker excuses a wait behind such a request, and only
// behind one (TestCheckerOracle); this is the case it excuses.
func TestLateAcquisitionAfterAWipeHoldsTheLockForALease(t *testing.T) {
	srv := redistest.Start(t)
	ctx := ctxTimeout(t, 10*time.Second)
	proceed, landed := make(chan struct{}), make(chan error, 1)
	var delayed atomic.Bool
	lateLock := scriptHook{sha: lockScript.Hash(), around: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if !delayed.CompareAndSwap(false, true) {
			return next(ctx, cmd)
		}
		onTheWire := redis.NewCmd(context.Background(), cmd.Args()...)
		go func() { // owned by the test, which waits for landed
			<-proceed
			landed <- next(context.Background(), onTheWire)
		}()
		<-ctx.Done() // the caller gives up while the request is on its way
		return ctx.Err()
	}}
	const watchdog = 3 * time.Second
	c := defaultClient(t, srv, lateLock, WithWatchdogTimeout(watchdog))
	name := "late-after-wipe"
	gaveUp, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := c.Mutex(name).LockContext(gaveUp); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("LockContext = %v; want the deadline", err)
	}
	admin := srv.Client(t)
	if err := admin.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	close(proceed)
	if err := <-landed; err != nil {
		t.Fatalf("the late acquisition: %v", err)
	}
	if ttl := admin.PTTL(ctx, keyOf(name)).Val(); ttl < watchdog-time.Second {
		t.Fatalf("the lock's TTL after the late acquisition = %v; want about the %v lease (the case the checker excuses is gone: narrow its excuse)", ttl, watchdog)
	}
	if ok, err := newClient(t, srv).Mutex(name).TryLock(ctx, 0, time.Second); ok || err != nil {
		t.Fatalf("another Client's TryLock = %v, %v; want busy", ok, err)
	}
}
