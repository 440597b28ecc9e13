package outcome_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockstep/lockstep/internal/lockserver/lockservertest"
	"github.com/lockstep/lockstep/internal/outcome"
	"github.com/lockstep/lockstep/internal/outcome/outcometest"
)

// TestEtcdErrorsFromAServer: etcd's rows made by a real member, through a
// faultproxy where the reply is lost after the member applied the Put.
func TestEtcdErrorsFromAServer(t *testing.T) {
	e := lockservertest.Etcd(t, 1)
	member := strings.TrimPrefix(e.Endpoints[0], "http://")
	client := func(t *testing.T, addr string) *clientv3.Client {
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + addr}, DialTimeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	direct := client(t, member)
	ctx := context.Background()
	ranKey := func(key string) func(t *testing.T) bool {
		return func(t *testing.T) bool {
			// The member applies the write after the cut; on a loaded
			// machine that took longer than a fixed 300 ms (CI).
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
				resp, err := direct.Get(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				if len(resp.Kvs) == 1 || time.Now().After(deadline) {
					return len(resp.Kvs) == 1
				}
			}
		}
	}
	check(t, []row{
		{"answered (lease not found)", func(t *testing.T) error {
			_, err := direct.Revoke(ctx, clientv3.LeaseID(12345))
			return err
		}, outcome.Ran, nil},
		{"connection cut after the member applied it", func(t *testing.T) error {
			// The first frame back may be HTTP/2's flow control, sent
			// before the member proposed the write: cut at once, the
			// closed stream cancels the write (seen in CI). Held for a
			// second, the write is proposed first and applied whatever
			// becomes of the connection.
			c := client(t, outcometest.Proxy(t, member, outcometest.Replies{Marker: []byte("outcome-cut-key"), Delay: time.Second, Cut: true}))
			short, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			_, err := c.Put(short, "outcome-cut-key", "1")
			return err
		}, outcome.MayHaveRun, ranKey("outcome-cut-key")},
		// etcd's client waits for a connection until the deadline: the
		// error cannot tell a member never reached from a lost reply.
		{"no member reachable", func(t *testing.T) error {
			short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			defer cancel()
			_, err := client(t, outcometest.ClosedAddr(t)).Put(short, "outcome-unreached", "1")
			return err
		}, outcome.MayHaveRun, nil},
	})
}

// TestZooKeeperErrorsFromAServer: ZooKeeper's rows made by a real server,
// through a faultproxy where the reply is lost after it created the node.
func TestZooKeeperErrorsFromAServer(t *testing.T) {
	z := lockservertest.ZooKeeper(t, 1)
	connect := func(t *testing.T, addr string) *zk.Conn {
		c, _, err := zk.Connect([]string{addr}, 5*time.Second, zk.WithLogInfo(false))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	direct := connect(t, z.Servers[0])
	create := func(c *zk.Conn, path string) error {
		_, err := c.Create(path, nil, 0, zk.WorldACL(zk.PermAll))
		return err
	}
	check(t, []row{
		{"answered (node exists)", func(t *testing.T) error {
			_ = create(direct, "/outcome-exists")
			return create(direct, "/outcome-exists")
		}, outcome.Ran, nil},
		{"connection cut after the server created the node", func(t *testing.T) error {
			c := connect(t, outcometest.Proxy(t, z.Servers[0], outcometest.Replies{Marker: []byte("outcome-cut-node"), Cut: true}))
			return create(c, "/outcome-cut-node")
		}, outcome.MayHaveRun, func(t *testing.T) bool {
			time.Sleep(300 * time.Millisecond)
			ok, _, err := direct.Exists("/outcome-cut-node")
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}},
		// go-zookeeper answers a closed client's request as one in flight
		// when the connection closed: the error cannot tell them apart.
		{"client closed", func(t *testing.T) error {
			c := connect(t, z.Servers[0])
			c.Close()
			return create(c, "/outcome-closed")
		}, outcome.MayHaveRun, nil},
	})
}
