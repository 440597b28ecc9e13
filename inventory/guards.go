package inventory

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lockstep/lockstep/lock"
	"github.com/redis/go-redis/v9"
)

// The article defaults the fault knob lock_ttl overrides.
const (
	setnxExpireTTL  = 10 * time.Second // 《关于分布式锁(Redisson)的原理分析》 case 1.4: setIfAbsent(..., 10, SECONDS)
	uuidLuaTTL      = 30 * time.Second // 《关于分布式锁(Redisson)的原理分析》 case 1.5
	watchdogTimeout = 30 * time.Second // Redisson's lockWatchdogTimeout
)

// guard is what serialises a stage's critical section.
type guard interface {
	// acquire takes the lock of key. held is cancelled with cause
	// lock.ErrLockLost when the lock is lost before release (ctx itself for
	// locks that cannot tell). Errors wrap ErrLockBusy or ErrUnavailable.
	acquire(ctx context.Context, key string, f Faults) (held context.Context, release func(context.Context) error, err error)
}

// fencingGuard is a guard whose lock hands every new holder a larger
// token; with the fence fault it puts the hold's token in the held context
// (withFencingToken), and the sale's stock read and write check it.
type fencingGuard interface {
	guard
	fencing()
}

type fencingTokenKey struct{}

// withFencingToken is held carrying the hold's fencing token.
func withFencingToken(held context.Context, token int64) context.Context {
	return context.WithValue(held, fencingTokenKey{}, token)
}

// fencingTokenOf is the token withFencingToken put in held, if any.
func fencingTokenOf(held context.Context) (int64, bool) {
	token, ok := held.Value(fencingTokenKey{}).(int64)
	return token, ok
}

// noGuard is the naive stage's absence of a lock.
type noGuard struct{}

func (noGuard) acquire(ctx context.Context, _ string, _ Faults) (context.Context, func(context.Context) error, error) {
	return ctx, func(context.Context) error { return nil }, nil
}

// localGuard is Java's synchronized(this): one mutex per process, which
// cannot see the other replicas. A channel so the wait can be bounded.
type localGuard struct {
	sem  chan struct{}
	wait time.Duration
}

func newLocalGuard(wait time.Duration) *localGuard {
	return &localGuard{sem: make(chan struct{}, 1), wait: wait}
}

func (g *localGuard) acquire(ctx context.Context, _ string, _ Faults) (context.Context, func(context.Context) error, error) {
	timer := time.NewTimer(g.wait)
	defer timer.Stop()
	select {
	case g.sem <- struct{}{}:
		return ctx, func(context.Context) error { <-g.sem; return nil }, nil
	case <-timer.C:
		return nil, nil, fmt.Errorf("%w: process mutex not free within %v", ErrLockBusy, g.wait)
	case <-ctx.Done():
		return nil, nil, fmt.Errorf("%w: %w", ErrLockBusy, context.Cause(ctx))
	}
}

// simpleLock is one of the articles' fail-fast locks.
type simpleLock interface {
	TryLock(ctx context.Context) error
	Unlock(ctx context.Context) error
}

// failFastGuard takes a new simple lock per sale (one value = one owner)
// and answers busy at once when another owner holds it.
type failFastGuard struct {
	newLock    func(key string, ttl time.Duration) simpleLock
	defaultTTL time.Duration
}

func (g failFastGuard) acquire(ctx context.Context, key string, f Faults) (context.Context, func(context.Context) error, error) {
	l := g.newLock(key, f.lockTTL(g.defaultTTL))
	if err := l.TryLock(ctx); err != nil {
		return nil, nil, lockError(ctx, err)
	}
	return ctx, l.Unlock, nil
}

func setnxGuard(rdb redis.UniversalClient) failFastGuard {
	return failFastGuard{newLock: func(key string, _ time.Duration) simpleLock { return lock.NewSetNXLock(rdb, key) }}
}

func expiringGuard(rdb redis.UniversalClient) failFastGuard {
	return failFastGuard{
		newLock:    func(key string, ttl time.Duration) simpleLock { return lock.NewExpiringLock(rdb, key, ttl) },
		defaultTTL: setnxExpireTTL,
	}
}

func tokenGuard(rdb redis.UniversalClient) failFastGuard {
	return failFastGuard{
		newLock:    func(key string, ttl time.Duration) simpleLock { return lock.NewTokenLock(rdb, key, ttl) },
		defaultTTL: uuidLuaTTL,
	}
}

// watchdogGuard takes the Redisson-style lock, waiting at most wait, or
// until Redis is seen down.
type watchdogGuard struct {
	clients *lockClients
	health  *health
	wait    time.Duration
}

func (g watchdogGuard) acquire(ctx context.Context, key string, f Faults) (context.Context, func(context.Context) error, error) {
	c, err := g.clients.get(clientOptionsOf(f))
	if err != nil {
		return nil, nil, err
	}
	m := c.Mutex(key)
	bounded, unbound := g.health.bound(ctx)
	held, ok, err := m.TryLockContext(bounded, g.wait, 0)
	unbound() // held does not derive from bounded
	if err != nil {
		return nil, nil, lockError(bounded, err)
	}
	if !ok {
		return nil, nil, fmt.Errorf("%w: %s not free within %v", ErrLockBusy, key, g.wait)
	}
	return held, m.Unlock, nil
}

// redlockGuard takes the watchdog lock on a majority of independent Redis
// masters.
type redlockGuard struct {
	clients []*lockClients
	health  *health
	wait    time.Duration
}

func (g redlockGuard) acquire(ctx context.Context, key string, f Faults) (context.Context, func(context.Context) error, error) {
	lockers := make([]lock.Locker, len(g.clients))
	for i, pool := range g.clients {
		c, err := pool.get(clientOptionsOf(f))
		if err != nil {
			return nil, nil, err
		}
		lockers[i] = c.Mutex(key)
	}
	rl := lock.NewRedLock(lockers...)
	bounded, unbound := g.health.bound(ctx)
	ok, err := rl.TryLock(bounded, g.wait, 0)
	unbound()
	if err != nil {
		return nil, nil, lockError(bounded, err)
	}
	if !ok {
		return nil, nil, fmt.Errorf("%w: no majority for %s within %v", ErrLockBusy, key, g.wait)
	}
	return ctx, rl.Unlock, nil
}

// lockError sorts a lock acquisition error into busy or unavailable; ctx is
// the context the acquisition waited on.
func lockError(ctx context.Context, err error) error {
	switch {
	case errors.Is(context.Cause(ctx), errRedisDown):
		return unavailable("wait for lock", context.Cause(ctx))
	case errors.Is(err, lock.ErrLockBusy), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return fmt.Errorf("%w: %w", ErrLockBusy, err)
	default:
		return unavailable("acquire lock", err)
	}
}

// clientOptions are the lock.Client options the fault knobs set: the
// watchdog timeout (lock_ttl) and the replicas each acquisition waits for.
type clientOptions struct {
	watchdogTimeout time.Duration
	waitReplicas    int
	waitTimeout     time.Duration
}

func clientOptionsOf(f Faults) clientOptions {
	return clientOptions{watchdogTimeout: f.lockTTL(watchdogTimeout), waitReplicas: f.WaitReplicas, waitTimeout: f.WaitTimeout}
}

// lockClients keeps one lock.Client per set of options for one stage on
// one Redis, since they are Client options and the faults can change them
// at run time.
type lockClients struct {
	rdb  redis.UniversalClient
	opts []lock.Option

	mu        sync.Mutex
	closed    bool
	byOptions map[clientOptions]*lock.Client
}

func newLockClients(rdb redis.UniversalClient, opts ...lock.Option) *lockClients {
	return &lockClients{rdb: rdb, opts: opts, byOptions: make(map[clientOptions]*lock.Client)}
}

func (p *lockClients) get(o clientOptions) (*lock.Client, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, unavailable("lock client", lock.ErrClosed)
	}
	c := p.byOptions[o]
	if c == nil {
		opts := append([]lock.Option{lock.WithWatchdogTimeout(o.watchdogTimeout)}, p.opts...)
		if o.waitReplicas > 0 {
			opts = append(opts, lock.WithWaitReplicas(o.waitReplicas, o.waitTimeout))
		}
		c = lock.New(p.rdb, opts...)
		p.byOptions[o] = c
	}
	return c, nil
}

func (p *lockClients) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	var errs []error
	for _, c := range p.byOptions {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}
