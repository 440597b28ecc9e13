package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/plan"
	"github.com/lockstep/lockstep/internal/lockserver"
	"github.com/lockstep/lockstep/internal/redisclient"
)

// The failover step on --redis cluster: the master that holds the stage's
// lock key is killed after every replica was cut off from its master, and
// the cluster promotes that master's replica, which never saw the lock — as
// the Sentinel group's failover does on independent servers.

// clusterFailoverWait bounds a promotion: the node timeout, the replica's
// election, and the killed node rejoining as a replica.
const clusterFailoverWait = 60 * time.Second

// clusterNodes describes every running node: its address, role and, for a
// replica, whether its link to its master is up.
func (s *redisSet) clusterNodes(ctx context.Context) (masters, replicas []*redisProc, err error) {
	for _, srv := range s.servers {
		if srv.pid() == 0 {
			continue
		}
		rdb := redisclient.New(redisclient.Settings{}, srv.addr)
		info, ierr := rdb.InfoMap(ctx, "replication").Result()
		_ = rdb.Close()
		if ierr != nil {
			return nil, nil, fmt.Errorf("%s: %w", srv.addr, ierr)
		}
		if info["Replication"]["role"] == "master" {
			masters = append(masters, srv)
		} else {
			replicas = append(replicas, srv)
		}
	}
	return masters, replicas, nil
}

// clusterWhole waits until every running node serves every slot, every
// master has a replica and every replica's link is up.
func (s *redisSet) clusterWhole(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, clusterFailoverWait)
	defer cancel()
	return retry(ctx, "the cluster to be whole", func() error {
		var running []string
		for _, srv := range s.servers {
			if srv.pid() != 0 {
				running = append(running, srv.addr)
			}
		}
		if err := waitClusterServing(ctx, running, time.Second); err != nil {
			return err
		}
		masters, replicas, err := s.clusterNodes(ctx)
		if err != nil {
			return err
		}
		if len(masters) != clusterNodes/2 || len(replicas) != clusterNodes/2 {
			return fmt.Errorf("%d masters, %d replicas", len(masters), len(replicas))
		}
		for _, r := range replicas {
			if err := linkUp(ctx, r.addr); err != nil {
				return err
			}
		}
		return nil
	})
}

func linkUp(ctx context.Context, addr string) error {
	rdb := redisclient.New(redisclient.Settings{}, addr)
	defer rdb.Close()
	info, err := rdb.InfoMap(ctx, "replication").Result()
	if err != nil {
		return err
	}
	if info["Replication"]["master_link_status"] != "up" {
		return fmt.Errorf("replica %s: link down", addr)
	}
	return nil
}

// holdClusterReplication cuts every replica off from its master: a master
// password its master does not have, and the masters drop their replicas'
// links (the Sentinel step's trick).
func (s *redisSet) holdClusterReplication(ctx context.Context) error {
	masters, replicas, err := s.clusterNodes(ctx)
	if err != nil {
		return err
	}
	for _, r := range replicas {
		if err := configSet(ctx, r.addr, "masterauth", lockserver.CutOffPassword); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, m := range masters {
		if err := lockserver.DropReplicas(ctx, m.addr); err != nil {
			return err
		}
	}
	return nil
}

// killClusterMaster kills the master that serves key's slot and gives the
// other replicas their links back.
func (s *redisSet) killClusterMaster(ctx context.Context, key string) (string, error) {
	rdb := redisclient.NewCluster(redisclient.Settings{}, s.addrs)
	master, err := rdb.MasterForKey(ctx, key)
	_ = rdb.Close()
	if err != nil {
		return "", err
	}
	i := slices.IndexFunc(s.servers, func(p *redisProc) bool { return p.addr == master.Options().Addr })
	if i < 0 {
		return "", fmt.Errorf("master %s of %s is not the workshop's", master.Options().Addr, key)
	}
	s.servers[i].kill()
	for _, srv := range s.servers {
		if srv.pid() != 0 {
			if err := configSet(ctx, srv.addr, "masterauth", ""); err != nil {
				return "", err
			}
		}
	}
	return s.servers[i].addr, nil
}

// waitClusterFailover waits until another master serves key's slot, then
// starts the killed node again (it rejoins as that master's replica; the
// next failover step waits until it has); it returns the promoted master.
func (s *redisSet) waitClusterFailover(ctx context.Context, key string) (string, error) {
	wait, cancel := context.WithTimeout(ctx, clusterFailoverWait)
	defer cancel()
	var killed *redisProc
	var seeds []string
	for _, srv := range s.servers {
		if srv.pid() == 0 {
			killed = srv
		} else {
			seeds = append(seeds, srv.addr)
		}
	}
	if killed == nil {
		return "", fmt.Errorf("no killed cluster node to fail over from")
	}
	var promoted string
	err := retry(wait, "the cluster to promote a replica", func() error {
		if err := waitClusterServing(wait, seeds, time.Second); err != nil {
			return err
		}
		rdb := redisclient.NewCluster(redisclient.Settings{}, seeds)
		defer rdb.Close()
		master, err := rdb.MasterForKey(wait, key)
		if err != nil {
			return err
		}
		if promoted = master.Options().Addr; promoted == killed.addr {
			return fmt.Errorf("%s still named the master of %s", promoted, key)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	if err := killed.start(ctx, plan.PersistenceNone); err != nil {
		return "", fmt.Errorf("restart %s: %w", killed.addr, err)
	}
	return promoted, nil
}

// onCluster says whether the workshop's Redis is a Redis Cluster.
func (in *injector) onCluster() bool { return in.redis != nil && in.redis.cluster }
