package zklock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/lockserver/lockservertest"
	"github.com/lockstep/lockstep/internal/zklock"
)

// A waiter that gives up while its connection is failing must still have
// its node deleted once the session reconnects: go-zookeeper fails the
// delete in flight when the connection drops, and a node left in a session
// that lives on blocks every later waiter of the lock until the session
// ends (a leader's kill in a workshop run stopped the lock for the whole
// 10 s session timeout).
func TestAGivenUpWaitersNodeGoesAfterAReconnect(t *testing.T) {
	z := lockservertest.ZooKeeper(t, 1)
	link := lockservertest.StartLink(t, z.Servers[0])
	holder := connect(t, z.Servers, 10*time.Second)
	waiter := connect(t, []string{link.Addr()}, 10*time.Second)
	const path = "/zklock-test/forget"
	if _, err := holder.Acquire(t.Context(), path); err != nil {
		t.Fatal(err)
	}
	ctx, giveUp := context.WithCancel(t.Context())
	gaveUp := make(chan error, 1)
	go func() {
		_, err := waiter.Acquire(ctx, path)
		gaveUp <- err
	}()
	waitNodes(t, holder, path, 2)
	time.Sleep(500 * time.Millisecond) // its listing and watch of the holder's node done

	// The waiter's delete goes into a link that forwards nothing, which is
	// then cut: the delete was in flight when the connection dropped.
	link.Blackhole()
	giveUp()
	if err := <-gaveUp; !errors.Is(err, zklock.ErrGaveUp) {
		t.Fatalf("waiter: %v, want ErrGaveUp", err)
	}
	time.Sleep(200 * time.Millisecond)
	link.Cut()
	time.Sleep(200 * time.Millisecond)
	link.Restore()
	waitNodes(t, holder, path, 1)
}

// A waiter whose create reached the server but whose reply the connection
// lost must not leave its node behind: go-zookeeper's protected create
// looks for the node once and, when that listing fails too (no server yet),
// returns an error that leaves the node, unknown to anyone, in a session
// that reconnects and lives on — a lock blocked for good (the zookeeper
// failover row sold nothing for the rest of its run after a leader's kill).
func TestACreateWhoseReplyWasLostLeavesNoNode(t *testing.T) {
	z := lockservertest.ZooKeeper(t, 1)
	link := lockservertest.StartLink(t, z.Servers[0])
	holder := connect(t, z.Servers, 10*time.Second)
	waiter := connect(t, []string{link.Addr()}, 10*time.Second)
	const path = "/zklock-test/lost-create"
	if _, err := holder.Acquire(t.Context(), path); err != nil {
		t.Fatal(err)
	}
	if _, err := waiter.Nodes(t.Context(), path); err != nil { // the waiter's session is up
		t.Fatal(err)
	}
	link.DropReplies()
	done := make(chan error, 1)
	go func() {
		h, err := waiter.Acquire(t.Context(), path)
		if err == nil {
			h.Abandon()
			err = errors.New("acquired while the holder held")
		}
		done <- err
	}()
	waitNodes(t, holder, path, 2) // the create was done, its reply swallowed
	link.Cut()
	time.Sleep(1500 * time.Millisecond) // the client finds no server and fails what it queued
	link.Restore()
	if err := <-done; err == nil || errors.Is(err, zklock.ErrGaveUp) {
		t.Fatalf("waiter: %v, want the lost connection's error", err)
	}
	waitNodes(t, holder, path, 1)
}

func waitNodes(t *testing.T, s *zklock.Session, path string, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, err := s.Nodes(t.Context(), path)
		if err == nil && n == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has %d nodes (%v) after 5 s, want %d", path, n, err, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Every call returns when its context ends, however long the server takes
// to answer: go-zookeeper's requests take no context, and a stalled one
// waited two thirds of the session timeout and then a reconnection (a
// zookeeper sale with a 1 s deadline gave no answer after 30 s). What the
// calls did is resolved once the link is back: no node is left, the one an
// Acquire created after it returned included.
func TestCallsReturnWhenTheirContextEnds(t *testing.T) {
	z := lockservertest.ZooKeeper(t, 1)
	link := lockservertest.StartLink(t, z.Servers[0])
	observer := connect(t, z.Servers, 10*time.Second)
	s := connect(t, []string{link.Addr()}, 30*time.Second)
	const path = "/zklock-test/bounded"
	h, err := s.Acquire(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	waitNodes(t, observer, path, 1)
	link.DropReplies() // each request runs; no answer comes back
	calls := []struct {
		name string
		call func(context.Context) error
	}{
		{"acquire", func(ctx context.Context) error {
			_, err := s.Acquire(ctx, path) // a waiter behind h: its node created, unknown to it
			return err
		}},
		{"czxid", func(ctx context.Context) error {
			_, err := h.Czxid(ctx)
			return err
		}},
		{"nodes", func(ctx context.Context) error {
			_, err := s.Nodes(ctx, path)
			return err
		}},
		{"drop", func(ctx context.Context) error { return s.Drop(ctx, path+"-dropped") }},
		{"release", h.Release},
	}
	const deadline = 300 * time.Millisecond
	for _, c := range calls {
		ctx, cancel := context.WithTimeout(t.Context(), deadline)
		start := time.Now()
		err := c.call(ctx)
		took := time.Since(start)
		cancel()
		if err == nil || took > deadline+time.Second {
			t.Errorf("%s with its server silent: %v after %v, want an error within %v", c.name, err, took.Round(time.Millisecond), deadline)
		}
	}
	link.Cut()
	time.Sleep(200 * time.Millisecond)
	link.Restore()
	waitNodes(t, observer, path, 0) // h's, released; the waiter's, forgotten
}
