package inventory

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

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
	switch {
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		g.sessions.put(s, ttl)
		return nil, nil, fmt.Errorf("%w: %s not free within %v", ErrLockBusy, key, g.wait)
	case ctx.Err() != nil:
		g.sessions.put(s, ttl)
		return nil, nil, fmt.Errorf("%w: %w", ErrLockBusy, context.Cause(ctx))
	case err != nil:
		g.sessions.discard(s)
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
			_ = m.Unlock(context.WithoutCancel(ctx))
			g.sessions.discard(s)
			return nil, nil, etcdUnavailable("read the fencing token", errors.Join(err, lock.ErrLockLost))
		}
		answer = withFencingToken(held, resp.Kvs[0].CreateRevision)
	}
	release := func(ctx context.Context) error {
		lost(lock.ErrReleased)
		<-watched
		err := m.Unlock(ctx)
		if err != nil {
			g.sessions.discard(s)
			return etcdUnavailable("unlock", err)
		}
		g.sessions.put(s, ttl)
		return nil
	}
	return answer, release, nil
}

// drop deletes every waiter's and the holder's key of key's lock, as a
// reset must: the holder's session lives on, but its key is gone.
func (g etcdGuard) drop(ctx context.Context, key string) error {
	if _, err := g.sessions.client.Delete(ctx, etcdPrefix+key+"/", clientv3.WithPrefix()); err != nil {
		return etcdUnavailable("drop lock keys", err)
	}
	return nil
}

func etcdUnavailable(op string, err error) error {
	return fmt.Errorf("inventory: etcd: %s: %w: %w", op, ErrUnavailable, err)
}

// etcdSessions pools sessions by lease TTL. A concurrency.Mutex's key is
// its prefix and its session's lease, so two holds of one lock on one
// session would be one key: each hold takes a session of its own, and
// returns it for the next sale once released. A session whose lease ended
// is dropped.
type etcdSessions struct {
	client *clientv3.Client

	mu     sync.Mutex
	closed bool
	idle   map[time.Duration][]*concurrency.Session
	all    map[*concurrency.Session]struct{}
}

func newEtcdSessions(client *clientv3.Client) *etcdSessions {
	return &etcdSessions{client: client, idle: make(map[time.Duration][]*concurrency.Session), all: make(map[*concurrency.Session]struct{})}
}

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
	seconds := max(1, int(ttl/time.Second)) // etcd leases count whole seconds
	s, err := concurrency.NewSession(p.client, concurrency.WithTTL(seconds), concurrency.WithContext(context.WithoutCancel(ctx)))
	if err != nil {
		return nil, etcdUnavailable("grant session lease", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = s.Close()
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

// discard drops a session whose state is unknown after an error; its lease
// is revoked in the background of Close, or expires.
func (p *etcdSessions) discard(s *concurrency.Session) {
	p.mu.Lock()
	delete(p.all, s)
	p.mu.Unlock()
	s.Orphan()
}

// close revokes every session's lease (their keys go with them) and stops
// their keep-alives.
func (p *etcdSessions) close() error {
	p.mu.Lock()
	p.closed = true
	sessions := p.all
	p.all, p.idle = nil, nil
	p.mu.Unlock()
	var errs []error
	for s := range sessions {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}
