package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockstep/lockstep/internal/launch"
	"github.com/lockstep/lockstep/internal/loadgen/plan"
	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/internal/lockserver"
	"github.com/lockstep/lockstep/internal/redisclient"
)

// sentinelMaster is the name the Sentinels monitor the group under.
const sentinelMaster = "lockstep"

// Sentinel timings, scaled down like the workshop's leases so a failover
// takes seconds: a master is down after 1.5 s without an answer; a failover
// that stalls is given up after 5 s. The replicas' INFO is read every
// second instead of every ten, and a Sentinel whose clock jumped (TILT:
// this machine may be starved for seconds) waits 1 s instead of 30 before
// acting again.
const (
	sentinelDownAfter       = 1500 * time.Millisecond
	sentinelFailoverTimeout = 5 * time.Second
	// failoverWait bounds PrepareFailover and WaitFailover: a split vote
	// costs twice the failover timeout, a TILT a second more.
	failoverWait = 60 * time.Second
)

// sentinelGroup is the failover scenario's set-up: a master and two
// replicas (redis-server), three redis-sentinel processes monitoring them,
// and an observer redis-server for the holder counts, which must survive
// the failover they measure.
type sentinelGroup struct {
	servers   []*redisProc // roles change with failovers
	sentinels []*sentinelProc
	observer  *redisProc
	component report.Component

	mu     sync.Mutex
	master *redisProc // the master as of the last prepare or failover
}

type sentinelProc struct {
	addr, conf, logPath string
	proc                *launch.Process
}

// startSentinelGroup starts the group and waits until it is whole.
func startSentinelGroup(ctx context.Context, dir string) (*sentinelGroup, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("failover scenario: %w", err)
	}
	sentinelBin, err := exec.LookPath("redis-sentinel")
	if err != nil {
		return nil, fmt.Errorf("failover scenario needs redis-sentinel (Debian package redis-sentinel): %w", err)
	}
	g := &sentinelGroup{component: report.Component{Kind: "redis-server", Version: redisVersion(bin),
		Note: "a master, two replicas and three Sentinels"}}
	fail := func(err error) (*sentinelGroup, error) {
		g.stop()
		return nil, err
	}
	for i := range 3 {
		srv, err := newRedisProc(bin, fmt.Sprintf("sentinel-group-%d", i+1), dir)
		if err != nil {
			return fail(err)
		}
		g.servers = append(g.servers, srv)
	}
	g.master = g.servers[0]
	if err := g.master.start(ctx, plan.PersistenceNone); err != nil {
		return fail(err)
	}
	for _, srv := range g.servers[1:] {
		if err := srv.startReplica(ctx, g.master.addr); err != nil {
			return fail(err)
		}
	}
	if g.observer, err = newRedisProc(bin, "observer", dir); err != nil {
		return fail(err)
	}
	if err := g.observer.start(ctx, plan.PersistenceNone); err != nil {
		return fail(err)
	}
	ids := make([]string, 3)
	for i := range ids {
		b := make([]byte, 20)
		_, _ = rand.Read(b)
		ids[i] = hex.EncodeToString(b)
		port, err := launch.FreePort()
		if err != nil {
			return fail(err)
		}
		g.sentinels = append(g.sentinels, &sentinelProc{
			addr:    net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
			conf:    filepath.Join(dir, fmt.Sprintf("sentinel-%d.conf", i+1)),
			logPath: filepath.Join(dir, fmt.Sprintf("sentinel-%d.log", i+1)),
		})
	}
	// Each Sentinel is told the replicas and the other Sentinels up front
	// (the lines Sentinel itself writes to its file), so the group is whole
	// at once instead of after a few hello rounds.
	for i, s := range g.sentinels {
		_, port, _ := net.SplitHostPort(s.addr)
		lines := []string{
			"port " + port, "bind 127.0.0.1", "dir " + dir, "sentinel myid " + ids[i],
			fmt.Sprintf("sentinel monitor %s 127.0.0.1 %s 2", sentinelMaster, portOf(g.master.addr)),
			fmt.Sprintf("sentinel down-after-milliseconds %s %d", sentinelMaster, sentinelDownAfter.Milliseconds()),
			fmt.Sprintf("sentinel failover-timeout %s %d", sentinelMaster, sentinelFailoverTimeout.Milliseconds()),
		}
		for _, srv := range g.servers[1:] {
			lines = append(lines, fmt.Sprintf("sentinel known-replica %s 127.0.0.1 %s", sentinelMaster, portOf(srv.addr)))
		}
		for j, other := range g.sentinels {
			if j != i {
				lines = append(lines, fmt.Sprintf("sentinel known-sentinel %s 127.0.0.1 %s %s", sentinelMaster, portOf(other.addr), ids[j]))
			}
		}
		if err := os.WriteFile(s.conf, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			return fail(fmt.Errorf("sentinel config: %w", err))
		}
		if s.proc, err = launch.Start(fmt.Sprintf("sentinel-%d", i+1), sentinelBin, []string{s.conf, "--loglevel", "notice"}, nil, s.logPath); err != nil {
			return fail(err)
		}
		if err := waitRedis(ctx, s.addr, s.proc); err != nil {
			return fail(err)
		}
		// SENTINEL DEBUG (Redis 7) sets what the configuration file cannot.
		rdb := redisclient.New(redisclient.Settings{}, s.addr)
		err := rdb.Do(ctx, "sentinel", "debug", "info-period", 1000, "tilt-period", 1000).Err()
		rdb.Close()
		if err != nil {
			return fail(fmt.Errorf("sentinel debug: %w", err))
		}
	}
	if err := g.prepare(ctx); err != nil {
		return fail(err)
	}
	return g, nil
}

func portOf(addr string) string {
	_, port, _ := net.SplitHostPort(addr)
	return port
}

// startReplica starts a server as a replica of master.
func (s *redisProc) startReplica(ctx context.Context, master string) error {
	s.args = []string{"--replicaof", "127.0.0.1", portOf(master)}
	return s.start(ctx, plan.PersistenceNone)
}

func (g *sentinelGroup) sentinelAddrs() []string {
	var addrs []string
	for _, s := range g.sentinels {
		addrs = append(addrs, s.addr)
	}
	return addrs
}

func (g *sentinelGroup) currentMaster() *redisProc {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.master
}

// ask runs f against every Sentinel, in order, and joins their errors.
func (g *sentinelGroup) ask(ctx context.Context, f func(rdb *redis.SentinelClient) error) error {
	var errs []error
	for _, s := range g.sentinels {
		rdb := redis.NewSentinelClient(redisclient.Options(redisclient.Settings{Timeout: time.Second}, s.addr))
		errs = append(errs, f(rdb))
		rdb.Close()
	}
	return errors.Join(errs...)
}

// masterNamed is the master every Sentinel names, or an error.
func (g *sentinelGroup) masterNamed(ctx context.Context) (string, error) {
	var named []string
	err := g.ask(ctx, func(rdb *redis.SentinelClient) error {
		addr, err := rdb.GetMasterAddrByName(ctx, sentinelMaster).Result()
		if err == nil {
			named = append(named, net.JoinHostPort(addr[0], addr[1]))
		}
		return err
	})
	if err != nil {
		return "", err
	}
	for _, n := range named[1:] {
		if n != named[0] {
			return "", fmt.Errorf("the Sentinels name different masters: %v", named)
		}
	}
	return named[0], nil
}

// prepare restarts any server a failover killed as a replica of the current
// master, and waits until every Sentinel names that master and sees both
// replicas healthy, and the replicas have everything the master has.
func (g *sentinelGroup) prepare(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, failoverWait)
	defer cancel()
	master := g.currentMaster()
	for _, srv := range g.servers {
		if srv != master && srv.pid() == 0 {
			if err := srv.startReplica(ctx, master.addr); err != nil {
				return err
			}
		}
	}
	return retry(ctx, "the Sentinel group to be whole", func() error {
		named, err := g.masterNamed(ctx)
		switch {
		case err != nil:
			return err
		case named != master.addr:
			return fmt.Errorf("the Sentinels name %s, not %s", named, master.addr)
		}
		if err := g.ask(ctx, func(rdb *redis.SentinelClient) error {
			replicas, err := rdb.Replicas(ctx, sentinelMaster).Result()
			if err != nil {
				return err
			}
			healthy := 0
			for _, r := range replicas {
				if r["flags"] == "slave" && r["master-link-status"] == "ok" {
					healthy++
				}
			}
			if healthy != len(g.servers)-1 {
				return fmt.Errorf("a Sentinel sees %d healthy replicas: %v", healthy, replicas)
			}
			return nil
		}); err != nil {
			return err
		}
		return g.synced(ctx, master, len(g.servers)-1)
	})
}

// synced checks that n replicas acknowledged everything the master wrote.
func (g *sentinelGroup) synced(ctx context.Context, master *redisProc, n int) error {
	rdb := redisclient.New(redisclient.Settings{}, master.addr)
	defer rdb.Close()
	if err := rdb.Set(ctx, "lockstep:workshop:sync", time.Now().UnixNano(), 0).Err(); err != nil {
		return err
	}
	acked, err := rdb.Wait(ctx, n, time.Second).Result()
	if err == nil && acked < int64(n) {
		err = fmt.Errorf("%d of %d replicas acknowledged the master's writes", acked, n)
	}
	return err
}

// holdReplication cuts the replicas off the master, once they have all it
// wrote: each is given a master password the master does not have, and the
// master drops their links; their reconnections then fail at AUTH. Unlike
// stopping a replica (SIGSTOP, DEBUG SLEEP), nothing the master writes next
// can reach it from a socket buffer later, and unlike a proxy in between,
// the Sentinels see the replicas replicating from the master's own address
// and leave them alone.
func (g *sentinelGroup) holdReplication(ctx context.Context) error {
	master := g.currentMaster()
	if err := g.synced(ctx, master, len(g.servers)-1); err != nil {
		return err
	}
	for _, srv := range g.servers {
		if srv == master {
			continue
		}
		if err := configSet(ctx, srv.addr, "masterauth", lockserver.CutOffPassword); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return lockserver.DropReplicas(ctx, master.addr)
}

// killMaster kills the master with SIGKILL and lets its replicas, which
// have nothing more to learn from it, sync with whoever is promoted.
func (g *sentinelGroup) killMaster(ctx context.Context) (string, error) {
	master := g.currentMaster()
	master.kill()
	for _, srv := range g.servers {
		if srv != master {
			if err := configSet(ctx, srv.addr, "masterauth", ""); err != nil {
				return "", err
			}
		}
	}
	return master.addr, nil
}

// waitFailover waits until every Sentinel names a new master and that
// master has a replica again, which it needs before a WAIT can succeed.
func (g *sentinelGroup) waitFailover(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, failoverWait)
	defer cancel()
	old := g.currentMaster()
	var promoted *redisProc
	err := retry(ctx, "the Sentinels to fail over", func() error {
		named, err := g.masterNamed(ctx)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(g.servers, func(s *redisProc) bool { return s.addr == named })
		if i < 0 || g.servers[i] == old {
			return fmt.Errorf("the Sentinels still name %s", named)
		}
		promoted = g.servers[i]
		return g.synced(ctx, promoted, 1)
	})
	if err != nil {
		return "", err
	}
	g.mu.Lock()
	g.master = promoted
	g.mu.Unlock()
	return promoted.addr, nil
}

func configSet(ctx context.Context, addr, key, value string) error {
	rdb := redisclient.New(redisclient.Settings{}, addr)
	defer rdb.Close()
	if err := rdb.ConfigSet(ctx, key, value).Err(); err != nil {
		return fmt.Errorf("%s: config set %s: %w", addr, key, err)
	}
	return nil
}

// retry calls f every 50 ms until it succeeds or ctx ends.
func retry(ctx context.Context, what string, f func() error) error {
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last: %w)", what, ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (g *sentinelGroup) pids() []int {
	var pids []int
	for _, srv := range append(slices.Clone(g.servers), g.observer) {
		if srv != nil && srv.pid() != 0 {
			pids = append(pids, srv.pid())
		}
	}
	for _, s := range g.sentinels {
		if s.proc != nil && !s.proc.Exited() {
			pids = append(pids, s.proc.Pid())
		}
	}
	return pids
}

func (g *sentinelGroup) stop() {
	for _, s := range g.sentinels {
		if s.proc != nil {
			s.proc.Stop(syscall.SIGTERM)
		}
	}
	for _, srv := range append(slices.Clone(g.servers), g.observer) {
		if srv != nil {
			srv.stop()
		}
	}
}
