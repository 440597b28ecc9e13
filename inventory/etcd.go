package inventory

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/lockstep/lockstep/lock"
)

// etcdLeaseTTL is the session lease of the etcd stage, the watchdog
// timeout's analogue the lock_ttl fault overrides: the session's keep-alive
// renews it every third of it while the process lives.
const etcdLeaseTTL = 30 * time.Second

// etcdPrefix is where the etcd stage's lock keys live.
const etcdPrefix = "/lockstep/locks/"

// etcdGuard is the etcd client's concurrency.Mutex: each waiter puts a key
// under the lock's prefix on its session's lease, the lowest create
// revision holds, and each waiter watches only the key before its own. A
// holder that dies stops renewing its lease, and its key goes with it.
//
// What a live process does not leave behind is a key whose request lost
// its answer. Each request in its three failures:
//   - Lock's put, reply lost (or the wait bound reached while it was on its
//     way), or Lock's own cleanup of a waiter that gave up failed: the key
//     may exist, kept alive by the session. The session is not pooled
//     again: its lease is revoked in the background until etcd has it no
//     more (revoke), which deletes the key, and refuses a put that arrives
//     late (it names a lease that no longer exists).
//   - Lock's put run twice: the put is conditional on the key's absence, so
//     a second one changes nothing; the client retries only what it could
//     not send.
//   - Unlock's delete failed or lost: revoked the same way.
//
// Every request is bounded: by the sale's deadline and the lock wait, by
// the release bound for an unlock, and Lock's internal cleanup, which
// runs on the client's own context, by the release bound too (boundedKV).
type etcdGuard struct {
	sessions *etcdSessions
	wait     time.Duration
}

func (etcdGuard) fencing() {}

func (g etcdGuard) acquire(ctx context.Context, key string, f Faults) (context.Context, func(context.Context) error, error) {
	ttl := f.lockTTL(etcdLeaseTTL)
	s, err := g.sessions.get(ctx, ttl)
	if err != nil {
		return nil, nil, err
	}
	m := concurrency.NewMutex(s, etcdPrefix+key)
	waitCtx, cancel := context.WithTimeout(ctx, g.wait)
	err = m.Lock(waitCtx)
	cancel()
	if err != nil {
		// Lock clears its key's name once it deleted it: otherwise the key
		// may exist, and only the lease's revocation settles it.
		if m.Key() == etcdNoKey {
			g.sessions.put(s, ttl)
		} else {
			g.sessions.revoke(s)
		}
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		return nil, nil, fmt.Errorf("%w: %s not free within %v", ErrLockBusy, key, g.wait)
	case ctx.Err() != nil:
		return nil, nil, fmt.Errorf("%w: %w", ErrLockBusy, context.Cause(ctx))
	case err != nil:
		return nil, nil, etcdUnavailable("lock", err)
	}
	// The hold lasts as long as the session's lease: when the keep-alive
	// fails and the lease expires, the key is gone and so is the lock.
	held, lost := context.WithCancelCause(context.WithoutCancel(ctx))
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-s.Done():
			lost(fmt.Errorf("%w: etcd session lease %x expired", lock.ErrLockLost, s.Lease()))
		case <-held.Done():
		}
	}()
	answer := held // the watcher above reads held
	if f.Fence {
		// The holder's key's create revision: etcd's revisions only grow,
		// so every later holder's is larger.
		resp, err := s.Client().Get(ctx, m.Key())
		if err != nil || len(resp.Kvs) == 0 {
			lost(lock.ErrReleased)
			<-watched
			g.sessions.revoke(s)
			return nil, nil, etcdUnavailable("read the fencing token", errors.Join(err, lock.ErrLockLost))
		}
		answer = withFencingToken(held, resp.Kvs[0].CreateRevision)
	}
	release := func(ctx context.Context) error {
		lost(lock.ErrReleased)
		<-watched
		err := m.Unlock(ctx)
		if err != nil {
			g.sessions.revoke(s)
			return etcdUnavailable("unlock", err)
		}
		g.sessions.put(s, ttl)
		return nil
	}
	return answer, release, nil
}

// etcdNoKey is the key name concurrency.Mutex sets once it deleted its key.
const etcdNoKey = "\x00"

// drop deletes every waiter's and the holder's key of key's lock, as a
// reset must: the holder's session lives on, but its key is gone.
func (g etcdGuard) drop(ctx context.Context, key string) error {
	if _, err := g.sessions.client.Delete(ctx, etcdPrefix+key+"/", clientv3.WithPrefix()); err != nil {
		return etcdUnavailable("drop lock keys", err)
	}
	return nil
}

func etcdUnavailable(op string, err error) error {
	return fmt.Errorf("inventory: %s: %w: %w", op, ErrEtcdUnavailable, err)
}

// etcdSessions pools sessions by lease TTL. A concurrency.Mutex's key is
// its prefix and its session's lease, so two holds of one lock on one
// session would be one key: each hold takes a session of its own, and
// returns it for the next sale once released. A session whose lease ended
// is dropped; one whose key's fate is unknown is revoked.
//
// The sessions run on a client of their own (scoped): its context, which
// Lock's cleanup and the keep-alives run on, ends when the pool closes, and
// its KV bounds every request without a deadline by the release bound.
type etcdSessions struct {
	client *clientv3.Client
	scoped *clientv3.Client
	halt   context.CancelFunc // ends scoped's context
	leases *resolutions       // the leases to revoke in the background

	mu     sync.Mutex
	closed bool
	idle   map[time.Duration][]*concurrency.Session
	all    map[*concurrency.Session]struct{}
}

func newEtcdSessions(client *clientv3.Client, r *resolver) *etcdSessions {
	stop, halt := context.WithCancel(context.Background())
	scoped := clientv3.NewCtxClient(stop)
	scoped.KV, scoped.Lease, scoped.Watcher = boundedKV{client.KV}, client.Lease, client.Watcher
	p := &etcdSessions{
		client: client, scoped: scoped, halt: halt,
		idle: make(map[time.Duration][]*concurrency.Session), all: make(map[*concurrency.Session]struct{}),
	}
	p.leases = r.queue("etcd leases", p.revokeLeases)
	return p
}

// get is an idle session of the given lease TTL, or a new one whose lease
// is granted within ctx.
func (p *etcdSessions) get(ctx context.Context, ttl time.Duration) (*concurrency.Session, error) {
	p.mu.Lock()
	for idle := p.idle[ttl]; len(idle) > 0; idle = p.idle[ttl] {
		s := idle[len(idle)-1]
		p.idle[ttl] = idle[:len(idle)-1]
		select {
		case <-s.Done():
			delete(p.all, s)
			continue
		default:
		}
		p.mu.Unlock()
		return s, nil
	}
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return nil, etcdUnavailable("session", lock.ErrClosed)
	}
	// A grant whose reply is lost leaves a lease without keys, which
	// expires: nothing to resolve.
	seconds := max(1, int64(ttl/time.Second)) // etcd leases count whole seconds
	lease, err := p.client.Grant(ctx, seconds)
	if err != nil {
		return nil, etcdUnavailable("grant session lease", err)
	}
	s, err := concurrency.NewSession(p.scoped, concurrency.WithLease(lease.ID), concurrency.WithTTL(int(seconds)), concurrency.WithContext(p.scoped.Ctx()))
	if err != nil {
		return nil, etcdUnavailable("keep the session lease alive", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		s.Orphan()
		p.revokeLease(s.Lease())
		return nil, etcdUnavailable("session", lock.ErrClosed)
	}
	p.all[s] = struct{}{}
	return s, nil
}

func (p *etcdSessions) put(s *concurrency.Session, ttl time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.idle[ttl] = append(p.idle[ttl], s)
}

// revoke drops a session whose key's fate is unknown and revokes its
// lease, deleting every key on it, in the background until etcd has it no
// more.
func (p *etcdSessions) revoke(s *concurrency.Session) {
	p.mu.Lock()
	delete(p.all, s)
	p.mu.Unlock()
	s.Orphan()
	p.revokeLease(s.Lease())
}

func (p *etcdSessions) revokeLease(id clientv3.LeaseID) {
	p.leases.add(strconv.FormatInt(int64(id), 10), time.Time{})
}

// revokeLeases revokes each lease of ids, the resolver's sweep: a lease
// already gone (revoked twice, or expired) is revoked.
func (p *etcdSessions) revokeLeases(ctx context.Context, ids []string) error {
	for _, id := range ids {
		n, err := strconv.ParseInt(id, 10, 64)
		if err != nil {
			return fmt.Errorf("inventory: lease id %q: %w", id, err)
		}
		if _, err := p.client.Revoke(ctx, clientv3.LeaseID(n)); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return err
		}
	}
	return nil
}

// close revokes every session's lease (their keys go with them), all at
// once within the release bound, and stops their keep-alives.
func (p *etcdSessions) close() error {
	p.mu.Lock()
	p.closed = true
	sessions := p.all
	p.all, p.idle = nil, nil
	p.mu.Unlock()
	defer p.halt()
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	errs := make(chan error, len(sessions))
	var revokes sync.WaitGroup
	for s := range sessions {
		s.Orphan()
		revokes.Go(func() {
			if _, err := p.client.Revoke(ctx, s.Lease()); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
				errs <- err
			}
		})
	}
	revokes.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

// boundedKV bounds by the release bound each request made without a
// deadline: concurrency.Mutex's Lock deletes the key of a waiter that gave
// up on the client's context, which has none.
type boundedKV struct{ clientv3.KV }

func (kv boundedKV) Delete(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.DeleteResponse, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, releaseTimeout)
		defer cancel()
	}
	return kv.KV.Delete(ctx, key, opts...)
}
