package inventory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockstep/lockstep/lock"
)

// zkSessionTimeout is the zookeeper stage's session timeout, its lease: the
// lock_ttl fault overrides it (a session per timeout).
const zkSessionTimeout = 30 * time.Second

// zkPrefix is where the zookeeper stage's locks live.
const zkPrefix = "/lockstep/locks"

// zkGuard is Curator's InterProcessMutex recipe: each waiter creates an
// ephemeral sequential node under the lock's node, the lowest sequence
// holds, and each waiter watches only the node just before its own (no
// herd). A holder whose session expires loses its node, so the lock: its
// held context ends then (go-zookeeper's own Lock keeps believing it holds).
type zkGuard struct {
	sessions *zkSessions
	wait     time.Duration
}

func (zkGuard) fencing() {}

func (g zkGuard) acquire(ctx context.Context, key string, f Faults) (context.Context, func(context.Context) error, error) {
	s, err := g.sessions.get(f.lockTTL(zkSessionTimeout))
	if err != nil {
		return nil, nil, err
	}
	alive := s.alive() // the session this acquisition runs in
	base := zkPrefix + "/" + key
	if err := s.ensure(base); err != nil {
		return nil, nil, zkUnavailable("create the lock node", err)
	}
	node, err := s.conn.CreateProtectedEphemeralSequential(base+"/lock-", nil, zk.WorldACL(zk.PermAll))
	if err != nil {
		return nil, nil, zkUnavailable("create the waiter node", err)
	}
	deadline := time.NewTimer(g.wait)
	defer deadline.Stop()
	for {
		pred, err := s.predecessor(base, node)
		if err != nil {
			s.forget(node)
			return nil, nil, zkUnavailable("list waiters", err)
		}
		if pred == "" {
			break // ours is the lowest: held
		}
		exists, _, gone, err := s.conn.ExistsW(base + "/" + pred)
		switch {
		case err != nil:
			s.forget(node)
			return nil, nil, zkUnavailable("watch the predecessor", err)
		case !exists:
			continue
		}
		select {
		case <-gone:
		case <-deadline.C:
			s.forget(node)
			return nil, nil, fmt.Errorf("%w: %s not free within %v", ErrLockBusy, key, g.wait)
		case <-ctx.Done():
			s.forget(node)
			return nil, nil, fmt.Errorf("%w: %w", ErrLockBusy, context.Cause(ctx))
		case <-alive.Done():
			s.forget(node)
			return nil, nil, zkUnavailable("wait", context.Cause(alive))
		}
	}
	var hold context.Context = context.WithoutCancel(ctx)
	if f.Fence {
		// The node's czxid: zxids only grow (the leader's epoch is their
		// high half), so every later holder's node has a larger one.
		exists, stat, err := s.conn.Exists(node)
		if err != nil || !exists {
			s.forget(node)
			return nil, nil, zkUnavailable("read the fencing token", errors.Join(err, lock.ErrLockLost))
		}
		hold = withFencingToken(hold, stat.Czxid)
	}
	held, stop := context.WithCancelCause(hold)
	unwatch := context.AfterFunc(alive, func() { stop(context.Cause(alive)) })
	release := func(ctx context.Context) error {
		unwatch()
		stop(lock.ErrReleased)
		err := s.conn.Delete(node, -1)
		switch {
		case errors.Is(err, zk.ErrNoNode):
			return fmt.Errorf("%w: node %s is gone (session expired, or reset)", lock.ErrNotHeld, node)
		case err != nil:
			s.forget(node)
			return zkUnavailable("delete the lock node", err)
		}
		return nil
	}
	return held, release, nil
}

// drop deletes every waiter's and the holder's node of key's lock, as a
// reset must.
func (g zkGuard) drop(_ context.Context, key string) error {
	s, err := g.sessions.get(zkSessionTimeout)
	if err != nil {
		return err
	}
	base := zkPrefix + "/" + key
	children, _, err := s.conn.Children(base)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return zkUnavailable("list lock nodes", err)
	}
	for _, c := range children {
		if err := s.conn.Delete(base+"/"+c, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return zkUnavailable("drop lock node", err)
		}
	}
	return nil
}

func zkUnavailable(op string, err error) error {
	return fmt.Errorf("inventory: zookeeper: %s: %w: %w", op, ErrUnavailable, err)
}

// sequenceOf is the sequence number ZooKeeper appended to a node's name.
func sequenceOf(name string) string { return name[max(0, len(name)-10):] }

// zkSessions keeps one ZooKeeper session per session timeout.
type zkSessions struct {
	servers []string
	log     *slog.Logger

	mu     sync.Mutex
	closed bool
	byTTL  map[time.Duration]*zkSession
}

func newZKSessions(servers []string, log *slog.Logger) *zkSessions {
	return &zkSessions{servers: servers, log: log, byTTL: make(map[time.Duration]*zkSession)}
}

func (p *zkSessions) get(timeout time.Duration) (*zkSession, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, zkUnavailable("session", lock.ErrClosed)
	}
	if s := p.byTTL[timeout]; s != nil {
		return s, nil
	}
	s, err := newZKSession(p.servers, timeout, p.log)
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
		s.close()
	}
}

// zkSession is one connection and the life of its current session: a
// context that ends when the session is lost — expired, or disconnected,
// after which ZooKeeper may expire it without this side knowing in time —
// and is replaced when a session is established again.
type zkSession struct {
	conn       *zk.Conn
	watched    chan struct{}  // closed when the event loop has ended
	forgetting sync.WaitGroup // deletes of nodes given up (forget)

	mu   sync.Mutex
	life context.Context
	end  context.CancelCauseFunc
}

func newZKSession(servers []string, timeout time.Duration, log *slog.Logger) (*zkSession, error) {
	conn, events, err := zk.Connect(servers, timeout, zk.WithLogger(zkLogger{log}))
	if err != nil {
		return nil, err
	}
	s := &zkSession{conn: conn, watched: make(chan struct{})}
	s.life, s.end = context.WithCancelCause(context.Background())
	go s.follow(events)
	return s, nil
}

// follow tracks the session's state until the connection is closed.
func (s *zkSession) follow(events <-chan zk.Event) {
	defer close(s.watched)
	for ev := range events {
		if ev.Type != zk.EventSession {
			continue
		}
		s.mu.Lock()
		switch ev.State {
		case zk.StateExpired, zk.StateDisconnected:
			s.end(fmt.Errorf("%w: zookeeper session %s", lock.ErrLockLost, ev.State))
		case zk.StateHasSession:
			if s.life.Err() != nil {
				s.life, s.end = context.WithCancelCause(context.Background())
			}
		}
		s.mu.Unlock()
	}
}

// alive is the context of the current session.
func (s *zkSession) alive() context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.life
}

// ensure creates path and its parents as persistent nodes when missing.
func (s *zkSession) ensure(path string) error {
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	for i := range parts {
		p := "/" + strings.Join(parts[:i+1], "/")
		if _, err := s.conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
	}
	return nil
}

// predecessor is the waiter node just before node under base, "" when node
// is the lowest.
func (s *zkSession) predecessor(base, node string) (string, error) {
	children, _, err := s.conn.Children(base)
	if err != nil {
		return "", err
	}
	slices.SortFunc(children, func(a, b string) int { return strings.Compare(sequenceOf(a), sequenceOf(b)) })
	own := node[strings.LastIndexByte(node, '/')+1:]
	i := slices.Index(children, own)
	if i < 0 {
		return "", fmt.Errorf("%w: waiter node %s is gone", lock.ErrLockLost, node)
	}
	if i == 0 {
		return "", nil
	}
	return children[i-1], nil
}

// forget deletes a node this session no longer wants — a waiter's that
// gave up or failed, a holder's whose delete failed — in the background,
// Curator's guaranteed delete: while the connection is down the delete
// waits for it to come back, and a node left in a session that lives on
// (a reconnection keeps the session) would hold the lock, or block every
// later waiter, until the session ends.
func (s *zkSession) forget(node string) {
	s.forgetting.Go(func() { _ = s.conn.Delete(node, -1) })
}

func (s *zkSession) close() {
	s.conn.Close() // ends the deletes still waiting
	s.forgetting.Wait()
	<-s.watched
	s.mu.Lock()
	s.end(lock.ErrClosed)
	s.mu.Unlock()
}

// zkLogger sends go-zookeeper's log lines to slog at debug level.
type zkLogger struct{ log *slog.Logger }

func (l zkLogger) Printf(format string, args ...any) {
	l.log.Debug(fmt.Sprintf(format, args...), "component", "zookeeper")
}
