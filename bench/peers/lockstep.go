package main

import (
	"errors"
	"fmt"

	"github.com/lockstep/lockstep/lock"
	"github.com/redis/go-redis/v9"
)

// lockstepContenders are lockstep's configurations: its default, with
// cohorting off (every unlock releases in Redis, as Redisson does) to show
// what cohorting buys, and with other bounds of local passes, to choose the
// default by measurement.
func lockstepContenders() []contender {
	return []contender{
		{
			name:  lockstepDefault,
			about: "lockstep lock.New(rdb) defaults, one Mutex handle per goroutine",
			open:  func(t target) (session, error) { return openLockstep(t) },
		},
		{
			name:  "lockstep-nocohort",
			about: "lockstep lock.New(rdb, lock.WithMaxLocalPasses(0)): cohorting off",
			open: func(t target) (session, error) {
				return openLockstep(t, lock.WithMaxLocalPasses(0))
			},
		},
		lockstepPasses(16),
		lockstepPasses(64),
	}
}

// lockstepPasses is lockstep with a cohort passing the lock at most n
// times in a row while another process waits.
func lockstepPasses(n int) contender {
	return contender{
		name:  fmt.Sprintf("lockstep-passes%d", n),
		about: fmt.Sprintf("lockstep lock.New(rdb, lock.WithMaxLocalPasses(%d))", n),
		open:  func(t target) (session, error) { return openLockstep(t, lock.WithMaxLocalPasses(n)) },
	}
}

// lockstepSession is one lock.Client on its own counted go-redis client; its
// Mutex handles already have the Lock/Unlock shape of locker.
type lockstepSession struct {
	rdb    *redis.Client
	client *lock.Client
}

func openLockstep(t target, opts ...lock.Option) (session, error) {
	rdb := goredisClient(t)
	return &lockstepSession{rdb: rdb, client: lock.New(rdb, opts...)}, nil
}

func (s *lockstepSession) Locker(key string) locker { return s.client.Mutex(key) }

// Close closes the lock client first: it does not unlock, and every handle
// is unlocked by then.
func (s *lockstepSession) Close() error {
	return errors.Join(s.client.Close(), s.rdb.Close())
}
