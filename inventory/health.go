package inventory

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	healthInterval = 200 * time.Millisecond
	healthTimeout  = 300 * time.Millisecond
	// healthFailures in a row mark Redis down: one slow PING under load is
	// not an outage.
	healthFailures = 2
)

// errRedisDown is the cause of the waits health cancels.
var errRedisDown = errors.New("redis is down")

// health PINGs Redis in the background so that requests waiting for a lock
// stop waiting when Redis goes away: a waiter blocked on pub/sub, or queued
// behind a holder of its own process, would otherwise only notice when its
// wait budget ran out. While Redis is down, new waits fail at once.
type health struct {
	rdb redis.UniversalClient

	mu     sync.Mutex
	up     context.Context // cancelled with errRedisDown when Redis is seen down
	cancel context.CancelCauseFunc

	stop context.CancelFunc
	done sync.WaitGroup
}

func newHealth(rdb redis.UniversalClient) *health {
	h := &health{rdb: rdb}
	h.up, h.cancel = context.WithCancelCause(context.Background())
	ctx, stop := context.WithCancel(context.Background())
	h.stop = stop
	h.done.Go(func() { h.watch(ctx) })
	return h
}

func (h *health) watch(ctx context.Context) {
	tick := time.NewTicker(healthInterval)
	defer tick.Stop()
	failures := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		pingCtx, cancel := context.WithTimeout(ctx, healthTimeout)
		err := h.rdb.Ping(pingCtx).Err()
		cancel()
		if ctx.Err() != nil {
			return
		}
		h.mu.Lock()
		switch {
		case err == nil && h.up.Err() != nil: // back up
			h.up, h.cancel = context.WithCancelCause(context.Background())
			failures = 0
		case err == nil:
			failures = 0
		default:
			if failures++; failures >= healthFailures {
				h.cancel(errRedisDown)
			}
		}
		h.mu.Unlock()
	}
}

// bound returns ctx, also cancelled (cause errRedisDown) if Redis is seen
// down before release is called.
func (h *health) bound(ctx context.Context) (context.Context, func()) {
	h.mu.Lock()
	up := h.up
	h.mu.Unlock()
	bounded, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(up, func() { cancel(context.Cause(up)) })
	return bounded, func() { stop(); cancel(nil) }
}

func (h *health) close() {
	h.stop()
	h.done.Wait()
	h.cancel(errRedisDown)
}
