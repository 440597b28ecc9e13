package lock

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// subscribeTimeout bounds the wait for Redis to confirm a subscription. Past
// it a waiter goes on without the confirmation: its PTTL timer still wakes it.
const subscribeTimeout = 2 * time.Second

// pubsubIdle is how long the pub/sub connection may stay silent before it is
// pinged to prove it is alive.
const pubsubIdle = 5 * time.Second

// subscriptions multiplexes every channel a Client listens on over a single
// pub/sub connection, opened on first use. Its fields are guarded by Client.mu,
// which also orders SUBSCRIBE and UNSUBSCRIBE of one channel on the wire.
type subscriptions struct {
	c         *Client
	ps        *redis.PubSub
	byChannel map[string]*subscription
	pings     map[string]chan struct{} // PING payload → closed when its PONG arrives
	pingSeq   uint64
}

type subscription struct {
	listeners map[*listener]struct{}
	ready     chan struct{} // closed once Redis confirmed the SUBSCRIBE
}

// listener receives the payloads published on one channel. It runs on the
// dispatch goroutine and must not block.
type listener struct {
	deliver func(payload string)
}

func (s *subscriptions) init(c *Client) {
	s.c = c
	s.byChannel = make(map[string]*subscription)
	s.pings = make(map[string]chan struct{})
}

// subscribe adds l to channel (again: a no-op). With confirm it returns once
// Redis has confirmed the subscription, so that a message published after
// subscribe returns reaches l. The confirmation is a PING sent after the
// SUBSCRIBE on the same connection: its PONG comes back only after the
// SUBSCRIBE took effect.
//
// The commands go out on the shared connection without ctx: a caller's
// deadline would become the write deadline of a connection every waiter
// uses, and one that expired mid-write would make go-redis redial it. The
// caller's ctx bounds only the wait for the confirmation.
func (s *subscriptions) subscribe(ctx context.Context, channel string, l *listener, confirm bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c := s.c
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	if s.ps == nil {
		s.ps = c.rdb.Subscribe(c.life)
		c.goroutines.Add(1)
		go s.dispatch(s.ps)
	}
	sub := s.byChannel[channel]
	if sub == nil {
		sub = &subscription{listeners: make(map[*listener]struct{}), ready: make(chan struct{})}
		if err := s.ps.Subscribe(c.life, channel); err != nil {
			c.mu.Unlock()
			return err
		}
		s.pingSeq++
		token := "lockstep-sub-" + strconv.FormatUint(s.pingSeq, 10)
		s.pings[token] = sub.ready
		if err := s.ps.Ping(c.life, token); err != nil {
			delete(s.pings, token)
			close(sub.ready) // the PTTL timer covers what the subscription misses
		}
		s.byChannel[channel] = sub
	}
	sub.listeners[l] = struct{}{}
	ready := sub.ready
	c.mu.Unlock()
	if !confirm {
		return nil
	}

	timer := time.NewTimer(subscribeTimeout)
	defer timer.Stop()
	select {
	case <-ready:
		return nil
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// unsubscribe removes l; the last listener of a channel unsubscribes it.
func (s *subscriptions) unsubscribe(channel string, l *listener) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	s.unsubscribeLocked(channel, l)
}

func (s *subscriptions) unsubscribeLocked(channel string, l *listener) {
	sub := s.byChannel[channel]
	if sub == nil {
		return
	}
	delete(sub.listeners, l)
	if len(sub.listeners) > 0 {
		return
	}
	delete(s.byChannel, channel)
	if s.ps != nil {
		// An error means the connection is gone; reconnecting resubscribes
		// only what is still subscribed, and this channel no longer is.
		_ = s.ps.Unsubscribe(context.Background(), channel)
	}
}

// dispatch reads the pub/sub connection until it is closed. It reads with
// Receive rather than go-redis's Channel helpers because it needs the PONGs
// that confirm subscriptions; an idle connection is pinged so that a dead
// one is noticed and reconnected (go-redis resubscribes on reconnect).
func (s *subscriptions) dispatch(ps *redis.PubSub) {
	defer s.c.goroutines.Done()
	var targets []*listener
	for {
		msg, err := ps.ReceiveTimeout(s.c.life, pubsubIdle)
		if err != nil {
			if errors.Is(err, redis.ErrClosed) || s.c.life.Err() != nil {
				return
			}
			var netErr interface{ Timeout() bool }
			if errors.As(err, &netErr) && netErr.Timeout() {
				_ = ps.Ping(s.c.life) // a write error reconnects
				continue
			}
			// The connection failed: unlocks published meanwhile are lost,
			// so every waiter tries again now (and reports the error if
			// Redis is gone), and nobody waits for a confirmation that will
			// not come. The next Receive redials; don't spin.
			s.connectionLost()
			select {
			case <-time.After(renewRetry):
			case <-s.c.life.Done():
				return
			}
			continue
		}
		targets = targets[:0]
		s.c.mu.Lock()
		switch msg := msg.(type) {
		case *redis.Message:
			if sub := s.byChannel[msg.Channel]; sub != nil {
				for l := range sub.listeners {
					targets = append(targets, l)
				}
			}
		case *redis.Pong:
			if ready, ok := s.pings[msg.Payload]; ok {
				delete(s.pings, msg.Payload)
				close(ready)
			}
		}
		s.c.mu.Unlock()
		if m, ok := msg.(*redis.Message); ok {
			for _, l := range targets {
				l.deliver(m.Payload)
			}
		}
	}
}

// connectionLost releases every subscriber waiting for a confirmation and
// wakes every listener as an unlock would.
func (s *subscriptions) connectionLost() {
	var targets []*listener
	s.c.mu.Lock()
	for token, ready := range s.pings {
		close(ready)
		delete(s.pings, token)
	}
	for _, sub := range s.byChannel {
		for l := range sub.listeners {
			targets = append(targets, l)
		}
	}
	s.c.mu.Unlock()
	for _, l := range targets {
		l.deliver("u")
	}
}

// close shuts the pub/sub connection; dispatch ends when its channel closes.
func (s *subscriptions) close() error {
	s.c.mu.Lock()
	ps := s.ps
	s.ps = nil
	s.c.mu.Unlock()
	if ps == nil {
		return nil
	}
	if err := ps.Close(); err != nil && !errors.Is(err, redis.ErrClosed) {
		return err
	}
	return nil
}
