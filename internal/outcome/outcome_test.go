package outcome_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/go-zookeeper/zk"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	_ "modernc.org/sqlite"

	"github.com/lockstep/lockstep/internal/lockserver/lockservertest"
	"github.com/lockstep/lockstep/internal/outcome"
	"github.com/lockstep/lockstep/internal/outcome/outcometest"
)

// row is a row of the table made against a real server: its error, what
// Of must answer, and whether the server ran the call (checked after,
// where it can be).
type row struct {
	name string
	err  func(t *testing.T) error
	want outcome.Outcome
	ran  func(t *testing.T) bool // nil: nothing to check on the server
}

func check(t *testing.T, rows []row) {
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			c := outcometest.Case{Name: r.name, Err: r.err(t), Want: r.want}
			if got := outcome.Of(c.Err); got != c.Want {
				t.Fatalf("Of(%v) = %v, want %v", c.Err, got, c.Want)
			}
			if r.ran != nil {
				outcometest.Check(t, c, r.ran(t))
			}
		})
	}
}

func TestRedisErrors(t *testing.T) {
	for _, c := range outcometest.Redis(t) {
		if got := outcome.Of(c.Err); got != c.Want {
			t.Errorf("%s: Of(%v) = %v, want %v", c.Name, c.Err, got, c.Want)
		}
	}
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
		{"dial refused", func(t *testing.T) error { return insert(open(t, outcometest.ClosedAddr(t)), ctx, "dial") }, outcome.NotSent, nil},
		{"connection cut after the server acted", func(t *testing.T) error {
			return insert(open(t, outcometest.Proxy(t, m.Addr, outcometest.Replies{Marker: []byte("cut-after"), Cut: true})), ctx, "cut-after")
		}, outcome.MayHaveRun, ranKey("cut-after")},
		{"read timeout after the server acted", func(t *testing.T) error {
			return insert(open(t, outcometest.Proxy(t, m.Addr, outcometest.Replies{Marker: []byte("slow-reply"), Delay: 2 * time.Second})), ctx, "slow-reply")
		}, outcome.MayHaveRun, ranKey("slow-reply")},
		{"context deadline after the write", func(t *testing.T) error {
			db := open(t, outcometest.Proxy(t, m.Addr, outcometest.Replies{Marker: []byte("ctx-after"), Delay: 500 * time.Millisecond}))
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
