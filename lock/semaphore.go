package lock

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// Semaphore is Redisson's RSemaphore: a number of permits in Redis, taken
// and given back by any process, with no owner. Waiters wait on the
// Client's shared pub/sub connection; a Release, AddPermits or
// TrySetPermits wakes as many as the permits free serve (waitqueue.go).
//
// Permits are not leased: a process that dies holding some leaves them
// taken for ever (PermitExpirableSemaphore gives them back).
type Semaphore struct {
	k counter
}

// Semaphore returns a handle on the semaphore called name, which keys as a
// lock's name does (doc.go, "Keys"). Handles are cheap and safe for
// concurrent use.
func (c *Client) Semaphore(name string) *Semaphore {
	return &Semaphore{k: newCounter(c, name)}
}

// Name is the name the semaphore was created with.
func (s *Semaphore) Name() string { return s.k.name }

// TrySetPermits sets the number of permits to n unless the semaphore
// exists, and reports whether it did. A semaphore whose permits were all
// taken exists (with 0): setting it again does nothing, as in Redisson.
func (s *Semaphore) TrySetPermits(ctx context.Context, n int) (bool, error) {
	ok, err := s.k.trySet(ctx, n)
	if err != nil {
		return false, fmt.Errorf("lock: set the permits of semaphore %q: %w", s.k.name, err)
	}
	return ok, nil
}

// AddPermits adds n permits (n < 0 removes them; the number may go
// below zero) and wakes the waiters.
func (s *Semaphore) AddPermits(ctx context.Context, n int) error {
	if err := s.k.call(ctx, semAddScript, n).Err(); err != nil {
		return fmt.Errorf("lock: add %d permits to semaphore %q: %w", n, s.k.name, err)
	}
	return nil
}

// Release gives n permits back and wakes the waiters. Any process may
// release, whether it acquired or not, as in Redisson. On an error the
// permits may or may not have been given back (doc.go, "Semaphores").
func (s *Semaphore) Release(ctx context.Context, n int) error {
	if n < 1 {
		return ErrInvalidPermits
	}
	if err := s.k.call(ctx, semAddScript, n).Err(); err != nil {
		return fmt.Errorf("lock: release %d permits of semaphore %q: %w", n, s.k.name, err)
	}
	return nil
}

// AvailablePermits is the number of permits not taken.
func (s *Semaphore) AvailablePermits(ctx context.Context) (int, error) {
	n, err := s.k.get(ctx)
	if err != nil {
		return 0, fmt.Errorf("lock: read semaphore %q: %w", s.k.name, err)
	}
	return n, nil
}

// Drain takes every available permit and returns how many it took.
func (s *Semaphore) Drain(ctx context.Context) (int, error) {
	res, err := s.k.call(ctx, semDrainScript, 0).Text()
	if err == nil {
		var n int
		if n, err = strconv.Atoi(res); err == nil {
			return n, nil
		}
	}
	return 0, fmt.Errorf("lock: drain semaphore %q: %w", s.k.name, err)
}

// Acquire takes n permits, waiting until it can or ctx ends.
func (s *Semaphore) Acquire(ctx context.Context, n int) error {
	_, err := s.TryAcquire(ctx, n, -1)
	return err
}

// TryAcquire takes n permits, waiting up to wait for them (0: no wait;
// negative: until ctx ends), and reports whether it took them. On an
// error it took none: an attempt whose outcome is unknown is given up
// (semaphore_cancel.lua) before TryAcquire returns.
func (s *Semaphore) TryAcquire(ctx context.Context, n int, wait time.Duration) (bool, error) {
	if n < 1 {
		return false, ErrInvalidPermits
	}
	k := &s.k
	try := func(ctx context.Context, id string) (bool, int, time.Duration, error) {
		res, err := k.run(ctx, semAcquireScript, id, n).Result()
		free, _ := res.(int64) // the permits free when it did not take
		return res == acquiredOK, int(free), -1, err
	}
	cancel := func(ctx context.Context, id string) error {
		return k.run(ctx, semCancelScript, id, n).Err()
	}
	if _, ok, err := k.acquire(ctx, n, wait, try, cancel); err != nil || !ok {
		return false, err
	}
	return true, nil
}
