package httpapi

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// maxReleases bounds the keys waiting to be freed: past it, a key that
// sold nothing keeps its marker for the idempotency TTL (logged), as
// before there was a releaser.
const maxReleases = 10000

// releaser frees, in the background, the keys of requests that provably
// sold nothing but whose marker's deletion Redis did not take (an outage
// during the settle): one goroutine, while any wait, deletes each key's
// marker unless it is no longer ours (idempotency_release.lua), however
// often or late it runs, until Redis answers. Close stops it.
type releaser struct {
	rdb  redis.UniversalClient
	log  *slog.Logger
	stop context.Context
	halt context.CancelFunc

	mu      sync.Mutex
	pending map[string]string // idempotency key → our marker's beginning
	running bool
	runs    sync.WaitGroup
}

func newReleaser(rdb redis.UniversalClient, log *slog.Logger) *releaser {
	r := &releaser{rdb: rdb, log: log, pending: make(map[string]string)}
	r.stop, r.halt = context.WithCancel(context.Background())
	return r
}

// add queues the release of rkey's marker.
func (r *releaser) add(rkey, marker string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stop.Err() != nil {
		return
	}
	if len(r.pending) >= maxReleases {
		r.log.Error("idempotency: too many keys waiting to be freed; this one keeps its marker", "key", rkey)
		return
	}
	r.pending[rkey] = marker
	if !r.running {
		r.running = true
		r.runs.Go(r.run)
	}
}

// run releases the waiting keys, again after a pause while Redis fails,
// until none wait or the releaser closes.
func (r *releaser) run() {
	wait, prev := settleBackoff, settleBackoff
	for {
		select {
		case <-time.After(wait):
		case <-r.stop.Done():
			return
		}
		r.mu.Lock()
		batch := make(map[string]string, len(r.pending))
		for k, m := range r.pending {
			batch[k] = m
		}
		r.mu.Unlock()
		failed := false
		for rkey, marker := range batch {
			ctx, cancel := context.WithTimeout(r.stop, unclaimTimeout)
			err := releasePendingScript.Run(ctx, r.rdb, []string{rkey}, marker).Err()
			cancel()
			if err != nil {
				failed = true
				break // Redis is still out: the rest wait for the next round
			}
			r.mu.Lock()
			if r.pending[rkey] == marker {
				delete(r.pending, rkey)
			}
			r.mu.Unlock()
		}
		if wait = settleBackoff; failed {
			wait = min(2*prev, time.Second)
		}
		prev = wait
		r.mu.Lock()
		if len(r.pending) == 0 {
			r.running = false
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
	}
}

// close stops the releases and waits for them; the keys still waiting keep
// their markers.
func (r *releaser) close() {
	r.halt()
	r.runs.Wait()
}
