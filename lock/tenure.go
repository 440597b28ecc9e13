package lock

import "context"

// Tenure identifies one uninterrupted hold of a lock in Redis by a Client.
// Two held contexts with equal Tenures were granted while the lock never
// left the Client: handles it passed locally, with no Redis round trip, and
// so with no other Client's hold in between.
type Tenure struct{ h *hold }

// TenureOf is the Tenure of the hold behind held; ok is false for a context
// that is not a held context of this package, or whose hold ended.
func TenureOf(held context.Context) (t Tenure, ok bool) {
	h, ok := held.Value(holdKey{}).(*hold)
	if !ok || !h.alive() || held.Err() != nil {
		return Tenure{}, false
	}
	return Tenure{h}, true
}
