// Package zklock is Curator's InterProcessMutex recipe on go-zookeeper/zk:
// each waiter creates an ephemeral sequential node under the lock's node,
// the lowest sequence holds, and each waiter watches only the node just
// before its own (no herd). The session is the lease: a holder whose
// session is lost loses its node, so the lock, and its hold's context ends
// then — go-zookeeper's own Lock keeps believing it holds, and has no
// context. The holder's node's czxid is its fencing token.
//
// Every call takes a context and returns when it ends: go-zookeeper's
// requests take none, and when a server stalls a request waits two thirds
// of the session timeout and then a reconnection whose handshake may take
// ten times that. So each runs apart from its caller (bounded), and what
// it leaves once it ends is resolved then: a waiter's node created for a
// caller that has gone is deleted, a failed delete is retried (forget).
//
// The inventory's zookeeper stage and bench/locksystems both take their
// locks here.
package zklock

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockstep/lockstep/internal/outcome"
	"github.com/lockstep/lockstep/lock"
)

// ErrGaveUp is returned by an Acquire whose context ended while it waited
// for the lock; the error wraps the context's cause.
var ErrGaveUp = errors.New("zklock: gave up waiting")

// Session is one connection and the life of its current session: a
// context that ends when the session is lost — expired, or disconnected,
// after which ZooKeeper may expire it without this side knowing in time —
// and is replaced when a session is established again.
type Session struct {
	conn       *zk.Conn
	watched    chan struct{}  // closed when the event loop has ended
	background sync.WaitGroup // requests run apart from their callers, and deletes of nodes given up (forget)

	mu   sync.Mutex
	life context.Context
	end  context.CancelCauseFunc
}

// Connect opens a session with servers of the given timeout (the lease of
// every lock taken in it); go-zookeeper's log lines go to log at debug
// level.
func Connect(servers []string, timeout time.Duration, log *slog.Logger) (*Session, error) {
	conn, events, err := zk.Connect(servers, timeout, zk.WithLogger(logger{log}))
	if err != nil {
		return nil, fmt.Errorf("zklock: connect: %w", err)
	}
	s := &Session{conn: conn, watched: make(chan struct{})}
	s.life, s.end = context.WithCancelCause(context.Background())
	go s.follow(events)
	return s, nil
}

// follow tracks the session's state until the connection is closed.
func (s *Session) follow(events <-chan zk.Event) {
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
func (s *Session) alive() context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.life
}

// Close ends the session: its nodes, so its locks, go with it. Call it
// once no call is in flight.
func (s *Session) Close() {
	s.conn.Close() // fails the requests still waiting
	<-s.watched
	s.mu.Lock()
	s.end(lock.ErrClosed) // ends the waits
	s.mu.Unlock()
	s.background.Wait()
}

// bounded runs op apart from the caller and returns its result, or
// context.Cause(ctx) as soon as ctx ends; undo, if not nil, then gets what
// op returns without an error once it does.
func bounded[T any](ctx context.Context, s *Session, op func() (T, error), undo func(T)) (T, error) {
	type result struct {
		v   T
		err error
	}
	done, gone := make(chan result), make(chan struct{})
	s.background.Go(func() {
		v, err := op()
		select {
		case done <- result{v, err}:
		case <-gone:
			if err == nil && undo != nil {
				undo(v)
			}
		}
	})
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		close(gone)
		var zero T
		return zero, context.Cause(ctx)
	}
}

// Hold is one acquisition of a lock.
type Hold struct {
	s       *Session
	node    string
	held    context.Context
	stop    context.CancelCauseFunc
	unwatch func() bool
}

// Acquire takes the lock whose node is path, waiting until it is free or
// ctx ends (ErrGaveUp), and returning then even with a request in flight:
// a node it creates after is deleted. The hold's context carries ctx's
// values and ends when the hold is released or the session it was taken
// in is lost.
func (s *Session) Acquire(ctx context.Context, path string) (*Hold, error) {
	h, err := bounded(ctx, s, func() (*Hold, error) { return s.acquire(ctx, path) }, (*Hold).Abandon)
	if err != nil && ctx.Err() != nil && !errors.Is(err, ErrGaveUp) {
		return nil, fmt.Errorf("%w: %w", ErrGaveUp, err)
	}
	return h, err
}

func (s *Session) acquire(ctx context.Context, path string) (*Hold, error) {
	alive := s.alive() // the session this acquisition runs in
	node, err := s.createWaiter(path)
	if err != nil {
		return nil, err
	}
	for {
		pred, err := s.predecessor(path, node)
		if err != nil {
			s.forget(node)
			return nil, fmt.Errorf("zklock: list waiters: %w", err)
		}
		if pred == "" {
			break // ours is the lowest: held
		}
		exists, _, gone, err := s.conn.ExistsW(path + "/" + pred)
		switch {
		case err != nil:
			s.forget(node)
			return nil, fmt.Errorf("zklock: watch the predecessor: %w", err)
		case !exists:
			continue
		}
		select {
		case <-gone:
		case <-ctx.Done():
			s.forget(node)
			return nil, fmt.Errorf("%w: %w", ErrGaveUp, context.Cause(ctx))
		case <-alive.Done():
			s.forget(node)
			return nil, fmt.Errorf("zklock: wait: %w", context.Cause(alive))
		}
	}
	h := &Hold{s: s, node: node}
	h.held, h.stop = context.WithCancelCause(context.WithoutCancel(ctx))
	h.unwatch = context.AfterFunc(alive, func() { h.stop(context.Cause(alive)) })
	return h, nil
}

// Context ends when the hold is released or its session is lost; its
// cause says which (lock.ErrReleased, or one wrapping lock.ErrLockLost).
func (h *Hold) Context() context.Context { return h.held }

// Czxid reads the holder's node's czxid, its fencing token: zxids only
// grow (the leader's epoch is their high half), so every later holder's
// node has a larger one. It costs a round trip; an error wraps
// lock.ErrLockLost when the node is gone.
func (h *Hold) Czxid(ctx context.Context) (int64, error) {
	stat, err := bounded(ctx, h.s, func() (*zk.Stat, error) {
		exists, stat, err := h.s.conn.Exists(h.node)
		if err == nil && !exists {
			err = lock.ErrLockLost
		}
		return stat, err
	}, nil)
	if err != nil {
		return 0, fmt.Errorf("zklock: read the node's czxid: %w", err)
	}
	return stat.Czxid, nil
}

// Release deletes the holder's node. An error wrapping lock.ErrNotHeld
// says the node was already gone (its session expired, or it was
// dropped); after another error, or once ctx ended, the node is deleted in
// the background.
func (h *Hold) Release(ctx context.Context) error {
	h.end()
	_, err := bounded(ctx, h.s, func() (struct{}, error) { return struct{}{}, h.delete() }, nil)
	if ctx.Err() != nil && !errors.Is(err, lock.ErrNotHeld) {
		return fmt.Errorf("zklock: delete the lock node (retried in the background): %w", err)
	}
	return err
}

func (h *Hold) delete() error {
	err := h.s.conn.Delete(h.node, -1)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return fmt.Errorf("%w: node %s is gone (session expired, or reset)", lock.ErrNotHeld, h.node)
	case err != nil:
		h.s.forget(h.node)
		return fmt.Errorf("zklock: delete the lock node: %w", err)
	}
	return nil
}

// Abandon gives the lock up without waiting: the node is deleted in the
// background.
func (h *Hold) Abandon() {
	h.end()
	h.s.forget(h.node)
}

func (h *Hold) end() {
	h.unwatch()
	h.stop(lock.ErrReleased)
}

// Drop deletes every waiter's and the holder's node of the lock at path,
// as a reset must.
func (s *Session) Drop(ctx context.Context, path string) error {
	_, err := bounded(ctx, s, func() (struct{}, error) { return struct{}{}, s.drop(path) }, nil)
	return err
}

func (s *Session) drop(path string) error {
	children, _, err := s.conn.Children(path)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("zklock: list lock nodes: %w", err)
	}
	for _, c := range children {
		if err := s.conn.Delete(path+"/"+c, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return fmt.Errorf("zklock: drop lock node: %w", err)
		}
	}
	return nil
}

// Nodes is how many waiters' and holders' nodes the lock at path has.
func (s *Session) Nodes(ctx context.Context, path string) (int, error) {
	return bounded(ctx, s, func() (int, error) { return s.nodes(path) }, nil)
}

func (s *Session) nodes(path string) (int, error) {
	children, _, err := s.conn.Children(path)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("zklock: list lock nodes: %w", err)
	}
	return len(children), nil
}

// createWaiter creates a waiter's ephemeral sequential node under path,
// the lock's node and its parents too when they are missing: Curator's
// way, rather than a round trip each on every acquisition.
//
// The node's name starts with a random id, as in Curator's protected mode:
// a create whose connection dropped before its reply came may have been
// done, and only the id finds the node then. go-zookeeper's own protected
// create looks once, and when that listing fails as well (no server yet)
// returns an error that leaves the node, known to nobody, in a session
// that reconnects and lives on: the lock blocked until the session ends
// (a workshop's zookeeper failover row sold nothing after a leader's
// kill). Here a node that cannot be looked for now is deleted in the
// background once the connection is back.
func (s *Session) createWaiter(path string) (string, error) {
	id := "_c_" + rand.Text() + "-"
	create := func() (string, error) {
		return s.conn.Create(path+"/"+id+"lock-", nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
	}
	node, err := create()
	if errors.Is(err, zk.ErrNoNode) {
		if err := s.ensure(path); err != nil {
			return "", fmt.Errorf("zklock: create the lock node: %w", err)
		}
		node, err = create()
	}
	if outcome.MayHaveRunErr(err) { // sent, its outcome unknown (internal/outcome)
		found, findErr := s.find(path, id)
		switch {
		case findErr != nil:
			s.forgetCreated(path, id)
		case found != "":
			return found, nil
		}
	}
	if err != nil {
		return "", fmt.Errorf("zklock: create the waiter node: %w", err)
	}
	return node, nil
}

// find is the path of the node under path whose name starts with id, ""
// when there is none.
func (s *Session) find(path, id string) (string, error) {
	children, _, err := s.conn.Children(path)
	if err != nil {
		return "", err
	}
	for _, c := range children {
		if strings.HasPrefix(c, id) {
			return path + "/" + c, nil
		}
	}
	return "", nil
}

// ensure creates path and its parents as persistent nodes when missing.
func (s *Session) ensure(path string) error {
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	for i := range parts {
		p := "/" + strings.Join(parts[:i+1], "/")
		if _, err := s.conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
	}
	return nil
}

// predecessor is the waiter node just before node under path, "" when
// node is the lowest.
func (s *Session) predecessor(path, node string) (string, error) {
	children, _, err := s.conn.Children(path)
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

// sequenceOf is the sequence number ZooKeeper appended to a node's name.
func sequenceOf(name string) string { return name[max(0, len(name)-10):] }

// forget deletes a node this session no longer wants — a waiter's that
// gave up or failed, a holder's whose delete failed — in the background,
// Curator's guaranteed delete: a node left in a session that lives on (a
// reconnection keeps the session) would hold the lock, or block every
// later waiter, until the session ends.
func (s *Session) forget(node string) {
	s.untilDone(func() error { return s.conn.Delete(node, -1) })
}

// forgetCreated deletes in the background the node that a create whose
// reply was lost may have made under path, found by the id its name
// starts with.
func (s *Session) forgetCreated(path, id string) {
	s.untilDone(func() error {
		node, err := s.find(path, id)
		if err != nil || node == "" {
			return err
		}
		return s.conn.Delete(node, -1)
	})
}

// untilDone runs op in the background until it is done, its node is
// gone, or the session ends (with it its nodes). go-zookeeper fails a
// request that was in flight when the connection dropped
// (ErrConnectionClosed), or that found no server (ErrNoServer), instead of
// holding it for the next connection: a delete tried once left a waiter's
// node blocking its lock for a whole session timeout after a leader's
// kill (10 s in a workshop run).
func (s *Session) untilDone(op func() error) {
	s.background.Go(func() {
		for {
			err := op()
			if err == nil || errors.Is(err, zk.ErrNoNode) || errors.Is(err, zk.ErrClosing) || errors.Is(err, zk.ErrSessionExpired) {
				return
			}
			select {
			case <-time.After(forgetRetry):
			case <-s.watched: // closed: the session's nodes go with it
				return
			}
		}
	})
}

// forgetRetry spaces the attempts of a delete the connection lost.
const forgetRetry = 50 * time.Millisecond

// logger sends go-zookeeper's log lines to slog at debug level.
type logger struct{ log *slog.Logger }

func (l logger) Printf(format string, args ...any) {
	l.log.Debug(fmt.Sprintf(format, args...), "component", "zookeeper")
}
