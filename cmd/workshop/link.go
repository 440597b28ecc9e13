package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// redisLink is a TCP proxy between one shop replica and its Redis that the
// partition fault step can cut: while cut, every byte either way is dropped
// and new connections are accepted but never answered, as when the network
// between them fails; the shop's Redis timeouts fire, nothing is refused.
// Healing closes the connections the cut swallowed (as TCP would, in the
// end) and lets new ones through.
type redisLink struct {
	ln     net.Listener
	target string
	done   sync.WaitGroup

	mu      sync.Mutex
	cut     bool
	closed  bool
	servers map[net.Conn]struct{} // upstream halves of live connections
	clients map[net.Conn]struct{} // every accepted connection
	dropped map[net.Conn]struct{} // connections the cut swallowed
}

func startLink(target string) (*redisLink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("redis link: %w", err)
	}
	l := &redisLink{ln: ln, target: target, servers: map[net.Conn]struct{}{}, clients: map[net.Conn]struct{}{}, dropped: map[net.Conn]struct{}{}}
	l.done.Go(l.accept)
	return l, nil
}

func (l *redisLink) addr() string { return l.ln.Addr().String() }

func (l *redisLink) accept() {
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return // closed
		}
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			c.Close()
			return
		}
		l.clients[c] = struct{}{}
		l.mu.Unlock()
		l.done.Go(func() { l.serve(c) })
	}
}

func (l *redisLink) serve(client net.Conn) {
	defer func() {
		l.mu.Lock()
		delete(l.clients, client)
		delete(l.dropped, client)
		l.mu.Unlock()
		client.Close()
	}()
	var server net.Conn
	l.mu.Lock()
	cut := l.cut
	if cut {
		l.dropped[client] = struct{}{}
	}
	l.mu.Unlock()
	if !cut {
		var err error
		if server, err = net.DialTimeout("tcp", l.target, time.Second); err != nil {
			return // Redis down: the shop sees the connection refused, closed
		}
		l.mu.Lock()
		if l.cut || l.closed { // cut while dialling
			l.dropped[client] = struct{}{}
			server.Close()
			server = nil
		} else {
			l.servers[server] = struct{}{}
		}
		l.mu.Unlock()
	}
	if server != nil {
		replies := make(chan struct{})
		go func() {
			defer close(replies)
			_, _ = io.Copy(client, server)
			if !l.isCut() {
				client.Close() // Redis went away: so does the connection
			}
		}()
		_, _ = io.Copy(server, client)
		server.Close()
		<-replies
		l.mu.Lock()
		delete(l.servers, server)
		l.mu.Unlock()
	}
	// Cut: swallow what the shop sends until healing closes the connection.
	_, _ = io.Copy(io.Discard, client)
}

func (l *redisLink) isCut() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cut
}

// partition cuts the link: upstream halves are closed (Redis forgets the
// shop), the shop's halves stay open and silent.
func (l *redisLink) partition() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cut {
		return
	}
	l.cut = true
	for c := range l.clients {
		l.dropped[c] = struct{}{}
	}
	for s := range l.servers {
		s.Close()
	}
}

// heal ends the partition: the swallowed connections are closed.
func (l *redisLink) heal() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cut = false
	for c := range l.dropped {
		c.Close()
	}
	clear(l.dropped)
}

func (l *redisLink) close() error {
	l.mu.Lock()
	l.closed = true
	err := l.ln.Close()
	for c := range l.clients {
		c.Close()
	}
	for s := range l.servers {
		s.Close()
	}
	l.mu.Unlock()
	l.done.Wait()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
