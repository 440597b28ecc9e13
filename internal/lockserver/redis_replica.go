package lockserver

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockstep/lockstep/internal/redisclient"
	"github.com/lockstep/lockstep/internal/sleep"
)

// CutOffPassword is a master password no master here has: a replica told
// it is refused at its next AUTH, and stays without a link.
const CutOffPassword = "lockstep-cut-off"

// StartReplica starts a redis-server under dir as a replica of r and
// waits until its link to r is up.
func (r *Redis) StartReplica(ctx context.Context, dir string) (*Redis, error) {
	host, port, err := net.SplitHostPort(r.Addr)
	if err != nil {
		return nil, err
	}
	// The first sync at once, not after diskless sync's 5 s wait for more
	// replicas.
	err = r.with(ctx, func(ctx context.Context, rdb *redis.Client) error {
		return rdb.ConfigSet(ctx, "repl-diskless-sync-delay", "0").Err()
	})
	if err != nil {
		return nil, fmt.Errorf("master %s: %w", r.Addr, err)
	}
	replica, err := startRedis(ctx, dir, "--replicaof", host, port)
	if err != nil {
		return nil, err
	}
	err = poll(ctx, "the replica's link to its master", func(ctx context.Context) error {
		return replica.with(ctx, func(ctx context.Context, rdb *redis.Client) error {
			info, err := rdb.InfoMap(ctx, "replication").Result()
			if err != nil {
				return err
			}
			if st := info["Replication"]["master_link_status"]; st != "up" {
				return fmt.Errorf("link %s", st)
			}
			return nil
		})
	})
	if err != nil {
		replica.Stop()
		return nil, err
	}
	return replica, nil
}

// CutOff leaves replica r without a link to master: r is told a master
// password master does not have, and master drops its replicas. Writes to
// master from then on never reach r — what a master killed right after a
// write, before it shipped it, leaves its replica with.
func (r *Redis) CutOff(ctx context.Context, master *Redis) error {
	err := r.with(ctx, func(ctx context.Context, rdb *redis.Client) error {
		return rdb.ConfigSet(ctx, "masterauth", CutOffPassword).Err()
	})
	if err != nil {
		return fmt.Errorf("replica %s: %w", r.Addr, err)
	}
	return DropReplicas(ctx, master.Addr)
}

// DropReplicas makes the master at addr drop its replicas' links and waits
// until it counts none. A replica told CutOffPassword cannot link again:
// what the master writes from then on reaches no replica.
func DropReplicas(ctx context.Context, addr string) error {
	rdb := redisclient.New(redisclient.Settings{}, addr)
	defer rdb.Close()
	if err := rdb.ClientKillByFilter(ctx, "TYPE", "replica").Err(); err != nil {
		return fmt.Errorf("master %s: drop the replicas' links: %w", addr, err)
	}
	return poll(ctx, "the master to lose its replicas", func(ctx context.Context) error {
		info, err := rdb.InfoMap(ctx, "replication").Result()
		if err != nil {
			return err
		}
		if n := info["Replication"]["connected_slaves"]; n != "0" {
			return fmt.Errorf("%s: %s replicas still connected", addr, n)
		}
		return nil
	})
}

// Promote makes replica r a master (REPLICAOF NO ONE), as Sentinel does
// once it has agreed that the master is down.
func (r *Redis) Promote(ctx context.Context) error {
	return r.with(ctx, func(ctx context.Context, rdb *redis.Client) error {
		if err := rdb.ConfigSet(ctx, "masterauth", "").Err(); err != nil {
			return err
		}
		return rdb.SlaveOf(ctx, "NO", "ONE").Err()
	})
}

// poll calls f every 50 ms until it succeeds or ctx ends.
func poll(ctx context.Context, what string, f func(context.Context) error) error {
	for {
		err := f(ctx)
		if err == nil {
			return nil
		}
		if serr := sleep.For(ctx, 50*time.Millisecond); serr != nil {
			return fmt.Errorf("waiting for %s: %w (last: %w)", what, serr, err)
		}
	}
}
