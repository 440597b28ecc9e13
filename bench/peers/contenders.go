package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"
)

// locker is one owner of a lock: one per goroutine, as each library expects.
// Lock waits until acquired or ctx is done.
type locker interface {
	Lock(ctx context.Context) error
	Unlock(ctx context.Context) error
}

// session is one contender's client, opened on the shared server and closed
// before the next contender runs.
type session interface {
	Locker(key string) locker
	Close() error
}

// target is what a contender needs to connect: the server, a dialer that
// counts the requests its client writes, and the server's features.
type target struct {
	addr     string
	requests *requestCounter
	version  string
	// lease is the expiry given to locks that need one; generous enough never
	// to run out during a run, so expiry never decides an acquisition.
	lease time.Duration
}

// contender is one lock library in one configuration.
type contender struct {
	name string
	// peer is false for lockstep's own configurations.
	peer  bool
	about string
	open  func(t target) (session, error)
}

// allContenders lists every configuration the command can measure, in run
// order.
func allContenders(fastBackoff time.Duration) []contender {
	return append(peerContenders(fastBackoff), lockstepContenders()...)
}

// lockstepDefault names lockstep's default configuration, the one the
// issue's targets are about.
const lockstepDefault = "lockstep"

// peerContenders lists the peers' configurations.
func peerContenders(fastBackoff time.Duration) []contender {
	return []contender{
		{
			name: "redsync", peer: true,
			about: "redsync v4.18.1, goredis v9 pool, default options (8s expiry, 32 tries, 50-250ms random retry delay)",
			open:  openRedsync,
		},
		{
			name: "redislock-100ms", peer: true,
			about: "bsm/redislock v0.9.4, LimitRetry(LinearBackoff(100ms), 3) as in its retry example, Obtain again on ErrNotObtained",
			open: func(t target) (session, error) {
				return openRedislock(t, func() redislock.RetryStrategy {
					return redislock.LimitRetry(redislock.LinearBackoff(100*time.Millisecond), 3)
				})
			},
		},
		{
			name: "redislock-fast", peer: true,
			about: fmt.Sprintf("bsm/redislock v0.9.4, LinearBackoff(%v): its fastest retry on this machine", fastBackoff),
			open: func(t target) (session, error) {
				return openRedislock(t, func() redislock.RetryStrategy { return redislock.LinearBackoff(fastBackoff) })
			},
		},
		{
			name: "rueidislock", peer: true,
			about: "rueidis v1.0.79 rueidislock, its README's single-instance options (KeyMajority 1, NoLoopTracking on Redis >= 7.0.5)",
			open: func(t target) (session, error) {
				return openRueidislock(t, rueidislock.LockerOption{KeyMajority: 1, NoLoopTracking: noLoopTrackingSupported(t.version)})
			},
		},
		{
			name: "rueidislock-defaults", peer: true,
			about: "rueidis v1.0.79 rueidislock, zero LockerOption (KeyMajority 2: 3 keys on the one server)",
			open: func(t target) (session, error) {
				return openRueidislock(t, rueidislock.LockerOption{})
			},
		},
	}
}

// goredisClient is a go-redis client whose requests are counted.
func goredisClient(t target) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: t.addr, Dialer: t.requests.dial})
}

// redsync: usage and defaults from github.com/go-redsync/redsync v4.18.1
// README.md ("Usage": goredis.NewPool, redsync.New, NewMutex per name, Lock /
// Unlock) and redsync.go (NewMutex defaults). Its mutex holds the value of
// the current acquisition, so each goroutine gets its own. mutex.go documents
// that Lock "returns an error on failure, you may retry ... by calling this
// method again": after 32 tries it gives up with ErrFailed or *ErrTaken.
type redsyncSession struct {
	rdb *redis.Client
	rs  *redsync.Redsync
}

func openRedsync(t target) (session, error) {
	rdb := goredisClient(t)
	return &redsyncSession{rdb: rdb, rs: redsync.New(redsyncgoredis.NewPool(rdb))}, nil
}

func (s *redsyncSession) Locker(key string) locker { return &redsyncLocker{m: s.rs.NewMutex(key)} }
func (s *redsyncSession) Close() error             { return s.rdb.Close() }

type redsyncLocker struct{ m *redsync.Mutex }

func (l *redsyncLocker) Lock(ctx context.Context) error {
	for {
		err := l.m.LockContext(ctx)
		var taken *redsync.ErrTaken
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case !errors.Is(err, redsync.ErrFailed) && !errors.As(err, &taken):
			return err
		}
	}
}

func (l *redsyncLocker) Unlock(ctx context.Context) error {
	ok, err := l.m.UnlockContext(ctx)
	if err == nil && !ok {
		err = errors.New("redsync: unlock reported not held")
	}
	return err
}

// redislock: github.com/bsm/redislock v0.9.4 README.md (redislock.New over a
// go-redis client, Obtain / Release) and example_test.go
// (ExampleClient_Obtain_retry: LimitRetry(LinearBackoff(100ms), 3)). Retry
// strategies count their attempts, so each Obtain gets a fresh one; Obtain
// returns ErrNotObtained when its strategy gives up, and the caller obtains
// again, which is how a waiting Lock is built on it.
type redislockSession struct {
	rdb      *redis.Client
	client   *redislock.Client
	lease    time.Duration
	strategy func() redislock.RetryStrategy
}

func openRedislock(t target, strategy func() redislock.RetryStrategy) (session, error) {
	rdb := goredisClient(t)
	return &redislockSession{rdb: rdb, client: redislock.New(rdb), lease: t.lease, strategy: strategy}, nil
}

func (s *redislockSession) Locker(key string) locker { return &redislockLocker{s: s, key: key} }
func (s *redislockSession) Close() error             { return s.rdb.Close() }

type redislockLocker struct {
	s    *redislockSession
	key  string
	held *redislock.Lock
}

func (l *redislockLocker) Lock(ctx context.Context) error {
	for {
		held, err := l.s.client.Obtain(ctx, l.key, l.s.lease, &redislock.Options{RetryStrategy: l.s.strategy()})
		switch {
		case err == nil:
			l.held = held
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case !errors.Is(err, redislock.ErrNotObtained):
			return err
		}
	}
}

func (l *redislockLocker) Unlock(ctx context.Context) error {
	err := l.held.Release(ctx)
	l.held = nil
	return err
}

// rueidislock: github.com/redis/rueidis v1.0.79 rueidislock/README.md: one
// Locker (one rueidis client, woken by client-side-caching invalidations),
// WithContext to acquire, the returned cancel to release ("invoke cancel() to
// release the lock"); it extends its own 5s key validity while held, so it
// needs no lease from us. The README recommends KeyMajority 1 for a single
// Redis and NoLoopTracking on Redis >= 7.0.5.
type rueidislockSession struct{ locker rueidislock.Locker }

func openRueidislock(t target, opt rueidislock.LockerOption) (session, error) {
	opt.ClientOption = rueidis.ClientOption{InitAddress: []string{t.addr}, DialCtxFn: t.requests.dialRueidis}
	l, err := rueidislock.NewLocker(opt)
	if err != nil {
		return nil, fmt.Errorf("rueidislock: %w", err)
	}
	return &rueidislockSession{locker: l}, nil
}

func (s *rueidislockSession) Locker(key string) locker {
	return &rueidislockLocker{locker: s.locker, key: key}
}

func (s *rueidislockSession) Close() error { s.locker.Close(); return nil }

type rueidislockLocker struct {
	locker  rueidislock.Locker
	key     string
	release context.CancelFunc
}

func (l *rueidislockLocker) Lock(ctx context.Context) error {
	_, release, err := l.locker.WithContext(ctx, l.key)
	if err != nil {
		return err
	}
	l.release = release
	return nil
}

// Unlock releases synchronously: rueidislock's cancel waits until its keys
// are deleted.
func (l *rueidislockLocker) Unlock(context.Context) error {
	l.release()
	l.release = nil
	return nil
}

// noLoopTrackingSupported reports whether version is at least 7.0.5, the
// first Redis whose CLIENT TRACKING NOLOOP rueidislock can rely on.
func noLoopTrackingSupported(version string) bool {
	var major, minor, patch int
	if _, err := fmt.Sscanf(strings.TrimSpace(version), "%d.%d.%d", &major, &minor, &patch); err != nil {
		return false
	}
	return major > 7 || major == 7 && (minor > 0 || patch >= 5)
}

// noLock excludes nothing: the bench's self-check that its overlap check
// sees overlaps, within a process and across processes. It is never part of
// "all"; -contenders none selects it, and the run then fails, as it should.
var noLock = contender{
	name:  "none",
	about: "no lock at all: the bench's overlap check must report overlaps",
	open:  func(target) (session, error) { return noLockSession{}, nil },
}

type noLockSession struct{}

func (noLockSession) Locker(string) locker         { return noLockSession{} }
func (noLockSession) Close() error                 { return nil }
func (noLockSession) Lock(context.Context) error   { return nil }
func (noLockSession) Unlock(context.Context) error { return nil }
