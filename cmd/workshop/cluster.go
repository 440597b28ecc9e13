package main

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockstep/lockstep/internal/loadgen"
)

// The --redis cluster set-up: three masters with one replica each, the
// smallest Redis Cluster that survives losing a master.
const (
	clusterNodes       = 6
	clusterNodeTimeout = 5 * time.Second // a dead master's replica takes over ~8 s later
)

// startRedisCluster starts six cluster-enabled redis-server processes on
// free loopback ports, joins them with redis-cli --cluster create and waits
// until every node sees all 16384 slots served.
func startRedisCluster(ctx context.Context, bin, dir string) (*redisSet, error) {
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, fmt.Errorf("--redis cluster needs redis-cli: %w", err)
	}
	set := &redisSet{cluster: true, component: loadgen.Component{Kind: "redis-server", Version: redisVersion(bin),
		Note: "Redis Cluster: 3 masters, 3 replicas"}}
	for i := range clusterNodes {
		srv, err := newRedisProc(bin, fmt.Sprintf("redis-cluster-%d", i+1), dir, "--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf", "--cluster-node-timeout", strconv.FormatInt(clusterNodeTimeout.Milliseconds(), 10))
		if err == nil {
			set.servers = append(set.servers, srv)
			set.addrs = append(set.addrs, srv.addr)
			err = srv.start(ctx, loadgen.PersistenceNone)
		}
		if err != nil {
			set.stop()
			return nil, err
		}
	}
	args := append([]string{"--cluster", "create"}, set.addrs...)
	if out, err := exec.CommandContext(ctx, cli, append(args, "--cluster-replicas", "1", "--cluster-yes")...).CombinedOutput(); err != nil {
		set.stop()
		return nil, fmt.Errorf("redis-cli --cluster create: %w\n%s", err, out)
	}
	if err := waitClusterServing(ctx, set.addrs, 30*time.Second); err != nil {
		set.stop()
		return nil, err
	}
	set.component.Addr = strings.Join(set.addrs, ",")
	return set, nil
}

// waitClusterServing waits until every node reports cluster_state:ok with
// every slot served.
func waitClusterServing(ctx context.Context, addrs []string, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		last := ""
		for _, addr := range addrs {
			rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
			info, err := rdb.ClusterInfo(ctx).Result()
			_ = rdb.Close()
			if err != nil || !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_slots_ok:16384") {
				last = fmt.Sprintf("%s: %v %q", addr, err, firstLine(info))
				break
			}
		}
		if last == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redis cluster not serving: %s", last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return strings.TrimSpace(line)
}
