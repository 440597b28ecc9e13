package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/lockstep/lockstep/internal/redisclient"
	"github.com/lockstep/lockstep/internal/zklock"
	"github.com/lockstep/lockstep/lock"
)

// The systems under test, by the name the table gives them.
const (
	redisToken    = "Redis SET NX PX + Lua"
	redisWatchdog = "Redis watchdog Mutex"
	etcdMutex     = "etcd concurrency.Mutex (3 members)"
	mysqlRow      = "MySQL unique-index row (MariaDB)"
	zkRecipe      = "ZooKeeper, the stage's recipe (3 members)"
)

// steadyLease is the lease of the throughput, latency and failover
// measurements: nothing expires while its holder lives.
const steadyLease = 30 * time.Second

// endpoints are where the servers listen: what a child process needs to
// reach them.
type endpoints struct {
	Redis     string   `json:"redis"`
	Etcd      []string `json:"etcd"`
	MySQL     string   `json:"mysql"`
	ZooKeeper []string `json:"zookeeper"`
}

// system is one lock system under test.
type system struct {
	name string
	// faultLease is the lease of the crash and pause measurements, as
	// short as the system allows here; 0 for a lock without one.
	faultLease time.Duration
	// connect opens one process's use of the system, its locks on lease.
	connect func(ctx context.Context, ep endpoints, lease time.Duration) (connection, error)
}

// systems are the locks the table compares, in its order.
func systems() []system {
	return []system{
		{redisToken, time.Second, connectRedisToken},
		{redisWatchdog, time.Second, connectRedisWatchdog},
		// etcd grants at least 1.5 election timeouts (1 s on
		// internal/lockserver's members), in whole seconds.
		{etcdMutex, 2 * time.Second, connectEtcd},
		{mysqlRow, 0, connectMySQL},
		// A session of 2 to 20 ticks (200 ms on lockserver's ensemble).
		{zkRecipe, time.Second, connectZooKeeper},
	}
}

func systemNamed(name string) (system, error) {
	for _, s := range systems() {
		if s.name == name {
			return s, nil
		}
	}
	return system{}, fmt.Errorf("no system %q", name)
}

// connection is one process's use of a system.
type connection interface {
	// newLocker returns a locker for one goroutine.
	newLocker() (locker, error)
	// recorded says whether the server still keeps a holder's or
	// waiter's record (key, row, node) of key's lock.
	recorded(ctx context.Context, key string) (bool, error)
	close()
}

// locker takes the lock of key, waiting for it, and gives it back.
type locker interface {
	lock(ctx context.Context, key string) (unlock func(context.Context) error, err error)
	close()
}

// lockFunc is a locker on its connection's shared client: closing it
// leaves the connection open.
type lockFunc func(ctx context.Context, key string) (func(context.Context) error, error)

func (f lockFunc) lock(ctx context.Context, key string) (func(context.Context) error, error) {
	return f(ctx, key)
}
func (lockFunc) close() {}

// retry takes a fail-fast lock, backing off 0.5–8 ms with jitter while it
// is busy: what a caller of a lock without waiting has to write.
func retry(ctx context.Context, try func() (bool, error)) error {
	backoff := 500 * time.Microsecond
	for {
		ok, err := try()
		if ok || err != nil {
			return err
		}
		t := time.NewTimer(backoff/2 + rand.N(backoff))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		backoff = min(2*backoff, 8*time.Millisecond)
	}
}

// redisConn is a client of one redis-server.
type redisConn struct{ rdb *redis.Client }

func newRedisConn(ep endpoints) redisConn {
	return redisConn{redisclient.New(redisclient.Settings{PoolSize: 128}, ep.Redis)}
}

func (c redisConn) exists(ctx context.Context, key string) (bool, error) {
	n, err := c.rdb.Exists(ctx, key).Result()
	return n > 0, err
}

// tokenConn takes SET NX PX locks with a Lua compare-and-delete release.
type tokenConn struct {
	redisConn
	ttl time.Duration
}

func connectRedisToken(_ context.Context, ep endpoints, lease time.Duration) (connection, error) {
	return tokenConn{newRedisConn(ep), lease}, nil
}

func (c tokenConn) newLocker() (locker, error) { return lockFunc(c.lock), nil }

func (c tokenConn) lock(ctx context.Context, key string) (func(context.Context) error, error) {
	l := lock.NewTokenLock(c.rdb, key, c.ttl)
	err := retry(ctx, func() (bool, error) {
		err := l.TryLock(ctx)
		if errors.Is(err, lock.ErrLockBusy) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		// An attempt its deadline cut off may have set the key all the
		// same (its reply lost on a loaded machine): give it back, or the
		// process's own lost acquisitions keep the lock from it lease
		// after lease (a CI run found the key still there 6 s after the
		// holder's kill, its lease 1 s).
		giveBack, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		_ = l.Unlock(giveBack)
		cancel()
	}
	return l.Unlock, err
}

func (c tokenConn) recorded(ctx context.Context, key string) (bool, error) { return c.exists(ctx, key) }
func (c tokenConn) close()                                                 { _ = c.rdb.Close() }

// mutexConn is one lock.Client, shared by the process's goroutines as the
// shop's are: its watchdog keeps each lock at the lease.
type mutexConn struct {
	redisConn
	locks *lock.Client
}

func connectRedisWatchdog(_ context.Context, ep endpoints, lease time.Duration) (connection, error) {
	c := newRedisConn(ep)
	return mutexConn{c, lock.New(c.rdb, lock.WithWatchdogTimeout(lease))}, nil
}

func (c mutexConn) newLocker() (locker, error) { return lockFunc(c.lock), nil }

func (c mutexConn) lock(ctx context.Context, key string) (func(context.Context) error, error) {
	m := c.locks.Mutex(key)
	return m.Unlock, m.Lock(ctx)
}

func (c mutexConn) recorded(ctx context.Context, key string) (bool, error) {
	return c.exists(ctx, c.locks.Mutex(key).Key())
}

func (c mutexConn) close() {
	_ = c.locks.Close()
	_ = c.rdb.Close()
}

// etcdConn is one client of the cluster; each locker has a session (a
// lease kept alive) of its own, as the stage's holds do.
type etcdConn struct {
	client *clientv3.Client
	ttl    int // seconds
}

func connectEtcd(_ context.Context, ep endpoints, lease time.Duration) (connection, error) {
	client, err := clientv3.New(clientv3.Config{Endpoints: ep.Etcd, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	return etcdConn{client, int(math.Ceil(lease.Seconds()))}, nil
}

func (c etcdConn) newLocker() (locker, error) {
	s, err := concurrency.NewSession(c.client, concurrency.WithTTL(c.ttl))
	if err != nil {
		return nil, fmt.Errorf("etcd session: %w", err)
	}
	return etcdLocker{s}, nil
}

func (c etcdConn) recorded(ctx context.Context, key string) (bool, error) {
	resp, err := c.client.Get(ctx, etcdPrefix(key), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return false, err
	}
	return resp.Count > 0, nil
}

func (c etcdConn) close() { _ = c.client.Close() }

func etcdPrefix(key string) string { return "/bench/" + key + "/" }

type etcdLocker struct{ s *concurrency.Session }

func (e etcdLocker) lock(ctx context.Context, key string) (func(context.Context) error, error) {
	m := concurrency.NewMutex(e.s, etcdPrefix(key))
	return m.Unlock, m.Lock(ctx)
}
func (e etcdLocker) close() { _ = e.s.Close() }

// rowConn is the unique-index lock of 《常见分布式锁方案对比》 on a pool of connections.
type rowConn struct{ db *sql.DB }

func connectMySQL(ctx context.Context, ep endpoints, _ time.Duration) (connection, error) {
	db, err := sql.Open("mysql", ep.MySQL)
	if err != nil {
		return nil, err
	}
	db.SetMaxIdleConns(64)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("mysql: %w", err)
	}
	return rowConn{db}, nil
}

func (m rowConn) newLocker() (locker, error) { return lockFunc(m.lock), nil }

func (m rowConn) lock(ctx context.Context, key string) (func(context.Context) error, error) {
	owner := fmt.Sprintf("%016x", rand.Uint64())
	err := retry(ctx, func() (bool, error) {
		_, err := m.db.ExecContext(ctx, "INSERT INTO locks (name, owner) VALUES (?, ?)", key, owner)
		var my *mysql.MySQLError
		if errors.As(err, &my) && (my.Number == 1062 || my.Number == 1213 || my.Number == 1205) {
			return false, nil // duplicate key; a deadlock or lock wait against the holder's DELETE
		}
		if err != nil {
			return false, fmt.Errorf("mysql: insert the lock row: %w", err)
		}
		return true, nil
	})
	return func(ctx context.Context) error {
		if _, err := m.db.ExecContext(ctx, "DELETE FROM locks WHERE name = ? AND owner = ?", key, owner); err != nil {
			return fmt.Errorf("mysql: delete the lock row: %w", err)
		}
		return nil
	}, err
}

func (m rowConn) recorded(ctx context.Context, key string) (bool, error) {
	var n int
	err := m.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM locks WHERE name = ?", key).Scan(&n)
	return n > 0, err
}

func (m rowConn) close() { _ = m.db.Close() }

// zkConn is one session of the zookeeper stage's recipe (internal/zklock),
// shared by the process's goroutines as the stage's is; its timeout is the
// lease.
type zkConn struct{ s *zklock.Session }

func connectZooKeeper(_ context.Context, ep endpoints, lease time.Duration) (connection, error) {
	s, err := zklock.Connect(ep.ZooKeeper, lease, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, err
	}
	return zkConn{s}, nil
}

func (z zkConn) newLocker() (locker, error) { return lockFunc(z.lock), nil }

func (z zkConn) lock(ctx context.Context, key string) (func(context.Context) error, error) {
	h, err := z.s.Acquire(ctx, zkPath(key))
	if err != nil {
		return nil, err
	}
	return h.Release, nil
}

func (z zkConn) recorded(ctx context.Context, key string) (bool, error) {
	n, err := z.s.Nodes(ctx, zkPath(key))
	return n > 0, err
}

func (z zkConn) close() { z.s.Close() }

func zkPath(key string) string { return "/bench/" + key }
