// Command locksystems measures the locks of the seed's systems side by side
// in one run on this machine, each server on loopback: Redis (SET NX PX with
// a Lua release, and the Redisson-style watchdog Mutex), etcd
// (concurrency.Mutex on a 3-member cluster), MySQL (seed 003's unique-index
// row, on MariaDB) and ZooKeeper (Curator's recipe, go-zookeeper's Lock, on
// a 3-member ensemble). For each: uncontended lock+unlock latency,
// acquisitions per second with G goroutines on one key and on G keys, and
// the server's CPU per thousand acquisitions. An in-process counter checks
// that no two holders of one key ever overlapped.
//
//	go run ./bench/locksystems -duration 3s -goroutines 16
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/go-zookeeper/zk"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/lockstep/lockstep/internal/lockserver"
	"github.com/lockstep/lockstep/internal/proc"
	"github.com/lockstep/lockstep/lock"
)

// system is one lock system under test.
type system struct {
	name string
	pids []int // the server's processes, for their CPU
	// newLocker returns a locker for one goroutine (a session, a handle).
	newLocker func() (locker, error)
}

// locker takes the lock of key, waiting for it, and gives it back.
type locker interface {
	lock(ctx context.Context, key string) (unlock func() error, err error)
	close()
}

func main() {
	duration := flag.Duration("duration", 3*time.Second, "length of each contended measurement")
	goroutines := flag.Int("goroutines", 16, "contending goroutines")
	uncontended := flag.Int("uncontended", 1000, "lock+unlock pairs of the uncontended measurement")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *duration, *goroutines, *uncontended); err != nil {
		fmt.Fprintln(os.Stderr, "locksystems:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, duration time.Duration, goroutines, uncontended int) error {
	dir, err := os.MkdirTemp("", "locksystems-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	systems, stopAll, err := startSystems(ctx, dir)
	defer stopAll()
	if err != nil {
		return err
	}
	fmt.Printf("%d goroutines, %v per contended run, %d uncontended pairs; one process, servers on loopback\n\n", goroutines, duration, uncontended)
	fmt.Println("| lock | uncontended p50 | p99 | one key acq/s | server CPU ms / 1000 acq | " + fmt.Sprint(goroutines) + " keys acq/s | overlaps | errors |")
	fmt.Println("|---|--:|--:|--:|--:|--:|--:|--:|")
	for _, s := range systems {
		p50, p99, err := measureUncontended(ctx, s, uncontended)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		one, err := measureContended(ctx, s, goroutines, 1, duration)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		many, err := measureContended(ctx, s, goroutines, goroutines, duration)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		fmt.Printf("| %s | %s | %s | %.0f | %.1f | %.0f | %d | %d |\n", s.name, round(p50), round(p99), one.perSec,
			one.cpuPerThousand, many.perSec, one.overlaps+many.overlaps, one.errors+many.errors)
	}
	return nil
}

func round(d time.Duration) string { return d.Round(10 * time.Microsecond).String() }

// startSystems starts every server and returns the systems on them; stop
// ends what was started, also after an error.
func startSystems(ctx context.Context, dir string) ([]system, func(), error) {
	var stops []func()
	stop := func() {
		for _, f := range slices.Backward(stops) {
			f()
		}
	}
	startCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	mk := func(name string) string {
		sub := dir + "/" + name
		_ = os.MkdirAll(sub, 0o755)
		return sub
	}
	rs, err := lockserver.StartRedis(startCtx, mk("redis"))
	if err != nil {
		return nil, stop, err
	}
	stops = append(stops, rs.Stop)
	etcd, err := lockserver.StartEtcd(startCtx, mk("etcd"), 3)
	if err != nil {
		return nil, stop, err
	}
	stops = append(stops, etcd.Stop)
	maria, err := lockserver.StartMariaDB(startCtx, mk("mariadb"))
	if err != nil {
		return nil, stop, err
	}
	stops = append(stops, maria.Stop)
	zkEnsemble, err := lockserver.StartZooKeeper(startCtx, mk("zookeeper"), 3)
	if err != nil {
		return nil, stop, err
	}
	stops = append(stops, zkEnsemble.Stop)
	zkConn, _, err := zk.Connect(zkEnsemble.Servers, 30*time.Second, zk.WithLogger(quiet{}))
	if err != nil {
		return nil, stop, err
	}
	stops = append(stops, zkConn.Close)
	zkPids := make([]int, len(zkEnsemble.Servers))
	for i := range zkPids {
		zkPids[i] = zkEnsemble.Pid(i)
	}

	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr, PoolSize: 128})
	stops = append(stops, func() { _ = rdb.Close() })
	locks := lock.New(rdb)
	stops = append(stops, func() { _ = locks.Close() })
	etcdClient, err := clientv3.New(clientv3.Config{Endpoints: etcd.Endpoints, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, stop, err
	}
	stops = append(stops, func() { _ = etcdClient.Close() })
	db, err := mysqlLocks(startCtx, maria)
	if err != nil {
		return nil, stop, err
	}
	stops = append(stops, func() { _ = db.Close() })
	etcdPids := make([]int, len(etcd.Endpoints))
	for i := range etcdPids {
		etcdPids[i] = etcd.Pid(i)
	}
	return []system{
		{"Redis SET NX PX + Lua", []int{rs.Pid()}, func() (locker, error) { return redisToken{rdb}, nil }},
		{"Redis watchdog Mutex", []int{rs.Pid()}, func() (locker, error) { return redisMutex{locks}, nil }},
		{"etcd concurrency.Mutex (3 members)", etcdPids, func() (locker, error) {
			s, err := concurrency.NewSession(etcdClient, concurrency.WithTTL(30))
			return etcdMutex{s}, err
		}},
		{"MySQL unique-index row (MariaDB)", []int{maria.Pid()}, func() (locker, error) { return mysqlRow{db}, nil }},
		{"ZooKeeper go-zookeeper Lock (3 members)", zkPids, func() (locker, error) { return zkLock{zkConn}, nil }},
	}, stop, nil
}

func mysqlLocks(ctx context.Context, m *lockserver.MariaDB) (*sql.DB, error) {
	root, err := sql.Open("mysql", m.DSN(""))
	if err != nil {
		return nil, err
	}
	defer root.Close()
	if _, err := root.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS bench"); err != nil {
		return nil, err
	}
	db, err := sql.Open("mysql", m.DSN("bench"))
	if err != nil {
		return nil, err
	}
	db.SetMaxIdleConns(64)
	_, err = db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS locks (name VARCHAR(191) PRIMARY KEY, owner CHAR(16) NOT NULL) ENGINE=InnoDB")
	return db, err
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

type redisToken struct{ rdb *redis.Client }

func (r redisToken) lock(ctx context.Context, key string) (func() error, error) {
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
func (redisToken) close() {}

type redisMutex struct{ c *lock.Client }

func (r redisMutex) lock(ctx context.Context, key string) (func() error, error) {
	m := r.c.Mutex(key)
	return func() error { return m.Unlock(context.Background()) }, m.Lock(ctx)
}
func (redisMutex) close() {}

type etcdMutex struct{ s *concurrency.Session }

func (e etcdMutex) lock(ctx context.Context, key string) (func() error, error) {
	m := concurrency.NewMutex(e.s, "/bench/"+key)
	return func() error { return m.Unlock(context.Background()) }, m.Lock(ctx)
}
func (e etcdMutex) close() { _ = e.s.Close() }

type mysqlRow struct{ db *sql.DB }

func (m mysqlRow) lock(ctx context.Context, key string) (func() error, error) {
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
func (mysqlRow) close() {}

// zkLock is go-zookeeper's own lock: Curator's recipe (ephemeral
// sequential nodes, each waiter watching its predecessor) on one session
// shared by every goroutine, as the package is used. The stage's guard adds
// the held context on top; the round trips are the same.
type zkLock struct{ conn *zk.Conn }

func (z zkLock) lock(_ context.Context, key string) (func() error, error) {
	l := zk.NewLock(z.conn, "/bench/"+key, zk.WorldACL(zk.PermAll))
	return l.Unlock, l.Lock()
}
func (zkLock) close() {}

// quiet drops go-zookeeper's log lines.
type quiet struct{}

func (quiet) Printf(string, ...any) {}

func measureUncontended(ctx context.Context, s system, n int) (p50, p99 time.Duration, err error) {
	l, err := s.newLocker()
	if err != nil {
		return 0, 0, err
	}
	defer l.close()
	lat := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		unlock, err := l.lock(ctx, "uncontended")
		if err != nil {
			return 0, 0, err
		}
		if err := unlock(); err != nil {
			return 0, 0, err
		}
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	return lat[n/2], lat[n*99/100], nil
}

type contended struct {
	perSec, cpuPerThousand float64
	overlaps, errors       int64
}

// measureContended runs goroutines on keys keys (goroutine i on key i mod
// keys) for d, each locking, bumping its key's in-process holder count,
// and unlocking as fast as it can.
func measureContended(ctx context.Context, s system, goroutines, keys int, d time.Duration) (contended, error) {
	lockers := make([]locker, goroutines)
	for i := range lockers {
		l, err := s.newLocker()
		if err != nil {
			return contended{}, err
		}
		defer l.close()
		lockers[i] = l
	}
	inside := make([]atomic.Int64, keys)
	var acquired, overlaps, failures atomic.Int64
	cpuBefore := cpu(s.pids)
	runCtx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var wg sync.WaitGroup
	start := time.Now()
	for i, l := range lockers {
		wg.Go(func() {
			key := fmt.Sprintf("key-%d-%d", keys, i%keys)
			for runCtx.Err() == nil {
				unlock, err := l.lock(runCtx, key)
				if err != nil {
					// A server too busy to answer in time (etcd's request
					// timeout) is a figure, not the end of the run.
					if runCtx.Err() == nil {
						failures.Add(1)
						slog.Warn("lock", "system", s.name, "err", err)
						time.Sleep(10 * time.Millisecond)
					}
					continue
				}
				if inside[i%keys].Add(1) > 1 {
					overlaps.Add(1)
				}
				acquired.Add(1)
				inside[i%keys].Add(-1)
				if err := unlock(); err != nil {
					failures.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	n := acquired.Load()
	c := contended{perSec: float64(n) / elapsed.Seconds(), overlaps: overlaps.Load(), errors: failures.Load()}
	if n > 0 {
		c.cpuPerThousand = float64((cpu(s.pids) - cpuBefore).Milliseconds()) / float64(n) * 1000
	}
	slog.Debug("contended", "system", s.name, "keys", keys, "acquired", n)
	return c, nil
}

// cpu is the user+system CPU time of pids so far.
func cpu(pids []int) time.Duration {
	var total time.Duration
	for _, pid := range pids {
		if st, err := proc.Read(pid); err == nil {
			total += st.CPU
		}
	}
	return total
}
