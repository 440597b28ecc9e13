package inventory

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// The sweeps of a server's unknown outcomes, each bounded by
// releaseTimeout, are spaced from resolveRetry, doubling up to
// resolveRetryMax while the server does not answer: a server that is down
// or overloaded gets one sweep a second from this process, however many
// outcomes wait.
const (
	resolveRetry    = 100 * time.Millisecond
	resolveRetryMax = time.Second
)

// maxPending bounds the unknown outcomes one server's queue holds: past
// it, the newest is not resolved (logged), and what it left stays as a
// crashed holder's would (a row until a reset, a lease until its TTL).
const maxPending = 10000

// sweepFunc removes, in as few requests as it can, whatever the calls
// named by keys may have left on one server (a row by its owner, a lease
// by its id). It may run again for the same keys, late or twice: each
// removal names its own owner's leftovers only. An error means the server
// did not answer for all of them: the sweep runs again later.
type sweepFunc func(ctx context.Context, keys []string) error

// resolver resolves, in the background, the acquires and releases of the
// lock-server stages whose outcome is unknown — a reply lost, a deadline
// reached after the request was sent (internal/outcome: a call never sent
// is not resolved) — so that no row, key, lease or node is left for nobody
// to remove. Each server has one queue (resolutions) and at most one
// goroutine sweeping it, however many outcomes wait: an outage under load
// costs one sweep a second, not one goroutine and one request per failed
// sale. Close stops the sweeps: the process ends, and with it the
// server's leases and sessions (the mysql stage's rows stay, the seed's
// flaw).
type resolver struct {
	log  *slog.Logger
	stop context.Context
	halt context.CancelFunc
	runs sync.WaitGroup
	// orders is the order stages' unknown outcomes (a void to confirm, a
	// give-back to send again), each an attempt of its own.
	orders *attempts
}

func newResolver(log *slog.Logger) *resolver {
	r := &resolver{log: log}
	r.stop, r.halt = context.WithCancel(context.Background())
	r.orders = r.attempts("order outcomes")
	return r
}

// resolve queues attempt under key, to run until it says done: the order
// stages' outcomes, swept by one goroutine in an outage however many wait.
func (r *resolver) resolve(key string, attempt func(ctx context.Context) (done bool, err error)) {
	r.orders.add(key, attempt)
}

// resolveUnlessQueued is resolve, unless an attempt is queued under key
// already: that one stays (it may hold a buyer's guard).
func (r *resolver) resolveUnlessQueued(key string, attempt func(ctx context.Context) (done bool, err error)) {
	r.orders.addUnlessQueued(key, attempt)
}

// queue is the queue of unknown outcomes of one server, named what.
func (r *resolver) queue(what string, sweep sweepFunc) *resolutions {
	return &resolutions{r: r, what: what, sweep: sweep, pending: make(map[string]time.Time)}
}

// close stops the sweeps and waits for them.
func (r *resolver) close() {
	r.halt()
	r.runs.Wait()
}

// resolutions is one server's unknown outcomes and the one goroutine, while
// there are any, that sweeps them.
type resolutions struct {
	r     *resolver
	what  string
	sweep sweepFunc

	mu       sync.Mutex
	pending  map[string]time.Time // key → until when what it names may still appear
	sweeping bool
	dropped  int
}

// add queues key, whose leftovers may still appear until until (a request
// that may arrive late); a zero until: one sweep that succeeds resolves it.
// It answers false when the key was not queued (closed, or the queue full).
func (q *resolutions) add(key string, until time.Time) bool {
	if q.r.stop.Err() != nil {
		return false // closed: the process is ending
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, queued := q.pending[key]; !queued && len(q.pending) >= maxPending {
		q.dropped++
		if q.dropped == 1 || q.dropped%1000 == 0 {
			q.r.log.Error("resolve unknown lock outcomes: queue full, not resolved", "what", q.what, "key", key, "dropped", q.dropped)
		}
		return false
	}
	q.pending[key] = until
	if !q.sweeping {
		q.sweeping = true
		q.r.runs.Go(q.run)
	}
	return true
}

// len is how many outcomes wait.
func (q *resolutions) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.pending)
}

// run sweeps until the queue is empty or the resolver is closed.
func (q *resolutions) run() {
	wait := resolveRetry
	for tries := 1; ; tries++ {
		select {
		case <-time.After(wait):
		case <-q.r.stop.Done():
			return
		}
		q.mu.Lock()
		keys := make([]string, 0, len(q.pending))
		for k := range q.pending {
			keys = append(keys, k)
		}
		q.mu.Unlock()
		started := time.Now()
		ctx, cancel := context.WithTimeout(q.r.stop, releaseTimeout)
		err := q.sweep(ctx, keys)
		cancel()
		if err != nil {
			if tries == 1 || tries%50 == 0 {
				q.r.log.Warn("resolve unknown lock outcomes: retrying", "what", q.what, "pending", len(keys), "tries", tries, "err", err)
			}
			wait = min(2*wait, resolveRetryMax)
			continue
		}
		wait = resolveRetry
		q.mu.Lock()
		for _, k := range keys {
			if started.After(q.pending[k]) { // swept after it could still appear
				delete(q.pending, k)
			}
		}
		if len(q.pending) == 0 {
			q.sweeping = false
			q.mu.Unlock()
			q.r.log.Debug("resolved unknown lock outcomes", "what", q.what, "keys", len(keys), "tries", tries)
			return
		}
		q.mu.Unlock()
	}
}

// attempts is a queue of resolutions that are each an attempt of their own
// (an order's void, a give-back), not a removal one request can batch. A
// sweep runs them one after another and stops at the first that fails: in
// an outage that costs one request a sweep, not one per outcome.
type attempts struct {
	q *resolutions

	mu      sync.Mutex
	attempt map[string]func(ctx context.Context) (done bool, err error)
}

func (r *resolver) attempts(what string) *attempts {
	a := &attempts{attempt: make(map[string]func(context.Context) (bool, error))}
	a.q = r.queue(what, a.sweep)
	return a
}

// add queues attempt under key; an attempt already queued under key is
// replaced (both resolve the same outcome).
func (a *attempts) add(key string, attempt func(ctx context.Context) (bool, error)) {
	a.put(key, attempt, true)
}

// addUnlessQueued is add, keeping an attempt already queued under key.
func (a *attempts) addUnlessQueued(key string, attempt func(ctx context.Context) (bool, error)) {
	a.put(key, attempt, false)
}

func (a *attempts) put(key string, attempt func(ctx context.Context) (bool, error), replace bool) {
	a.mu.Lock()
	if _, queued := a.attempt[key]; queued && !replace {
		a.mu.Unlock()
		return
	}
	a.attempt[key] = attempt
	a.mu.Unlock()
	if !a.q.add(key, time.Time{}) {
		a.mu.Lock()
		delete(a.attempt, key)
		a.mu.Unlock()
	}
}

func (a *attempts) sweep(ctx context.Context, keys []string) error {
	for _, key := range keys {
		a.mu.Lock()
		attempt := a.attempt[key]
		a.mu.Unlock()
		if attempt == nil {
			continue // done in an earlier sweep
		}
		done, err := attempt(ctx)
		if !done {
			if err == nil {
				err = fmt.Errorf("%s: not done yet", key)
			}
			return err
		}
		a.mu.Lock()
		delete(a.attempt, key)
		a.mu.Unlock()
	}
	return nil
}
