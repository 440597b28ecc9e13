package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"github.com/lockstep/lockstep/internal/loadgen/plan"
)

// topology is what the scenario's fault steps need beyond the plain set-up
// (independent Redis masters, the shops straight on them).
type topology struct {
	// sentinel: the failover scenario's Sentinel group holds the stock;
	// the independent masters serve redlock only.
	sentinel bool
	// links: each shop reaches the stock's Redis through a link the
	// partition scenario can cut.
	links bool
	// restarts: the redis-restart scenario kills and restarts the stock's
	// redis-server.
	restarts bool
	// cluster: the reshard scenario moves slots of a Redis Cluster.
	cluster bool
}

func topologyOf(sc *plan.Scenario) (topology, error) {
	var t topology
	for _, run := range sc.Runs {
		if run.Fault == nil {
			continue
		}
		switch {
		case run.Fault.Kind == plan.FaultFailover && run.Fault.Target == plan.FailoverMaster:
			t.sentinel = true
		case run.Fault.Kind == plan.FaultPartition:
			t.links = true
		case run.Fault.Kind == plan.FaultRedisRestart:
			t.restarts = true
		case run.Fault.Kind == plan.FaultReshard, run.Fault.Kind == plan.FaultReshardHalfWay:
			t.cluster = true
		}
	}
	if t.sentinel && t.links {
		return t, errors.New("a failover and a partition need different set-ups: run them as two scenarios")
	}
	return t, nil
}

// redisMode is the --redis mode the topology runs with: a Redis Cluster
// when a step moves its slots (auto chooses it), else the flag's.
func (t topology) redisMode(flag string) (string, error) {
	switch {
	case !t.cluster:
		return flag, nil
	case flag == redisAuto || flag == redisCluster:
		return redisCluster, nil
	}
	return "", fmt.Errorf("the reshard scenario moves a Redis Cluster's slots: run it with --redis cluster (or auto), not %s", flag)
}

// redisWiring is how the shops reach Redis in a topology.
type redisWiring struct {
	rs    *redisSet
	group *sentinelGroup
	links map[string]*redisLink
	// holders, on a Redis Cluster, keeps the track_holders counts on a
	// redis-server of its own, which a failover of the cluster cannot lose.
	holders *redisProc
}

func startWiring(ctx context.Context, t topology, rs *redisSet, replicas int, dir string) (*redisWiring, error) {
	w := &redisWiring{rs: rs}
	if (t.sentinel || t.links) && rs.embedded != nil {
		return nil, errors.New("the failover and partition scenarios need redis-server, not the embedded Redis")
	}
	if (t.links || t.restarts) && rs.cluster {
		return nil, errors.New("the partition and redis-restart scenarios run on independent Redis servers, not --redis cluster")
	}
	if rs.cluster {
		bin, err := exec.LookPath("redis-server")
		if err == nil {
			w.holders, err = newRedisProc(bin, "holders", dir)
		}
		if err == nil {
			err = w.holders.start(ctx, plan.PersistenceNone)
		}
		if err != nil {
			return nil, fmt.Errorf("the holder counts' redis-server: %w", err)
		}
	}
	// On a cluster the failover step kills one of its masters instead.
	if t.sentinel && !rs.cluster {
		g, err := startSentinelGroup(ctx, dir)
		if err != nil {
			return nil, err
		}
		w.group = g
	}
	if t.links {
		w.links = map[string]*redisLink{}
		for i := range replicas {
			l, err := startLink(rs.addrs[0])
			if err != nil {
				w.stop()
				return nil, err
			}
			w.links[replicaName(i)] = l
		}
	}
	return w, nil
}

// env is a replica's Redis settings. Every one is set, empty or not, so the
// workshop's own environment cannot leak into the shops.
func (w *redisWiring) env(name string) []string {
	addrs := w.rs.addrs
	sentinels, master, holders, cluster := "", "", "", ""
	switch {
	case w.rs.cluster:
		addrs, cluster, holders = nil, strings.Join(w.rs.addrs, ","), w.holders.addr
	case w.group != nil:
		sentinels, master, holders = strings.Join(w.group.sentinelAddrs(), ","), sentinelMaster, w.group.observer.addr
	case w.links != nil:
		// The stock through the cuttable link; the holder counts straight,
		// so the partition does not hide them.
		addrs = append([]string{w.links[name].addr()}, addrs[1:]...)
		holders = w.rs.addrs[0]
	}
	return []string{
		"LOCKSTEP_REDIS_ADDR=" + strings.Join(addrs, ","),
		"LOCKSTEP_REDIS_SENTINEL=" + sentinels,
		"LOCKSTEP_REDIS_MASTER=" + master,
		"LOCKSTEP_HOLDERS_REDIS_ADDR=" + holders,
		"LOCKSTEP_REDIS_CLUSTER=" + cluster,
	}
}

// loadgenRedis is the Redis address the load generator reads lock keys
// from, and where it finds the holder counts.
func (w *redisWiring) loadgenRedis() (addr, holders string) {
	if w.rs.cluster {
		return "", w.holders.addr // the stock: loadgen.Config.RedisCluster
	}
	if w.group != nil {
		// The stock moves with failovers; the holder counts do not.
		return "", w.group.observer.addr
	}
	return w.rs.addrs[0], ""
}

// loadgenCluster are the seeds of the cluster the shops run on, if they do.
func (w *redisWiring) loadgenCluster() []string {
	if w.rs.cluster {
		return w.rs.addrs
	}
	return nil
}

func (w *redisWiring) pids() []int {
	pids := w.rs.pids()
	if w.holders != nil {
		pids = append(pids, w.holders.pid())
	}
	if w.group != nil {
		pids = append(pids, w.group.pids()...)
	}
	return pids
}

func (w *redisWiring) stop() {
	if w.holders != nil {
		w.holders.stop()
	}
	for _, l := range w.links {
		_ = l.close()
	}
	if w.group != nil {
		w.group.stop()
	}
}
