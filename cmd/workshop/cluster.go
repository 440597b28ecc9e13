package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockstep/lockstep/internal/loadgen/fault"
	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/internal/redisclient"
	"github.com/lockstep/lockstep/internal/sleep"
)

// The --redis cluster set-up: three masters with one replica each, the
// smallest Redis Cluster that survives losing a master.
const (
	clusterNodes = 6
	// clusterNodeTimeout: a dead master's replica takes over a few seconds
	// later (with 5 s, ~8 s: longer than a paused victim's request may wait).
	clusterNodeTimeout = 2 * time.Second
)

// startRedisCluster starts six cluster-enabled redis-server processes on
// free loopback ports, joins them with redis-cli --cluster create and waits
// until every node sees all 16384 slots served.
func startRedisCluster(ctx context.Context, bin, dir string) (*redisSet, error) {
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, fmt.Errorf("--redis cluster needs redis-cli: %w", err)
	}
	set := &redisSet{cluster: true, component: report.Component{Kind: "redis-server", Version: redisVersion(bin),
		Note: "Redis Cluster: 3 masters, 3 replicas"}}
	for i := range clusterNodes {
		if err := set.startServer(ctx, bin, fmt.Sprintf("redis-cluster-%d", i+1), dir, "--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf", "--cluster-node-timeout", strconv.FormatInt(clusterNodeTimeout.Milliseconds(), 10),
			// A master's death stops its own slots only: by default every
			// node answers CLUSTERDOWN until its replica is promoted.
			"--cluster-require-full-coverage", "no"); err != nil {
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
			rdb := redisclient.New(redisclient.Settings{}, addr)
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

// MigrateSlot moves the slot of key to another master of the workshop's
// Redis Cluster: the target IMPORTING, the source MIGRATING; the keys with
// the prefix move.First in one MIGRATE and a stop of move.Stop, when asked
// for; one MIGRATE per other key with move.Pace spread between them; then
// the slot handed to the target on every master, the target first.
func (in *injector) MigrateSlot(ctx context.Context, key string, move fault.SlotMove) (from, to string, err error) {
	if in.redis == nil || !in.redis.cluster {
		return "", "", fmt.Errorf("slot migration: %w (it needs --redis cluster)", errSetUp)
	}
	rdb := redisclient.NewCluster(redisclient.Settings{}, in.redis.addrs)
	defer rdb.Close()
	slot, err := rdb.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		return "", "", err
	}
	source, err := rdb.MasterForKey(ctx, key)
	if err != nil {
		return "", "", err
	}
	var masters []*redis.Client
	var mu sync.Mutex
	err = rdb.ForEachMaster(ctx, func(_ context.Context, n *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		masters = append(masters, n)
		return nil
	})
	if err != nil {
		return "", "", err
	}
	slices.SortFunc(masters, func(a, b *redis.Client) int { return strings.Compare(a.Options().Addr, b.Options().Addr) })
	i := slices.IndexFunc(masters, func(n *redis.Client) bool { return n.Options().Addr == source.Options().Addr })
	target := masters[(i+1)%len(masters)]
	sourceID, err1 := source.ClusterMyID(ctx).Result()
	targetID, err2 := target.ClusterMyID(ctx).Result()
	if err := errors.Join(err1, err2); err != nil {
		return "", "", err
	}
	if err := target.Do(ctx, "cluster", "setslot", slot, "importing", sourceID).Err(); err != nil {
		return "", "", err
	}
	if err := source.Do(ctx, "cluster", "setslot", slot, "migrating", targetID).Err(); err != nil {
		return "", "", err
	}
	host, port, _ := net.SplitHostPort(target.Options().Addr)
	if move.First != "" {
		if err := migrateFirst(ctx, source, host, port, int(slot), move.First); err != nil {
			return "", "", err
		}
		if err := sleep.For(ctx, move.Stop); err != nil {
			return "", "", err
		}
	}
	keys, err := source.ClusterGetKeysInSlot(ctx, int(slot), 1000).Result()
	if err != nil {
		return "", "", err
	}
	for _, k := range keys {
		if err := source.Migrate(ctx, host, port, k, 0, 5*time.Second).Err(); err != nil && !errors.Is(err, redis.Nil) {
			return "", "", fmt.Errorf("migrate %s: %w", k, err)
		}
		if err := sleep.For(ctx, move.Pace/time.Duration(len(keys))); err != nil {
			return "", "", err
		}
	}
	for _, n := range append([]*redis.Client{target, source}, masters...) {
		if err := n.Do(ctx, "cluster", "setslot", slot, "node", targetID).Err(); err != nil {
			return "", "", fmt.Errorf("hand slot %d to %s: %w", slot, target.Options().Addr, err)
		}
	}
	return source.Options().Addr, target.Options().Addr, nil
}

// migrateFirst moves the keys of slot with prefix from source to the
// target at host:port in one MIGRATE, as redis-cli --cluster reshard moves
// a batch of keys.
func migrateFirst(ctx context.Context, source *redis.Client, host, port string, slot int, prefix string) error {
	keys, err := source.ClusterGetKeysInSlot(ctx, slot, 1000).Result()
	if err != nil {
		return err
	}
	args := []any{"migrate", host, port, "", 0, 5000, "keys"}
	for _, k := range keys {
		if strings.HasPrefix(k, prefix) {
			args = append(args, k)
		}
	}
	if len(args) == 7 {
		return fmt.Errorf("no key of slot %d starts with %s", slot, prefix)
	}
	if err := source.Do(ctx, args...).Err(); err != nil {
		return fmt.Errorf("migrate %v: %w", args[7:], err)
	}
	return nil
}
