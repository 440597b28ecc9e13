package inventory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/lockstep/lockstep/internal/zklock"
	"github.com/lockstep/lockstep/lock"
)

// zkSessionTimeout is the zookeeper stage's session timeout, its lease: the
// lock_ttl fault overrides it (a session per timeout).
const zkSessionTimeout = 30 * time.Second

// zkPrefix is where the zookeeper stage's locks live.
const zkPrefix = "/lockstep/locks"

// zkGuard is Curator's InterProcessMutex recipe (internal/zklock): an
// ephemeral sequential node per waiter, the lowest holds, each waiter
// watches only its predecessor. A holder whose session expires loses its
// node, so the lock: its held context ends then.
type zkGuard struct {
	sessions *zkSessions
	wait     time.Duration
}

func (zkGuard) fencing() {}

// errWaitedLong is the cause of a wait that outlasted the stage's bound.
var errWaitedLong = errors.New("inventory: zookeeper: lock wait bound reached")

func (g zkGuard) acquire(ctx context.Context, key string, f Faults) (context.Context, func(context.Context) error, error) {
	s, err := g.sessions.get(f.lockTTL(zkSessionTimeout))
	if err != nil {
		return nil, nil, err
	}
	waitCtx, cancel := context.WithTimeoutCause(ctx, g.wait, errWaitedLong)
	h, err := s.Acquire(waitCtx, zkPrefix+"/"+key)
	cancel()
	switch {
	case errors.Is(err, zklock.ErrGaveUp) && ctx.Err() != nil:
		return nil, nil, fmt.Errorf("%w: %w", ErrLockBusy, context.Cause(ctx))
	case errors.Is(err, zklock.ErrGaveUp):
		return nil, nil, fmt.Errorf("%w: %s not free within %v", ErrLockBusy, key, g.wait)
	case err != nil:
		return nil, nil, zkUnavailable("lock", err)
	}
	held := h.Context()
	if f.Fence {
		czxid, err := h.Czxid(ctx)
		if err != nil {
			h.Abandon()
			return nil, nil, zkUnavailable("read the fencing token", err)
		}
		held = withFencingToken(held, czxid)
	}
	release := func(ctx context.Context) error {
		err := h.Release(ctx)
		if err != nil && !errors.Is(err, lock.ErrNotHeld) {
			return zkUnavailable("release", err)
		}
		return err
	}
	return held, release, nil
}

// drop deletes every waiter's and the holder's node of key's lock, as a
// reset must.
func (g zkGuard) drop(ctx context.Context, key string) error {
	s, err := g.sessions.get(zkSessionTimeout)
	if err != nil {
		return err
	}
	if err := s.Drop(ctx, zkPrefix+"/"+key); err != nil {
		return zkUnavailable("drop", err)
	}
	return nil
}

func zkUnavailable(op string, err error) error {
	return fmt.Errorf("inventory: %s: %w: %w", op, ErrZooKeeperUnavailable, err)
}

// zkSessions keeps one ZooKeeper session per session timeout.
type zkSessions struct {
	servers []string
	log     *slog.Logger

	mu     sync.Mutex
	closed bool
	byTTL  map[time.Duration]*zklock.Session
}

func newZKSessions(servers []string, log *slog.Logger) *zkSessions {
	return &zkSessions{servers: servers, log: log, byTTL: make(map[time.Duration]*zklock.Session)}
}

func (p *zkSessions) get(timeout time.Duration) (*zklock.Session, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, zkUnavailable("session", lock.ErrClosed)
	}
	if s := p.byTTL[timeout]; s != nil {
		return s, nil
	}
	s, err := zklock.Connect(p.servers, timeout, p.log)
	if err != nil {
		return nil, zkUnavailable("connect", err)
	}
	p.byTTL[timeout] = s
	return s, nil
}

func (p *zkSessions) close() {
	p.mu.Lock()
	p.closed = true
	sessions := p.byTTL
	p.byTTL = nil
	p.mu.Unlock()
	for _, s := range sessions {
		s.Close()
	}
}
