package lockservertest

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
)

// Link is a TCP proxy between a client and a server that a test can make
// fail at each step of a request: swallow everything (a stalled link: the
// request never arrives), forward requests but swallow replies (the server
// acts on what the client then believes lost), cut every connection and
// refuse new ones, and carry again.
type Link struct {
	addr string

	mu             sync.Mutex
	dropped        bool // swallow bytes instead of forwarding them
	repliesDropped bool // forward requests, swallow what the server sends back
	down           bool // refuse new connections
	conns          []net.Conn
}

// StartLink listens on a free loopback port and forwards each connection to
// to, until t ends.
func StartLink(t testing.TB, to string) *Link {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &Link{addr: ln.Addr().String()}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); l.Cut(); wg.Wait() })
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
				if up != nil {
					_ = up.Close()
				}
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

// Addr is the address clients dial instead of the server's.
func (l *Link) Addr() string { return l.addr }

func (l *Link) pipe(dst, src net.Conn, replies bool) {
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

// Blackhole swallows what the link carries both ways, connections kept
// open: requests sent now never arrive, and no reply comes.
func (l *Link) Blackhole() { l.set(true, false) }

// DropReplies lets requests through to the server and swallows its
// replies: the server acts on what the client then believes lost.
func (l *Link) DropReplies() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.repliesDropped = true
}

// Cut closes every connection and refuses new ones.
func (l *Link) Cut() {
	l.set(true, true)
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		_ = c.Close()
	}
	l.conns = nil
}

// Restore carries again. A connection whose bytes were swallowed has lost
// its framing: Cut it first for the client to reconnect at once.
func (l *Link) Restore() { l.set(false, false) }

func (l *Link) set(dropped, down bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dropped, l.down, l.repliesDropped = dropped, down, false
}
