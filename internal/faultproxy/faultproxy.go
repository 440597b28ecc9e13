// Package faultproxy is a TCP proxy for tests that misbehaves as a network
// can: it delays what either side sends, and cuts a connection after the
// server answered a request but before the client saw the answer — the
// request ran, its reply is lost, and a client library that retries on a
// broken connection sends it again.
//
// What to do with each chunk of bytes is a Policy's decision, so a test can
// drive it from a seeded random source. Chunks are what one read returned:
// a client that waits for each reply before the next request (go-redis
// outside pipelines) sends one request per chunk, and Redis answers a short
// reply in one.
package faultproxy

import (
	"net"
	"sync"
	"time"
)

// Policy decides the fate of each chunk. It is called from the connections'
// goroutines, concurrently.
type Policy interface {
	// Request is called before a chunk the client sent is forwarded; it
	// returns how long to hold it back.
	Request(chunk []byte) time.Duration
	// Reply is called before a chunk the server sent is forwarded, with the
	// last chunk the client sent on that connection. It returns how long to
	// hold it back, and cut to close the connection instead of forwarding
	// it once that time has passed.
	Reply(chunk, lastRequest []byte) (delay time.Duration, cut bool)
}

// Proxy forwards every connection it accepts to one upstream address.
type Proxy struct {
	ln       net.Listener
	upstream string
	policy   Policy

	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

// Start listens on a free loopback port and forwards to upstream.
func Start(upstream string, policy Policy) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, upstream: upstream, policy: policy, conns: make(map[net.Conn]struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is where clients connect.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// CutAll closes every open connection, as a network partition that heals
// at once would.
func (p *Proxy) CutAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
}

// Close stops accepting, cuts every connection and waits for the
// forwarding goroutines.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	_ = p.ln.Close()
	p.CutAll()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.DialTimeout("tcp", p.upstream, time.Second)
		if err != nil {
			_ = client.Close()
			continue
		}
		if !p.track(client, server) {
			return
		}
		pair := &pair{p: p, client: client, server: server}
		p.wg.Add(2)
		go pair.requests()
		go pair.replies()
	}
}

// track registers a connection pair; false once the proxy is closed.
func (p *Proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range conns {
			_ = c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

// pair is one proxied connection.
type pair struct {
	p              *Proxy
	client, server net.Conn

	mu          sync.Mutex
	lastRequest []byte
}

func (c *pair) close() {
	_ = c.client.Close()
	_ = c.server.Close()
	c.p.mu.Lock()
	delete(c.p.conns, c.client)
	delete(c.p.conns, c.server)
	c.p.mu.Unlock()
}

func (c *pair) requests() {
	defer c.p.wg.Done()
	defer c.close()
	buf := make([]byte, 64<<10)
	for {
		n, err := c.client.Read(buf)
		if n > 0 {
			chunk := append([]byte(nil), buf[:n]...)
			c.mu.Lock()
			c.lastRequest = chunk
			c.mu.Unlock()
			if d := c.p.policy.Request(chunk); d > 0 {
				time.Sleep(d)
			}
			if _, werr := c.server.Write(chunk); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (c *pair) replies() {
	defer c.p.wg.Done()
	defer c.close()
	buf := make([]byte, 64<<10)
	for {
		n, err := c.server.Read(buf)
		if n > 0 {
			c.mu.Lock()
			last := c.lastRequest
			c.mu.Unlock()
			delay, cut := c.p.policy.Reply(buf[:n], last)
			if delay > 0 {
				time.Sleep(delay)
			}
			if cut {
				return
			}
			if _, werr := c.client.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
