package frontdoor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lockstep/lockstep/inventory"
	"github.com/redis/go-redis/v9"
)

// SoldOutMark is the sold-out mark (内存标记), a guard in front of any
// stage: once this replica learns that a stage's SKU is sold out it answers
// sold_out from memory, with no Redis round trip, until stock comes back.
//
// How long it can refuse a sale the stock could serve:
//   - a reset or give-back clears the mark on every replica through
//     inventory.StockBackChannel: for as long as the message takes to arrive;
//   - a lost message: until the mark's TTL ends;
//   - a lost subscription: never, as no mark is kept or learned while Run
//     is not subscribed, and every mark is dropped when it (re)subscribes;
//   - a sold-out answer that left Redis before a reset and arrives after
//     the reset's message: never, as a clear voids every answer of a sale
//     begun before it (Begin's epoch).
type SoldOutMark struct {
	rdb redis.UniversalClient
	ttl time.Duration
	now func() time.Time

	mu        sync.Mutex
	marks     map[markKey]time.Time // until when each mark holds
	epoch     uint64                // bumped by every clear
	listening bool                  // Run is subscribed to inventory.StockBackChannel

	// lose, set by tests, drops a clearing message as if it never came.
	lose func(*redis.Message) bool
}

type markKey struct{ stage, sku string }

// NewSoldOutMark is a mark whose entries last ttl; it learns nothing until
// Run subscribes.
func NewSoldOutMark(rdb redis.UniversalClient, ttl time.Duration) *SoldOutMark {
	return &SoldOutMark{rdb: rdb, ttl: ttl, now: time.Now, marks: map[markKey]time.Time{}}
}

// Marked reports whether stage's sku is marked sold out: the caller
// answers sold_out without asking the stage.
func (m *SoldOutMark) Marked(stage, sku string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	until, ok := m.marks[markKey{stage, sku}]
	if ok && !m.now().Before(until) {
		delete(m.marks, markKey{stage, sku})
		return false
	}
	return ok
}

// Begin is taken before a sale asks the stage; Learn takes it back.
func (m *SoldOutMark) Begin() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.epoch
}

// Learn marks stage's sku sold out: a sale begun at epoch found no stock.
// An answer older than the latest clear, or learned while not subscribed,
// is ignored.
func (m *SoldOutMark) Learn(stage, sku string, epoch uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.listening && epoch == m.epoch {
		m.marks[markKey{stage, sku}] = m.now().Add(m.ttl)
	}
}

// Size is how many marks hold now.
func (m *SoldOutMark) Size() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	now, n := m.now(), 0
	for _, until := range m.marks {
		if now.Before(until) {
			n++
		}
	}
	return n
}

func (m *SoldOutMark) clear(listening bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.marks)
	m.epoch++
	m.listening = listening
}

// Run listens on inventory.StockBackChannel, where every return of stock
// is announced (a message clears every mark), until ctx ends; its caller owns it.
// go-redis resubscribes after a lost connection; every mark is dropped
// then, as a message may have been missed.
func (m *SoldOutMark) Run(ctx context.Context) error {
	ps := m.rdb.Subscribe(ctx, inventory.StockBackChannel)
	// Receive does not watch ctx while it reads: closing ends the read.
	stop := context.AfterFunc(ctx, func() { _ = ps.Close() })
	defer stop()
	defer func() { _ = ps.Close() }()
	defer m.clear(false)
	for {
		msg, err := ps.Receive(ctx)
		if err != nil {
			m.clear(false)
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, redis.ErrClosed) {
				return fmt.Errorf("frontdoor: sold-out mark: %w", err)
			}
			// A lost connection: the next Receive reconnects, resubscribes.
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		switch msg := msg.(type) {
		case *redis.Subscription:
			m.clear(msg.Kind == "subscribe")
		case *redis.Message:
			if m.lose == nil || !m.lose(msg) {
				m.clear(true)
			}
		}
	}
}

// Listening reports whether Run is subscribed, so marks are kept.
func (m *SoldOutMark) Listening() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.listening
}
