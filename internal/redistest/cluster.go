package redistest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/redisclient"
	"github.com/redis/go-redis/v9"
)

// clusterNodeTimeout is the nodes' cluster-node-timeout: a master killed is
// replaced by its replica a few timeouts later.
const clusterNodeTimeout = 2 * time.Second

// Cluster is a Redis Cluster of three masters, each with one replica, owned
// by a test: six redis-server processes on free loopback ports.
type Cluster struct {
	Nodes []*Server
}

// StartCluster starts six cluster-enabled servers, joins them with
// redis-cli --cluster create (three masters, one replica each) and waits
// until every node sees every slot served.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		Binary(t) // fails (CI) or skips the same way
		if os.Getenv("CI") == "true" {
			t.Fatalf("redis-cli not found on PATH: %v", err)
		}
		t.Skipf("redis-cli not found on PATH: %v", err)
	}
	c := &Cluster{}
	addrs := make([]string, 6)
	for i := range addrs {
		srv := Start(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", strconv.Itoa(int(clusterNodeTimeout.Milliseconds())),
			"--cluster-require-full-coverage", "no") // as the workshop's: a dead master stops only its slots
		c.Nodes = append(c.Nodes, srv)
		addrs[i] = srv.Addr
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	if err := c.WaitHealthy(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	return c
}

// Addrs are the nodes' addresses, the seeds a ClusterClient starts from.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr
	}
	return addrs
}

// Client returns a ClusterClient over the cluster, closed when the test ends.
func (c *Cluster) Client(t testing.TB) *redis.ClusterClient {
	t.Helper()
	rdb := redisclient.NewCluster(redisclient.Settings{}, c.Addrs())
	t.Cleanup(func() { _ = rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rdb.ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error { return n.Ping(ctx).Err() }); err != nil {
		t.Fatalf("ping the cluster: %v", err)
	}
	return rdb
}

// MasterOf is the node that serves key now.
func (c *Cluster) MasterOf(t testing.TB, key string) *Server {
	t.Helper()
	master, err := c.Client(t).MasterForKey(context.Background(), key)
	if err != nil {
		t.Fatalf("master of %s: %v", key, err)
	}
	for _, n := range c.Nodes {
		if n.Addr == master.Options().Addr {
			return n
		}
	}
	t.Fatalf("master of %s: no node at %s", key, master.Options().Addr)
	return nil
}

// MoveKeyHalfWay marks key's slot MIGRATING on its master and IMPORTING on
// another master and moves key there, leaving the slot on its master, as
// a reshard stopped after its first batch does: a command on key then
// gets ASK from the master and runs on the target. It returns the target.
func (c *Cluster) MoveKeyHalfWay(t testing.TB, key string) *Server {
	t.Helper()
	ctx := context.Background()
	source := c.MasterOf(t, key)
	rdb := c.Client(t)
	slot, err := rdb.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	var target *Server
	var ids [2]string
	for _, n := range c.Nodes {
		node := redisclient.New(redisclient.Settings{}, n.Addr)
		role, _ := node.Do(ctx, "role").Slice()
		id, _ := node.ClusterMyID(ctx).Result()
		_ = node.Close()
		switch {
		case n == source:
			ids[0] = id
		case target == nil && len(role) > 0 && role[0] == "master":
			target, ids[1] = n, id
		}
	}
	if target == nil {
		t.Fatal("no other master")
	}
	on := func(n *Server, args ...any) {
		node := redisclient.New(redisclient.Settings{}, n.Addr)
		defer node.Close()
		if err := node.Do(ctx, args...).Err(); err != nil {
			t.Fatalf("%v on %s: %v", args, n.Addr, err)
		}
	}
	on(target, "cluster", "setslot", slot, "importing", ids[0])
	on(source, "cluster", "setslot", slot, "migrating", ids[1])
	host, port, _ := strings.Cut(target.Addr, ":")
	on(source, "migrate", host, port, key, 0, 5000)
	return target
}

// WaitHealthy waits until every running node reports cluster_state:ok with
// all 16384 slots assigned and served, and every replica's link to its
// master is up.
func (c *Cluster) WaitHealthy(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		if last = c.unhealthy(); last == "" {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("redis cluster not healthy within %v: %s", timeout, last)
}

// unhealthy says what is not ready yet, "" when the cluster is.
func (c *Cluster) unhealthy() string {
	for _, n := range c.Nodes {
		if n.cmd == nil {
			continue // stopped by the test
		}
		rdb := redisclient.New(redisclient.Settings{}, n.Addr)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		info, err := rdb.ClusterInfo(ctx).Result()
		repl, rerr := rdb.Info(ctx, "replication").Result()
		cancel()
		_ = rdb.Close()
		switch {
		case err != nil || rerr != nil:
			return fmt.Sprintf("%s: %v %v", n.Addr, err, rerr)
		case !strings.Contains(info, "cluster_state:ok"), !strings.Contains(info, "cluster_slots_ok:16384"):
			return n.Addr + ": " + strings.Join(strings.Fields(info)[:4], " ")
		case strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up"):
			return n.Addr + ": replica link down"
		}
	}
	return ""
}
