package main

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockstep/lockstep/internal/lockserver"
	"github.com/lockstep/lockstep/internal/proc"
	"github.com/lockstep/lockstep/internal/redisclient"
)

// servers are the lock servers of one run, started by the parent.
type servers struct {
	endpoints endpoints
	byName    map[string]*server
	stops     []func()
}

// server is what the parent reads of one system's server processes — their
// CPU and memory, and how many requests they have served — and how their
// leader or master fails over.
type server struct {
	pids     []int
	requests func(ctx context.Context) (int64, error)
	failover failoverPlan
}

func (s *servers) stop() {
	for _, f := range slices.Backward(s.stops) {
		f()
	}
}

func (s *servers) of(system string) *server { return s.byName[system] }

// startServers starts a redis-server, a 3-member etcd cluster, MariaDB and
// a 3-member ZooKeeper ensemble under dir, side by side (MariaDB's data
// directory and the JVMs take seconds each); stop ends what was started,
// also after an error.
func startServers(ctx context.Context, dir string) (*servers, error) {
	s := &servers{byName: make(map[string]*server)}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var (
		rs    *lockserver.Redis
		etcd  *lockserver.Etcd
		maria *lockserver.MariaDB
		zk    *lockserver.ZooKeeper
		mu    sync.Mutex
		errs  []error
		wg    sync.WaitGroup
	)
	// start runs one server's start in its own directory and keeps its
	// stop, if it started something, also with an error.
	start := func(name string, f func(dir string) (stop func(), err error)) {
		wg.Go(func() {
			d := filepath.Join(dir, name)
			stop, err := func() (func(), error) {
				if err := os.MkdirAll(d, 0o755); err != nil {
					return nil, err
				}
				return f(d)
			}()
			mu.Lock()
			defer mu.Unlock()
			if stop != nil {
				s.stops = append(s.stops, stop)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
			}
		})
	}
	start("redis", func(d string) (func(), error) {
		var err error
		if rs, err = lockserver.StartRedis(ctx, d); err != nil {
			return nil, err
		}
		return rs.Stop, nil
	})
	start("etcd", func(d string) (func(), error) {
		var err error
		if etcd, err = lockserver.StartEtcd(ctx, d, 3); err != nil {
			return nil, err
		}
		return etcd.Stop, nil
	})
	start("mariadb", func(d string) (func(), error) {
		var err error
		if maria, err = lockserver.StartMariaDB(ctx, d); err != nil {
			return nil, err
		}
		return maria.Stop, createMySQLTable(ctx, maria)
	})
	start("zookeeper", func(d string) (func(), error) {
		var err error
		if zk, err = lockserver.StartZooKeeper(ctx, d, 3); err != nil {
			return nil, err
		}
		return zk.Stop, nil
	})
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return s, err
	}
	s.endpoints = endpoints{Redis: rs.Addr, Etcd: etcd.Endpoints, MySQL: maria.DSN("bench"), ZooKeeper: zk.Servers}

	rdb := redisclient.New(redisclient.Settings{}, rs.Addr)
	s.stops = append(s.stops, func() { _ = rdb.Close() })
	db, err := sql.Open("mysql", s.endpoints.MySQL)
	if err != nil {
		return s, err
	}
	s.stops = append(s.stops, func() { _ = db.Close() })
	redisServer := &server{pids: []int{rs.Pid()}, failover: promotionPlan(s.endpoints), requests: func(ctx context.Context) (int64, error) {
		return redisCommands(ctx, rdb)
	}}
	s.byName[redisToken] = redisServer
	s.byName[redisWatchdog] = redisServer
	s.byName[etcdMutex] = &server{pids: pidsOf(len(etcd.Endpoints), etcd.Pid), failover: electionPlan(s.endpoints, etcd),
		requests: func(ctx context.Context) (int64, error) { return etcdMessages(ctx, etcd.Endpoints) }}
	s.byName[mysqlRow] = &server{pids: []int{maria.Pid()}, failover: failoverPlan{none: "one server: no replica to fail over to"},
		requests: func(ctx context.Context) (int64, error) { return mysqlQuestions(ctx, db) }}
	s.byName[zkRecipe] = &server{pids: pidsOf(len(zk.Servers), zk.Pid), failover: electionPlan(s.endpoints, zk),
		requests: func(ctx context.Context) (int64, error) { return zkReceived(ctx, zk.Servers) }}
	return s, nil
}

func pidsOf(n int, pid func(int) int) []int {
	pids := make([]int, n)
	for i := range pids {
		pids[i] = pid(i)
	}
	return pids
}

func createMySQLTable(ctx context.Context, m *lockserver.MariaDB) error {
	root, err := sql.Open("mysql", m.DSN(""))
	if err != nil {
		return err
	}
	defer root.Close()
	if _, err := root.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS bench"); err != nil {
		return err
	}
	_, err = root.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS bench.locks (name VARCHAR(191) PRIMARY KEY, owner CHAR(16) NOT NULL) ENGINE=InnoDB")
	return err
}

// cpu is the user+system CPU time of the server's processes so far.
func (s *server) cpu() time.Duration {
	var total time.Duration
	for _, pid := range s.pids {
		if st, err := proc.Read(pid); err == nil {
			total += st.CPU
		}
	}
	return total
}

// rss is the server's processes' resident memory now.
func (s *server) rss() int64 {
	var total int64
	for _, pid := range s.pids {
		if st, err := proc.Read(pid); err == nil {
			total += st.RSS
		}
	}
	return total
}

// redisCommands is INFO's total_commands_processed.
func redisCommands(ctx context.Context, rdb *redis.Client) (int64, error) {
	info, err := rdb.InfoMap(ctx, "stats").Result()
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(info["Stats"]["total_commands_processed"], 10, 64)
}

// etcdMessages is the gRPC messages the members received from clients
// (grpc_server_msg_received_total, every method, every member): a unary
// call is one, a watch one per request on its stream.
func etcdMessages(ctx context.Context, endpoints []string) (int64, error) {
	var total int64
	for _, ep := range endpoints {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, ep+"/metrics", nil)
		if err != nil {
			return 0, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if line := sc.Text(); strings.HasPrefix(line, "grpc_server_msg_received_total{") {
				v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
				if err == nil {
					total += int64(v)
				}
			}
		}
		resp.Body.Close()
		if err := sc.Err(); err != nil {
			return 0, err
		}
	}
	return total, nil
}

// mysqlQuestions is the statements the server ran for clients.
func mysqlQuestions(ctx context.Context, db *sql.DB) (int64, error) {
	var name string
	var n int64
	err := db.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Questions'").Scan(&name, &n)
	return n - 1, err // not counting this one
}

// zkReceived is the packets the members received from clients (srvr).
func zkReceived(ctx context.Context, servers []string) (int64, error) {
	var total int64
	for _, addr := range servers {
		n, err := zkSrvrReceived(ctx, addr)
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

func zkSrvrReceived(ctx context.Context, addr string) (int64, error) {
	d := net.Dialer{Timeout: time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write([]byte("srvr")); err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(conn)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Received: "); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, errors.Join(fmt.Errorf("srvr of %s: no Received line", addr), sc.Err())
}
