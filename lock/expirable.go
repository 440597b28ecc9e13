package lock

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// The scripts of a PermitExpirableSemaphore.
var (
	expAcquireScript = loadCounterScript("leases.lua", "expirable_acquire.lua")
	expReleaseScript = loadCounterScript("leases.lua", "expirable_release.lua")
	expLeaseScript   = loadCounterScript("leases.lua", "expirable_lease.lua")
	expConsumeScript = loadCounterScript("leases.lua", "expirable_consume.lua")
)

// PermitExpirableSemaphore is Redisson's RPermitExpirableSemaphore: a
// semaphore whose permits are leased. Each permit taken has an id, which
// Release gives back; a permit whose lease ends comes back by itself, so a
// holder that crashed leaks nothing for longer than its lease. The leases
// end by Redis's clock: the next acquisition or AvailablePermits after a
// lease's end counts the permit free again, and a waiter sleeps no longer
// than the first lease's end, so a waiter takes an expired permit within
// one round trip of its lease's end.
type PermitExpirableSemaphore struct {
	k counter
}

// PermitExpirableSemaphore returns a handle on the semaphore called name,
// which keys as a lock's name does (doc.go, "Keys"); its taken permits are
// kept under "~permits:<key>".
func (c *Client) PermitExpirableSemaphore(name string) *PermitExpirableSemaphore {
	k := newCounter(c, name)
	k.keys = append(k.keys, ownKey("permits", k.key))
	return &PermitExpirableSemaphore{k: k}
}

// TrySetPermits sets the number of permits to n unless the semaphore
// exists, and reports whether it did.
func (s *PermitExpirableSemaphore) TrySetPermits(ctx context.Context, n int) (bool, error) {
	ok, err := s.k.trySet(ctx, n)
	if err != nil {
		return false, fmt.Errorf("lock: set the permits of semaphore %q: %w", s.k.name, err)
	}
	return ok, nil
}

// AddPermits adds n permits (n < 0 removes them) and wakes the waiters.
func (s *PermitExpirableSemaphore) AddPermits(ctx context.Context, n int) error {
	if err := s.k.call(ctx, semAddScript, n).Err(); err != nil {
		return fmt.Errorf("lock: add %d permits to semaphore %q: %w", n, s.k.name, err)
	}
	return nil
}

// AvailablePermits is the number of permits neither taken nor leased;
// the permits whose lease ended count as available (they come back now).
func (s *PermitExpirableSemaphore) AvailablePermits(ctx context.Context) (int, error) {
	n, err := s.k.run(ctx, expLeaseScript, "", 0, "").Int()
	if err != nil {
		return 0, fmt.Errorf("lock: read semaphore %q: %w", s.k.name, err)
	}
	return n, nil
}

// Acquire takes one permit leased for lease, waiting until it can or ctx
// ends, and returns its id.
func (s *PermitExpirableSemaphore) Acquire(ctx context.Context, lease time.Duration) (string, error) {
	id, _, err := s.TryAcquire(ctx, -1, lease)
	return id, err
}

// TryAcquire takes one permit leased for lease, waiting up to wait for it
// (0: no wait; negative: until ctx ends), and returns its id and whether
// it took one. On an error it took none: an attempt whose outcome is
// unknown is given up before TryAcquire returns.
func (s *PermitExpirableSemaphore) TryAcquire(ctx context.Context, wait, lease time.Duration) (string, bool, error) {
	ids, ok, err := s.TryAcquireN(ctx, 1, wait, lease)
	if !ok {
		return "", ok, err
	}
	return ids[0], true, nil
}

// AcquireN takes n permits at once, each leased for lease, waiting until
// it can or ctx ends, and returns their ids (Redisson's acquire(permits,
// leaseTime)).
func (s *PermitExpirableSemaphore) AcquireN(ctx context.Context, n int, lease time.Duration) ([]string, error) {
	ids, _, err := s.TryAcquireN(ctx, n, -1, lease)
	return ids, err
}

// TryAcquireN takes n permits at once, each leased for lease, waiting up
// to wait for them as TryAcquire does, and returns their ids and whether
// it took them (Redisson's tryAcquire(permits, waitTime, leaseTime)). It
// takes all n or none; each is given back by Release with its id, or at
// its lease's end.
func (s *PermitExpirableSemaphore) TryAcquireN(ctx context.Context, n int, wait, lease time.Duration) ([]string, bool, error) {
	if n < 1 {
		return nil, false, ErrInvalidPermits
	}
	if lease <= 0 {
		return nil, false, fmt.Errorf("lock: lease %v of semaphore %q: %w", lease, s.k.name, ErrInvalidLease)
	}
	k := &s.k
	leaseMs := lease.Milliseconds()
	try := func(ctx context.Context, id string) (bool, int, time.Duration, error) {
		res, err := k.run(ctx, expAcquireScript, id, leaseMs, n).Result()
		if err != nil {
			return false, 0, 0, err
		}
		// Not taken: the permits free and the ms until the first lease ends.
		if busy, ok := res.([]any); ok && len(busy) == 2 {
			free, _ := busy[0].(int64)
			next, _ := busy[1].(int64)
			return false, int(free), time.Duration(next) * time.Millisecond, nil
		}
		return res == acquiredOK, -1, -1, nil
	}
	cancel := func(ctx context.Context, id string) error {
		return k.run(ctx, expReleaseScript, id, 0, id, "cancel", n).Err()
	}
	id, ok, err := k.acquire(ctx, n, wait, try, cancel)
	if !ok {
		return nil, false, err
	}
	return permitIDs(id, n), true, nil
}

// permitIDs are the ids of the n permits the attempt id took (leases.lua,
// permitId).
func permitIDs(id string, n int) []string {
	if n == 1 {
		return []string{id}
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = id + ":" + strconv.Itoa(i+1)
	}
	return ids
}

// Release gives the permit id back and wakes the waiters; ErrPermitNotHeld
// when it is not taken (released already, or its lease ended). A request
// go-redis sends again gives back once and answers as the first run.
func (s *PermitExpirableSemaphore) Release(ctx context.Context, id string) error {
	res, err := s.k.call(ctx, expReleaseScript, 0, id, "release").Text()
	if err != nil {
		return fmt.Errorf("lock: release permit %s of semaphore %q: %w", id, s.k.name, err)
	}
	if res != "1" {
		return fmt.Errorf("lock: release permit %s of semaphore %q: %w", id, s.k.name, ErrPermitNotHeld)
	}
	return nil
}

// Consume takes the taken permits ids out of the semaphore for good, in
// one step: their leases end without giving them back, and the permits
// available do not change (lockstep's, not Redisson's: a permit that
// stands for a unit sold, once its order is written). It returns how many
// of them it consumed; one whose lease ended, or that was released, is
// not taken and stays among the available permits. A request go-redis
// sends again consumes once and answers as the first run. On an error the
// permits may or may not be consumed: those that are not come back at
// their lease's end.
func (s *PermitExpirableSemaphore) Consume(ctx context.Context, ids ...string) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	more := make([]any, len(ids))
	for i, id := range ids {
		more[i] = id
	}
	n, err := s.k.call(ctx, expConsumeScript, 0, more...).Int()
	if err != nil {
		return 0, fmt.Errorf("lock: consume %d permits of semaphore %q: %w", len(ids), s.k.name, err)
	}
	return n, nil
}

// UpdateLeaseTime leases the permit id for lease from now, and reports
// whether it is still taken (false: released, or its lease ended).
func (s *PermitExpirableSemaphore) UpdateLeaseTime(ctx context.Context, id string, lease time.Duration) (bool, error) {
	if lease <= 0 {
		return false, fmt.Errorf("lock: lease %v of semaphore %q: %w", lease, s.k.name, ErrInvalidLease)
	}
	n, err := s.k.run(ctx, expLeaseScript, "", lease.Milliseconds(), id).Int()
	if err != nil {
		return false, fmt.Errorf("lock: lease permit %s of semaphore %q: %w", id, s.k.name, err)
	}
	return n == 1, nil
}
