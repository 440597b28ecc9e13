package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/go-zookeeper/zk"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/lockstep/lockstep/lock"
)

// The systems under test, by the name the table gives them.
const (
	redisToken    = "Redis SET NX PX + Lua"
	redisWatchdog = "Redis watchdog Mutex"
	etcdMutex     = "etcd concurrency.Mutex (3 members)"
	mysqlRow      = "MySQL unique-index row (MariaDB)"
	zkLock        = "ZooKeeper go-zookeeper Lock (3 members)"
)

// endpoints are where the servers listen: what a child process needs to
// reach them.
type endpoints struct {
	Redis     string   `json:"redis"`
	Etcd      []string `json:"etcd"`
	MySQL     string   `json:"mysql"`
	ZooKeeper []string `json:"zookeeper"`
}

// system is one lock system under test, as one process uses it.
type system struct {
	name string
	// newLocker returns a locker for one goroutine (a session, a handle).
	newLocker func() (locker, error)
}

// locker takes the lock of key, waiting for it, and gives it back.
type locker interface {
	lock(ctx context.Context, key string) (unlock func() error, err error)
	close()
}

// newSystems connects this process to every server; closeAll ends the
// connections, also after an error.
func newSystems(ctx context.Context, ep endpoints) (systems []system, closeAll func(), err error) {
	var closers []func()
	closeAll = func() {
		for _, f := range slices.Backward(closers) {
			f()
		}
	}
	rdb := redis.NewClient(&redis.Options{Addr: ep.Redis, PoolSize: 128})
	closers = append(closers, func() { _ = rdb.Close() })
	locks := lock.New(rdb)
	closers = append(closers, func() { _ = locks.Close() })
	etcdClient, err := clientv3.New(clientv3.Config{Endpoints: ep.Etcd, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, closeAll, err
	}
	closers = append(closers, func() { _ = etcdClient.Close() })
	db, err := sql.Open("mysql", ep.MySQL)
	if err != nil {
		return nil, closeAll, err
	}
	db.SetMaxIdleConns(64)
	closers = append(closers, func() { _ = db.Close() })
	if err := db.PingContext(ctx); err != nil {
		return nil, closeAll, err
	}
	zkConn, _, err := zk.Connect(ep.ZooKeeper, 30*time.Second, zk.WithLogger(quiet{}))
	if err != nil {
		return nil, closeAll, err
	}
	closers = append(closers, zkConn.Close)
	return []system{
		{redisToken, func() (locker, error) { return tokenLocker{rdb}, nil }},
		{redisWatchdog, func() (locker, error) { return mutexLocker{locks}, nil }},
		{etcdMutex, func() (locker, error) {
			s, err := concurrency.NewSession(etcdClient, concurrency.WithTTL(30))
			return etcdLocker{s}, err
		}},
		{mysqlRow, func() (locker, error) { return rowLocker{db}, nil }},
		{zkLock, func() (locker, error) { return zkLocker{zkConn}, nil }},
	}, closeAll, nil
}

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

type tokenLocker struct{ rdb *redis.Client }

func (r tokenLocker) lock(ctx context.Context, key string) (func() error, error) {
	l := lock.NewTokenLock(r.rdb, key, 30*time.Second)
	err := retry(ctx, func() (bool, error) {
		err := l.TryLock(ctx)
		if errors.Is(err, lock.ErrLockBusy) {
			return false, nil
		}
		return err == nil, err
	})
	return func() error { return l.Unlock(context.Background()) }, err
}
func (tokenLocker) close() {}

type mutexLocker struct{ c *lock.Client }

func (r mutexLocker) lock(ctx context.Context, key string) (func() error, error) {
	m := r.c.Mutex(key)
	return func() error { return m.Unlock(context.Background()) }, m.Lock(ctx)
}
func (mutexLocker) close() {}

type etcdLocker struct{ s *concurrency.Session }

func (e etcdLocker) lock(ctx context.Context, key string) (func() error, error) {
	m := concurrency.NewMutex(e.s, "/bench/"+key)
	return func() error { return m.Unlock(context.Background()) }, m.Lock(ctx)
}
func (e etcdLocker) close() { _ = e.s.Close() }

type rowLocker struct{ db *sql.DB }

func (m rowLocker) lock(ctx context.Context, key string) (func() error, error) {
	owner := fmt.Sprintf("%016x", rand.Uint64())
	err := retry(ctx, func() (bool, error) {
		_, err := m.db.ExecContext(ctx, "INSERT INTO locks (name, owner) VALUES (?, ?)", key, owner)
		var my *mysql.MySQLError
		if errors.As(err, &my) && (my.Number == 1062 || my.Number == 1213 || my.Number == 1205) {
			return false, nil
		}
		return err == nil, err
	})
	return func() error {
		_, err := m.db.ExecContext(context.Background(), "DELETE FROM locks WHERE name = ? AND owner = ?", key, owner)
		return err
	}, err
}
func (rowLocker) close() {}

// zkLocker is go-zookeeper's own lock: Curator's recipe (ephemeral
// sequential nodes, each waiter watching its predecessor) on one session
// shared by every goroutine, as the package is used. The stage's guard adds
// the held context on top; the round trips are the same.
type zkLocker struct{ conn *zk.Conn }

func (z zkLocker) lock(_ context.Context, key string) (func() error, error) {
	l := zk.NewLock(z.conn, "/bench/"+key, zk.WorldACL(zk.PermAll))
	return l.Unlock, l.Lock()
}
func (zkLocker) close() {}

// quiet drops go-zookeeper's log lines.
type quiet struct{}

func (quiet) Printf(string, ...any) {}
