package main

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"sync/atomic"
)

// requestCounter counts the commands a client writes on all of its
// connections, whichever library made them. It complements the server's
// total_commands_processed, which also counts every redis.call made inside a
// Lua script: the counter sees only what crossed the wire, one per request.
type requestCounter struct {
	requests atomic.Int64
}

// Load returns the number of commands written so far.
func (rc *requestCounter) Load() int64 { return rc.requests.Load() }

// dial is a go-redis Options.Dialer.
func (rc *requestCounter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: conn, requests: &rc.requests}, nil
}

// dialRueidis is a rueidis ClientOption.DialCtxFn.
func (rc *requestCounter) dialRueidis(ctx context.Context, addr string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: conn, requests: &rc.requests}, nil
}

type countingConn struct {
	net.Conn
	requests *atomic.Int64
	mu       sync.Mutex // the scanner's state belongs to the byte stream
	scanner  respScanner
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.mu.Lock()
	c.requests.Add(c.scanner.scan(p[:n]))
	c.mu.Unlock()
	return n, err
}

// respScanner counts the requests in a client's RESP byte stream, which may
// be split anywhere across writes. A request is an array header
// "*<n>\r\n" followed by n bulk strings "$<len>\r\n<len bytes>\r\n"; an
// inline command is a bare line.
type respScanner struct {
	skip   int  // bulk-string bytes (with their CRLF) still to pass over
	inLine bool // inside a header or inline line
	kind   byte // first byte of the current line
	num    int  // the line's decimal argument so far
}

func (s *respScanner) scan(p []byte) (requests int64) {
	for len(p) > 0 {
		if s.skip > 0 {
			k := min(s.skip, len(p))
			s.skip -= k
			p = p[k:]
			continue
		}
		b := p[0]
		p = p[1:]
		switch {
		case !s.inLine:
			s.kind, s.num, s.inLine = b, 0, true
		case b >= '0' && b <= '9':
			s.num = s.num*10 + int(b-'0')
		case b == '\n':
			s.inLine = false
			switch s.kind {
			case '$':
				s.skip = s.num + 2
			default: // '*' starts a request; anything else is an inline one
				requests++
			}
		}
	}
	return requests
}
