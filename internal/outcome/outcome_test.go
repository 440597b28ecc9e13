package outcome_test

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/go-zookeeper/zk"
	"github.com/redis/go-redis/v9"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	_ "modernc.org/sqlite"

	"github.com/lockstep/lockstep/internal/faultproxy"
	"github.com/lockstep/lockstep/internal/lockserver/lockservertest"
	"github.com/lockstep/lockstep/internal/outcome"
	"github.com/lockstep/lockstep/internal/redisclient"
	"github.com/lockstep/lockstep/internal/redistest"
)

// replies is a faultproxy policy that, for a request containing marker,
// holds the server's reply back for delay or cuts the connection instead
// of forwarding it: the server has acted, the client never learns it.
type replies struct {
	marker []byte
	delay  time.Duration
	cut    bool
}

func (replies) Request([]byte) time.Duration { return 0 }

func (r replies) Reply(_, last []byte) (time.Duration, bool) {
	if !bytes.Contains(last, r.marker) {
		return 0, false
	}
	return r.delay, r.cut
}

func proxy(t *testing.T, upstream string, p faultproxy.Policy) string {
	t.Helper()
	px, err := faultproxy.Start(upstream, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(px.Close)
	return px.Addr()
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	return "127.0.0.1:" + strconv.Itoa(redistest.FreePort(t))
}

// row is one row of the package doc's table: how to make its error
// against a real server, what Of must answer, and whether the server ran
// the call (checked after, where it can be).
type row struct {
	name string
	err  func(t *testing.T) error
	want outcome.Outcome
	ran  func(t *testing.T) bool // nil: nothing to check on the server
}

func check(t *testing.T, rows []row) {
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			err := r.err(t)
			if got := outcome.Of(err); got != r.want {
				t.Fatalf("Of(%v) = %v, want %v", err, got, r.want)
			}
			if r.ran == nil {
				return
			}
			ran := r.ran(t)
			if r.want == outcome.NotSent && ran {
				t.Fatalf("classed %v, but the server ran it (%v)", r.want, err)
			}
			if r.want == outcome.MayHaveRun && !ran {
				t.Fatalf("this row's fault must leave the call run by the server, to show that %v may have run", err)
			}
		})
	}
}

func TestRedisErrors(t *testing.T) {
	srv := redistest.Start(t)
	direct := srv.Client(t)
	ctx := context.Background()
	client := func(t *testing.T, addr string, tune func(*redis.Options)) *redis.Client {
		o := redisclient.Options(redisclient.Settings{Timeout: 200 * time.Millisecond}, addr)
		if tune != nil {
			tune(o)
		}
		c := redis.NewClient(o)
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	// set writes key through c; ranKey reports whether it landed.
	set := func(c *redis.Client, ctx context.Context, key string) error { return c.Set(ctx, key, 1, 0).Err() }
	ranKey := func(key string) func(t *testing.T) bool {
		return func(t *testing.T) bool {
			time.Sleep(300 * time.Millisecond) // a held-back request lands
			n, err := direct.Exists(ctx, key).Result()
			if err != nil {
				t.Fatal(err)
			}
			return n == 1
		}
	}
	check(t, []row{
		{"answered", func(t *testing.T) error { return set(client(t, srv.Addr, nil), ctx, "answered") }, outcome.Ran, nil},
		{"redis.Nil", func(t *testing.T) error { return client(t, srv.Addr, nil).Get(ctx, "missing").Err() }, outcome.Ran, nil},
		{"error reply", func(t *testing.T) error {
			c := client(t, srv.Addr, nil)
			_ = c.LPush(ctx, "list", 1).Err()
			return c.Incr(ctx, "list").Err()
		}, outcome.Ran, nil},
		{"NOSCRIPT", func(t *testing.T) error {
			return client(t, srv.Addr, nil).EvalSha(ctx, "0000000000000000000000000000000000000000", nil).Err()
		}, outcome.Refused, nil},
		{"pool timeout", func(t *testing.T) error {
			c := client(t, srv.Addr, func(o *redis.Options) { o.PoolSize = 1; o.PoolTimeout = 50 * time.Millisecond; o.ReadTimeout = -1 })
			var held sync.WaitGroup
			held.Go(func() { _ = c.BLPop(ctx, 500*time.Millisecond, "nothing").Err() }) // holds the one connection
			time.Sleep(100 * time.Millisecond)
			defer held.Wait()
			return set(c, ctx, "pool-timeout")
		}, outcome.NotSent, ranKey("pool-timeout")},
		{"dial refused", func(t *testing.T) error { return set(client(t, closedAddr(t), nil), ctx, "dial") }, outcome.NotSent, nil},
		{"client closed", func(t *testing.T) error {
			c := client(t, srv.Addr, nil)
			_ = c.Close()
			return set(c, ctx, "closed")
		}, outcome.NotSent, ranKey("closed")},
		{"context done before the write", func(t *testing.T) error {
			done, cancel := context.WithCancel(ctx)
			cancel()
			return set(client(t, srv.Addr, nil), done, "ctx-before")
		}, outcome.MayHaveRun, nil}, // the error alone cannot tell it from one after the write
		{"context deadline after the write", func(t *testing.T) error {
			addr := proxy(t, srv.Addr, replies{marker: []byte("ctx-after"), delay: 200 * time.Millisecond})
			c := client(t, addr, func(o *redis.Options) { o.ReadTimeout = 2 * time.Second })
			short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancel()
			return set(c, short, "ctx-after")
		}, outcome.MayHaveRun, ranKey("ctx-after")},
		{"read timeout after the server acted", func(t *testing.T) error {
			addr := proxy(t, srv.Addr, replies{marker: []byte("read-timeout"), delay: 400 * time.Millisecond})
			return set(client(t, addr, nil), ctx, "read-timeout")
		}, outcome.MayHaveRun, ranKey("read-timeout")},
		{"connection cut after the server acted (EOF)", func(t *testing.T) error {
			addr := proxy(t, srv.Addr, replies{marker: []byte("cut"), cut: true})
			return set(client(t, addr, nil), ctx, "cut")
		}, outcome.MayHaveRun, ranKey("cut")},
	})
}

// TestRedisRefusals: the replies with which Redis (or a Cluster node)
// declines a command, from a server that answers every command with one.
func TestRedisRefusals(t *testing.T) {
	for _, reply := range []string{"MOVED 3999 127.0.0.1:6381", "ASK 3999 127.0.0.1:6381", "TRYAGAIN Multiple keys request during rehashing of slot",
		"CLUSTERDOWN The cluster is down", "LOADING Redis is loading the dataset in memory", "READONLY You can't write against a read only replica.",
		"MASTERDOWN Link with MASTER is down", "BUSY Redis is busy running a script", "EXECABORT Transaction discarded", "OOM command not allowed"} {
		name, _, _ := strings.Cut(reply, " ")
		t.Run(name, func(t *testing.T) {
			addr := refusing(t, reply)
			c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, DisableIdentity: true, MaxRetries: -1})
			defer c.Close()
			err := c.Set(context.Background(), "k", 1, 0).Err()
			if got := outcome.Of(err); got != outcome.Refused {
				t.Fatalf("Of(%v) = %v, want refused", err, got)
			}
		})
	}
}

// refusing is a server that answers every RESP command with -reply.
func refusing(t *testing.T, reply string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); conns.Wait() })
	conns.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Go(func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					if err := skipCommand(r); err != nil {
						return
					}
					if _, err := fmt.Fprintf(c, "-%s\r\n", reply); err != nil {
						return
					}
				}
			})
		}
	})
	return ln.Addr().String()
}

// skipCommand reads one RESP array of bulk strings.
func skipCommand(r *bufio.Reader) error {
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	n, _ := strconv.Atoi(line[1 : len(line)-2])
	for range 2 * n {
		if _, err := r.ReadString('\n'); err != nil {
			return err
		}
	}
	return nil
}

func TestMySQLErrors(t *testing.T) {
	m := lockservertest.MariaDB(t)
	ctx := context.Background()
	open := func(t *testing.T, addr string) *sql.DB {
		// readTimeout: above innodb_lock_wait_timeout, below the held-back reply's delay
		db, err := sql.Open("mysql", "root@tcp("+addr+")/mysql?timeout=1s&readTimeout=1200ms")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		return db
	}
	direct := open(t, m.Addr)
	for _, q := range []string{"CREATE DATABASE IF NOT EXISTS outcome", "CREATE TABLE outcome.t (k VARCHAR(32) PRIMARY KEY)"} {
		if _, err := direct.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	insert := func(db *sql.DB, ctx context.Context, k string) error {
		_, err := db.ExecContext(ctx, "INSERT INTO outcome.t (k) VALUES (?)", k)
		return err
	}
	ranKey := func(k string) func(t *testing.T) bool {
		return func(t *testing.T) bool {
			time.Sleep(300 * time.Millisecond)
			var n int
			if err := direct.QueryRowContext(ctx, "SELECT COUNT(*) FROM outcome.t WHERE k = ?", k).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n == 1
		}
	}
	check(t, []row{
		{"duplicate key", func(t *testing.T) error {
			_ = insert(direct, ctx, "dup")
			return insert(direct, ctx, "dup")
		}, outcome.Ran, nil},
		{"lock wait timeout", func(t *testing.T) error {
			_ = insert(direct, ctx, "locked")
			tx, err := direct.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			if _, err := tx.ExecContext(ctx, "SELECT k FROM outcome.t WHERE k = 'locked' FOR UPDATE"); err != nil {
				t.Fatal(err)
			}
			conn, err := direct.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := conn.ExecContext(ctx, "SET SESSION innodb_lock_wait_timeout = 1"); err != nil {
				t.Fatal(err)
			}
			_, err = conn.ExecContext(ctx, "DELETE FROM outcome.t WHERE k = 'locked'")
			return err
		}, outcome.Refused, nil},
		{"dial refused", func(t *testing.T) error { return insert(open(t, closedAddr(t)), ctx, "dial") }, outcome.NotSent, nil},
		{"connection cut after the server acted", func(t *testing.T) error {
			return insert(open(t, proxy(t, m.Addr, replies{marker: []byte("cut-after"), cut: true})), ctx, "cut-after")
		}, outcome.MayHaveRun, ranKey("cut-after")},
		{"read timeout after the server acted", func(t *testing.T) error {
			return insert(open(t, proxy(t, m.Addr, replies{marker: []byte("slow-reply"), delay: 2 * time.Second})), ctx, "slow-reply")
		}, outcome.MayHaveRun, ranKey("slow-reply")},
		{"context deadline after the write", func(t *testing.T) error {
			db := open(t, proxy(t, m.Addr, replies{marker: []byte("ctx-after"), delay: 500 * time.Millisecond}))
			if err := db.PingContext(ctx); err != nil {
				t.Fatal(err)
			}
			short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			defer cancel()
			return insert(db, short, "ctx-after")
		}, outcome.MayHaveRun, ranKey("ctx-after")},
		{"driver.ErrBadConn (a connection database/sql could not use)", func(t *testing.T) error {
			return fmt.Errorf("exec: %w", driver.ErrBadConn)
		}, outcome.NotSent, nil},
		{"mysql.ErrInvalidConn", func(t *testing.T) error { return mysql.ErrInvalidConn }, outcome.MayHaveRun, nil},
	})
}

func TestSQLiteErrors(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "outcome.db")
	open := func(t *testing.T) *sql.DB {
		db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(0)")
		if err != nil {
			t.Fatal(err)
		}
		db.SetMaxOpenConns(1)
		t.Cleanup(func() { _ = db.Close() })
		return db
	}
	db := open(t)
	if _, err := db.ExecContext(ctx, "CREATE TABLE t (k TEXT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	check(t, []row{
		{"constraint", func(t *testing.T) error {
			_, _ = db.ExecContext(ctx, "INSERT INTO t VALUES ('a')")
			_, err := db.ExecContext(ctx, "INSERT INTO t VALUES ('a')")
			return err
		}, outcome.Ran, nil},
		{"busy", func(t *testing.T) error {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			if _, err := tx.ExecContext(ctx, "INSERT INTO t VALUES ('held')"); err != nil {
				t.Fatal(err)
			}
			_, err = open(t).ExecContext(ctx, "INSERT INTO t VALUES ('b')")
			return err
		}, outcome.Refused, nil},
	})
}

// TestCoordinatorErrors: etcd's and go-zookeeper's errors, as their
// clients return them (the stages' own tests drive the servers).
func TestCoordinatorErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want outcome.Outcome
	}{
		{"etcd answered", rpctypes.ErrCompacted, outcome.Ran},
		{"etcd lease not found", fmt.Errorf("keepalive: %w", rpctypes.ErrLeaseNotFound), outcome.Ran},
		{"gRPC unavailable", status.Error(codes.Unavailable, "connection reset"), outcome.MayHaveRun},
		{"gRPC deadline", status.Error(codes.DeadlineExceeded, "context deadline exceeded"), outcome.MayHaveRun},
		{"gRPC invalid argument", status.Error(codes.InvalidArgument, "bad"), outcome.Refused},
		{"zk no server", zk.ErrNoServer, outcome.NotSent},
		{"zk closing", zk.ErrClosing, outcome.NotSent},
		{"zk connection closed", zk.ErrConnectionClosed, outcome.MayHaveRun},
		{"zk session expired", zk.ErrSessionExpired, outcome.MayHaveRun},
		{"zk node exists", fmt.Errorf("create: %w", zk.ErrNodeExists), outcome.Ran},
		{"zk no node", zk.ErrNoNode, outcome.Ran},
		{"unknown", errors.New("something else"), outcome.MayHaveRun},
	} {
		if got := outcome.Of(c.err); got != c.want {
			t.Errorf("%s: Of(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}
