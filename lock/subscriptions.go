package lock

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockstep/lockstep/internal/keyslot"
	"github.com/lockstep/lockstep/internal/sleep"
)

// subscribeTimeout bounds the wait for Redis to confirm a subscription. Past
// it a waiter goes on without the confirmation: its PTTL timer still wakes it.
const subscribeTimeout = 2 * time.Second

// pubsubIdle is how long a pub/sub connection may stay silent before it is
// pinged to prove it is alive, or closed when nothing is subscribed on it.
const pubsubIdle = 5 * time.Second

// The pause before a sharded connection refused by its master is rebuilt,
// doubling with each refusal in a row: the slot map needs a moment to
// catch up with a moved slot.
const (
	rebuildFirst = 50 * time.Millisecond
	rebuildMost  = time.Second
)

// subscriptions multiplexes the channels a Client listens on over pub/sub
// connections opened on first use and shared by every waiter. Its fields
// are guarded by Client.mu, which also orders SUBSCRIBE and UNSUBSCRIBE of
// one channel on the wire.
//
// On one Redis that is a single connection: SUBSCRIBE, and the scripts
// PUBLISH. A Redis Cluster broadcasts a PUBLISH to every node, so there the
// scripts SPUBLISH (sharded pub/sub, Redis 7), which stays in the shard of
// the lock's slot, and the Client SSUBSCRIBEs on one connection per slot it
// waits on: SSUBSCRIBE takes the channels of one slot only, and go-redis
// routes a sharded connection, and reconnects it, by its channels' slot.
//
// A sharded subscription must follow its slot. A master that gives a slot
// away (resharding, or demoted by a failover) drops its subscribers with an
// unsolicited SUNSUBSCRIBE, which go-redis neither resubscribes nor reports
// (a trial lost 192 of 342 messages after one migration); a killed master's
// connection fails. Either way the channels' listeners are woken at once,
// as by an unlock, and woken again when the subscription is confirmed on
// the slot's current master — by go-redis's reconnection, or by a rebuild
// that reloads the slot map until that master accepts it. A waiter never
// sleeps through an unlock because its subscription moved.
type subscriptions struct {
	c         *Client
	sharded   *redis.ClusterClient // set by New: sharded pub/sub on a Cluster
	conns     map[int]*pubsubConn  // by slot; plainSlot for plain pub/sub
	byChannel map[string]*subscription
	pings     map[string]pendingPing // PING payload → what its PONG confirms
	pingSeq   uint64
}

// plainSlot keys the one connection of plain pub/sub.
const plainSlot = -1

// pubsubConn is one pub/sub connection. Its dispatch goroutine reads it
// until it is closed.
type pubsubConn struct {
	slot int
	ps   *redis.PubSub
	// key is a channel of the slot, and master the address the slot map
	// gave for it when the connection was opened (sharded only).
	key, master string
	channels    int // subscriptions on it
	// unsubscribing counts the SUNSUBSCRIBEs sent per channel whose
	// confirmation is still to come: any other is the master's own.
	unsubscribing map[string]int
	refusals      int // rebuilds in a row its master refused
}

type subscription struct {
	listeners map[*listener]struct{}
	ready     chan struct{} // closed once Redis confirmed the subscription
	conn      *pubsubConn
	// lost: messages may have been missed since the connection failed or
	// moved; the listeners are woken when the subscription is confirmed.
	lost bool
}

type pendingPing struct {
	conn  *pubsubConn
	ready chan struct{}
}

// listener receives the payloads published on one channel. It runs on a
// dispatch goroutine and must not block.
type listener struct {
	deliver func(payload string)
}

func (s *subscriptions) init(c *Client) {
	s.c = c
	s.conns = make(map[int]*pubsubConn)
	s.byChannel = make(map[string]*subscription)
	s.pings = make(map[string]pendingPing)
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
	sub := s.byChannel[channel]
	if sub == nil {
		sub = &subscription{listeners: make(map[*listener]struct{})}
		if err := s.attachLocked(channel, sub); err != nil {
			c.mu.Unlock()
			return err
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

// attachLocked subscribes channel on the connection of its slot.
func (s *subscriptions) attachLocked(channel string, sub *subscription) error {
	slot := plainSlot
	if s.sharded != nil {
		slot = keyslot.Of(channel)
	}
	conn := s.conns[slot]
	fresh := conn == nil
	if fresh {
		conn = s.newConn(slot, channel)
	}
	sub.ready = make(chan struct{})
	var err error
	if s.sharded != nil {
		err = conn.ps.SSubscribe(s.c.life, channel)
	} else {
		err = conn.ps.Subscribe(s.c.life, channel)
	}
	if err != nil && s.sharded == nil {
		if fresh {
			_ = conn.ps.Close()
		}
		return err
	}
	if fresh {
		// Only now: a connection read before its first SSUBSCRIBE would
		// be opened to a random node.
		s.startLocked(conn)
	}
	sub.conn = conn
	conn.channels++
	if err != nil {
		// Sharded: go-redis keeps the channel and subscribes it when it
		// reconnects, which wakes the listeners; until then the waiter's
		// TTL timer covers it.
		sub.lost = true
		close(sub.ready)
		return nil
	}
	s.confirmLocked(conn, sub.ready)
	return nil
}

func (s *subscriptions) newConn(slot int, key string) *pubsubConn {
	conn := &pubsubConn{slot: slot, key: key, unsubscribing: make(map[string]int)}
	if s.sharded != nil {
		conn.ps = s.sharded.SSubscribe(s.c.life)
		conn.master = s.masterOf(key)
	} else {
		conn.ps = s.c.rdb.Subscribe(s.c.life)
	}
	return conn
}

// masterOf is the address of key's master in the Cluster's slot map as
// go-redis has it, the node a new sharded connection for key goes to; ""
// when the map has none.
func (s *subscriptions) masterOf(key string) string {
	master, err := s.sharded.MasterForKey(s.c.life, key)
	if err != nil {
		return ""
	}
	return master.Options().Addr
}

func (s *subscriptions) startLocked(conn *pubsubConn) {
	s.conns[conn.slot] = conn
	s.c.goroutines.Add(1)
	go s.dispatch(conn)
}

// confirmLocked sends the PING whose PONG closes ready; without a PING,
// ready is closed at once (the PTTL timer covers what is missed).
func (s *subscriptions) confirmLocked(conn *pubsubConn, ready chan struct{}) {
	s.pingSeq++
	token := "lockstep-sub-" + strconv.FormatUint(s.pingSeq, 10)
	if err := conn.ps.Ping(s.c.life, token); err != nil {
		close(ready)
		return
	}
	s.pings[token] = pendingPing{conn: conn, ready: ready}
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
	conn := sub.conn
	conn.channels--
	// An error means the connection is gone; reconnecting resubscribes
	// only what is still subscribed, and this channel no longer is.
	if s.sharded == nil {
		_ = conn.ps.Unsubscribe(context.Background(), channel)
	} else if conn.ps.SUnsubscribe(context.Background(), channel) == nil {
		conn.unsubscribing[channel]++
	}
}

// dispatch reads conn until it is closed. It reads with Receive rather than
// go-redis's Channel helpers because it needs the PONGs that confirm
// subscriptions and the subscription events; an idle connection is pinged
// so that a dead one is noticed and reconnected (go-redis resubscribes on
// reconnect), or closed when nothing is subscribed on it (sharded).
func (s *subscriptions) dispatch(conn *pubsubConn) {
	defer s.c.goroutines.Done()
	var targets []*listener
	for {
		msg, err := conn.ps.ReceiveTimeout(s.c.life, pubsubIdle)
		if err != nil {
			if errors.Is(err, redis.ErrClosed) || s.c.life.Err() != nil {
				return
			}
			var netErr interface{ Timeout() bool }
			if errors.As(err, &netErr) && netErr.Timeout() {
				if s.closeIdle(conn) {
					return
				}
				_ = conn.ps.Ping(s.c.life) // a write error reconnects
				continue
			}
			var refused redis.Error
			if s.sharded != nil && errors.As(err, &refused) {
				// A master refused a SSUBSCRIBE (MOVED): the slot left it
				// before the slot map told us.
				s.rebuild(conn)
				return
			}
			// The connection failed: messages published meanwhile are
			// lost, so every listener on it tries again now (and reports
			// the error if Redis is gone), and again once go-redis has
			// resubscribed; nobody waits for a confirmation that will not
			// come. The next Receive redials; don't spin.
			s.connectionLost(conn)
			if s.sharded != nil {
				s.sharded.ReloadState(s.c.life) // a dead master's slots move
			}
			if sleep.For(s.c.life, renewRetry) != nil {
				return
			}
			continue
		}
		targets = targets[:0]
		moved := false
		s.c.mu.Lock()
		switch msg := msg.(type) {
		case *redis.Message:
			targets = s.appendListenersLocked(targets, s.byChannel[msg.Channel])
		case *redis.Pong:
			if p, ok := s.pings[msg.Payload]; ok {
				delete(s.pings, msg.Payload)
				close(p.ready)
			}
		case *redis.Subscription:
			targets, moved = s.subscriptionEventLocked(conn, msg, targets)
		}
		s.c.mu.Unlock()
		payload := "u" // a (re)confirmed subscription wakes as an unlock does
		if m, ok := msg.(*redis.Message); ok {
			payload = m.Payload
		}
		for _, l := range targets {
			l.deliver(payload)
		}
		if moved {
			s.rebuild(conn)
			return
		}
	}
}

// subscriptionEventLocked handles Redis's (un)subscription replies on conn:
// a confirmed subscription that may have missed messages wakes its
// listeners; a SUNSUBSCRIBE nobody sent says the slot left conn's master.
func (s *subscriptions) subscriptionEventLocked(conn *pubsubConn, msg *redis.Subscription, targets []*listener) ([]*listener, bool) {
	sub := s.byChannel[msg.Channel]
	switch msg.Kind {
	case "subscribe", "ssubscribe":
		if sub != nil && sub.conn == conn {
			conn.refusals = 0
			if sub.lost {
				sub.lost = false
				targets = s.appendListenersLocked(targets, sub)
			}
		}
	case "sunsubscribe":
		if n := conn.unsubscribing[msg.Channel]; n > 0 {
			if n == 1 {
				delete(conn.unsubscribing, msg.Channel)
			} else {
				conn.unsubscribing[msg.Channel] = n - 1
			}
			return targets, false
		}
		return targets, sub != nil && sub.conn == conn
	}
	return targets, false
}

func (s *subscriptions) appendListenersLocked(targets []*listener, sub *subscription) []*listener {
	if sub == nil {
		return targets
	}
	for l := range sub.listeners {
		targets = append(targets, l)
	}
	return targets
}

// connectionLost releases every subscriber of conn waiting for a
// confirmation, marks its subscriptions lost and wakes their listeners as
// an unlock would.
func (s *subscriptions) connectionLost(conn *pubsubConn) {
	s.c.mu.Lock()
	targets := s.loseLocked(conn)
	clear(conn.unsubscribing) // their replies will not come
	s.c.mu.Unlock()
	for _, l := range targets {
		l.deliver("u")
	}
}

// loseLocked marks conn's subscriptions lost, ends the waits for their
// confirmation, and returns their listeners.
func (s *subscriptions) loseLocked(conn *pubsubConn) []*listener {
	for token, p := range s.pings {
		if p.conn == conn {
			close(p.ready)
			delete(s.pings, token)
		}
	}
	var targets []*listener
	for _, sub := range s.byChannel {
		if sub.conn == conn {
			sub.lost = true
			targets = s.appendListenersLocked(targets, sub)
		}
	}
	return targets
}

// rebuild replaces a sharded connection whose master no longer serves its
// slot: its listeners are woken now, and the slot's channels are subscribed
// on a new connection, which go-redis opens to the slot's master in the
// slot map, reloaded meanwhile. A master that refuses it again makes its
// dispatch rebuild it again, later.
func (s *subscriptions) rebuild(old *pubsubConn) {
	s.c.mu.Lock()
	targets := s.loseLocked(old)
	s.c.mu.Unlock()
	for _, l := range targets {
		l.deliver("u")
	}
	// Wait for the slot map to name another master: the demoted one, a
	// replica now, would accept the SSUBSCRIBE of a new connection routed
	// by the old map, and nobody SPUBLISHes there. Past rebuildMost the
	// connection is rebuilt anyway; a refusal rebuilds it again.
	pause := min(rebuildFirst<<min(old.refusals, 8), rebuildMost)
	for waited := time.Duration(0); ; waited += pause {
		s.sharded.ReloadState(s.c.life)
		if sleep.For(s.c.life, pause) != nil {
			return
		}
		if waited+pause >= rebuildMost || s.masterOf(old.key) != old.master {
			break
		}
	}

	s.c.mu.Lock()
	if s.conns[old.slot] != old { // closed meanwhile
		s.c.mu.Unlock()
		return
	}
	// Subscriptions may have joined old meanwhile: they move too.
	targets = s.loseLocked(old)
	s.moveLocked(old)
	s.c.mu.Unlock()
	for _, l := range targets {
		l.deliver("u")
	}
}

// moveLocked closes old and subscribes its channels on a new connection to
// their slot.
func (s *subscriptions) moveLocked(old *pubsubConn) {
	delete(s.conns, old.slot)
	_ = old.ps.Close()
	var channels []string
	for channel, sub := range s.byChannel {
		if sub.conn == old {
			channels = append(channels, channel)
		}
	}
	if len(channels) == 0 {
		return
	}
	conn := s.newConn(old.slot, old.key)
	conn.refusals = old.refusals + 1
	// An error is go-redis's to retry when its dispatch reads it.
	_ = conn.ps.SSubscribe(s.c.life, channels...)
	s.startLocked(conn)
	for _, channel := range channels {
		s.byChannel[channel].conn = conn
	}
	conn.channels = len(channels)
}

// closeIdle closes a sharded connection nothing is subscribed on, once it
// has been idle for pubsubIdle: a lock's next waiter is likely to come
// back to the same slot soon.
func (s *subscriptions) closeIdle(conn *pubsubConn) bool {
	if s.sharded == nil {
		return false
	}
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	if conn.channels > 0 || s.conns[conn.slot] != conn {
		return false
	}
	delete(s.conns, conn.slot)
	_ = conn.ps.Close()
	return true
}

// close shuts the pub/sub connections; their dispatch goroutines end.
func (s *subscriptions) close() error {
	s.c.mu.Lock()
	conns := s.conns
	s.conns = make(map[int]*pubsubConn)
	s.c.mu.Unlock()
	var errs []error
	for _, conn := range conns {
		if err := conn.ps.Close(); err != nil && !errors.Is(err, redis.ErrClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
