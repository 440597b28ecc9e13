package inventory

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// The attempts at resolving an outcome, each bounded by releaseTimeout,
// are spaced from resolveRetry, doubling up to resolveRetryMax: a server
// that answers slowly because it is overloaded gets a few requests per
// unknown outcome, not one every resolveRetry.
const (
	resolveRetry    = 100 * time.Millisecond
	resolveRetryMax = time.Second
)

// resolver resolves, in the background, the acquires and releases of the
// lock-server stages whose outcome is unknown — a reply lost, a deadline
// reached while the request was on its way — so that no row, key, lease or
// node is left for nobody to remove: each attempt removes the owner's own
// (a row or key by its owner, a lease by its id, a node by its name), and
// is retried until it is gone. Close stops the retries: the process ends,
// and with it the server's leases and sessions (the mysql stage's row
// stays, the seed's flaw).
type resolver struct {
	log  *slog.Logger
	stop context.Context
	halt context.CancelFunc
	runs sync.WaitGroup
}

func newResolver(log *slog.Logger) *resolver {
	r := &resolver{log: log}
	r.stop, r.halt = context.WithCancel(context.Background())
	return r
}

// resolve runs attempt until it reports done, each attempt bounded by
// releaseTimeout, until the resolver is closed.
func (r *resolver) resolve(what string, attempt func(ctx context.Context) (done bool, err error)) {
	if r.stop.Err() != nil {
		return // closed: the process is ending
	}
	r.runs.Go(func() {
		wait := resolveRetry
		for tries := 1; ; tries++ {
			ctx, cancel := context.WithTimeout(r.stop, releaseTimeout)
			done, err := attempt(ctx)
			cancel()
			if done {
				r.log.Debug("resolved an unknown lock outcome", "what", what, "tries", tries)
				return
			}
			if tries == 1 || tries%50 == 0 {
				r.log.Warn("resolve an unknown lock outcome: retrying", "what", what, "tries", tries, "err", err)
			}
			select {
			case <-time.After(wait):
			case <-r.stop.Done():
				return
			}
			wait = min(2*wait, resolveRetryMax)
		}
	})
}

// close stops the retries and waits for them.
func (r *resolver) close() {
	r.halt()
	r.runs.Wait()
}
