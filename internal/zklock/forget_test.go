package zklock_test

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
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
	link := startLink(t, z.Servers[0])
	holder := connect(t, z.Servers, 10*time.Second)
	waiter := connect(t, []string{link.addr}, 10*time.Second)
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
	link.blackhole()
	giveUp()
	if err := <-gaveUp; !errors.Is(err, zklock.ErrGaveUp) {
		t.Fatalf("waiter: %v, want ErrGaveUp", err)
	}
	time.Sleep(200 * time.Millisecond)
	link.cut()
	time.Sleep(200 * time.Millisecond)
	link.restore()
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
	link := startLink(t, z.Servers[0])
	holder := connect(t, z.Servers, 10*time.Second)
	waiter := connect(t, []string{link.addr}, 10*time.Second)
	const path = "/zklock-test/lost-create"
	if _, err := holder.Acquire(t.Context(), path); err != nil {
		t.Fatal(err)
	}
	if _, err := waiter.Nodes(path); err != nil { // the waiter's session is up
		t.Fatal(err)
	}
	link.dropReplies()
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
	link.cut()
	time.Sleep(1500 * time.Millisecond) // the client finds no server and fails what it queued
	link.restore()
	if err := <-done; err == nil || errors.Is(err, zklock.ErrGaveUp) {
		t.Fatalf("waiter: %v, want the lost connection's error", err)
	}
	waitNodes(t, holder, path, 1)
}

func waitNodes(t *testing.T, s *zklock.Session, path string, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, err := s.Nodes(path)
		if err == nil && n == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has %d nodes (%v) after 5 s, want %d", path, n, err, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// link is a TCP proxy to a server that can swallow what it carries, cut
// its connections and refuse new ones, and carry again.
type link struct {
	addr string
	ln   net.Listener
	to   string

	mu             sync.Mutex
	dropped        bool // swallow bytes instead of forwarding them
	repliesDropped bool // forward requests, swallow what the server sends back
	down           bool // refuse new connections
	conns          []net.Conn
}

func startLink(t *testing.T, to string) *link {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &link{addr: ln.Addr().String(), ln: ln, to: to}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); l.cut(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			l.mu.Lock()
			down := l.down
			l.mu.Unlock()
			up, err := net.Dial("tcp", to)
			if down || err != nil {
				_ = c.Close()
				continue
			}
			l.mu.Lock()
			l.conns = append(l.conns, c, up)
			l.mu.Unlock()
			wg.Go(func() { l.pipe(up, c, false) })
			wg.Go(func() { l.pipe(c, up, true) })
		}
	})
	return l
}

func (l *link) pipe(dst, src net.Conn, replies bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		l.mu.Lock()
		dropped := l.dropped || replies && l.repliesDropped
		l.mu.Unlock()
		if n > 0 && !dropped {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			_ = dst.Close()
			if !errors.Is(err, io.EOF) {
				_ = src.Close()
			}
			return
		}
	}
}

func (l *link) blackhole() { l.set(true, false) }

// dropReplies lets requests through to the server and swallows its
// replies: the server acts on what the client then believes lost.
func (l *link) dropReplies() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.repliesDropped = true
}

// cut closes every connection and refuses new ones.
func (l *link) cut() {
	l.set(true, true)
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		_ = c.Close()
	}
	l.conns = nil
}

func (l *link) restore() { l.set(false, false) }

func (l *link) set(dropped, down bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dropped, l.down, l.repliesDropped = dropped, down, false
}
