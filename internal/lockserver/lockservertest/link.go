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

	mu       sync.Mutex
	dropped  bool // swallow bytes instead of forwarding them
	down     bool // refuse new connections
	requests int  // requests (reads from a client) since DropRepliesFrom
	// dropFrom > 0: forward requests, swallow what the server sends back
	// once the client has sent that many
	dropFrom int
	conns    []net.Conn
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
		if !replies && n > 0 {
			l.requests++
		}
		dropped := l.dropped || replies && l.dropFrom > 0 && l.requests >= l.dropFrom
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
func (l *Link) DropReplies() { l.DropRepliesFrom(1) }

// DropRepliesFrom is DropReplies from the nth request the clients send
// on: the replies to the n-1 before it pass. A call that is several
// round trips (go-sql-driver's prepare, then execute) loses the reply of
// its nth.
func (l *Link) DropRepliesFrom(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.requests, l.dropFrom = 0, n
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
	l.dropped, l.down, l.dropFrom = dropped, down, 0
}
