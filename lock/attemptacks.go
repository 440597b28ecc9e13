package lock

import (
	"slices"
	"sync"
	"time"
)

// attemptAcks are, per counter key, the attempts of a Client whose callers
// have their reply and whose requests nobody will send again: the next
// call on the counter carries a few (attempts.lua drops their replies), so
// that the record holds the calls in flight and the few that may still be
// re-sent or arrive late, not every call of the window (which cost a hash
// field and a zset entry per call for the whole window: about 162 s with
// go-redis's defaults).
//
// A reply that came back in less than the client's read and write
// timeouts (quickReply) came from the request's only write: go-redis
// re-sends after an error, and the only errors after which an earlier
// write may still run are those timeouts (a connection that failed
// otherwise ran the request before the error, or never will). A slower
// reply, an error and a cancelled attempt are not acknowledged: their
// record ends with the window.
type attemptAcks struct {
	mu    sync.Mutex
	byKey map[string][]string
}

const (
	// acksPerCall is the most acknowledgements a call carries: more than
	// the one each call adds, so the pending ones drain.
	acksPerCall = 8
	// maxPendingAcks bounds the acknowledgements a Client keeps per key,
	// for a counter it stopped calling; the oldest are dropped (their
	// records end with the window).
	maxPendingAcks = 64
)

// add acknowledges the attempt id of the counter key.
func (a *attemptAcks) add(key, id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.byKey == nil {
		a.byKey = make(map[string][]string)
	}
	ids := append(a.byKey[key], id)
	if len(ids) > maxPendingAcks {
		ids = ids[len(ids)-maxPendingAcks:]
	}
	a.byKey[key] = ids
}

// take removes and returns up to acksPerCall acknowledgements of key.
func (a *attemptAcks) take(key string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	ids := a.byKey[key]
	if len(ids) == 0 {
		return nil
	}
	n := min(len(ids), acksPerCall)
	taken := slices.Clone(ids[:n])
	if n == len(ids) {
		delete(a.byKey, key)
	} else {
		a.byKey[key] = ids[n:]
	}
	return taken
}

// quickReply is the longest a reply may take to come from its request's
// only write: the shorter of the client's read and write timeouts.
func quickReply(b resendBudget) time.Duration {
	return min(b.read, b.write)
}
