package main

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/lockstep/lockstep/asyncorders"
	"github.com/lockstep/lockstep/internal/crashhook"
	"github.com/lockstep/lockstep/internal/loadgen/fault"
	"github.com/lockstep/lockstep/internal/proc"
	"github.com/lockstep/lockstep/internal/sleep"
)

// injector carries out the loadgen's fault steps on the workshop's own
// processes (fault.Injector).
type injector struct {
	replicas []*replica
	redis    *redisSet
	group    *sentinelGroup        // the failover scenario's, else nil
	links    map[string]*redisLink // the partition scenario's, by replica, else nil
	// lockServers are the etcd cluster and ZooKeeper ensemble whose leader
	// the leader-failover step kills.
	lockServers *lockServers
	// workers are the order workers the worker-kill and
	// duplicate-delivery steps crash, else nil.
	workers *orderWorkers
}

var _ fault.Injector = (*injector)(nil)

// errSetUp: the step needs a set-up the workshop did not start for this
// scenario.
var errSetUp = errors.New("not in this workshop's set-up")

func (in *injector) replica(name string) (*replica, error) {
	for _, r := range in.replicas {
		if r.name == name {
			return r, nil
		}
	}
	return nil, fmt.Errorf("replica %q: %w", name, errSetUp)
}

func (in *injector) KillReplica(_ context.Context, name string) error {
	r, err := in.replica(name)
	if err != nil {
		return err
	}
	return r.sup.kill()
}

// crashBound bounds the wait for an armed order worker's death: it dies
// at its next batch, which a step's load brings within milliseconds.
const crashBound = 15 * time.Second

// CrashOrderWorker arms the first order worker's crash hook at point (its
// signal, cmd/orderworker) and returns its name once it died there.
func (in *injector) CrashOrderWorker(ctx context.Context, at string) (string, error) {
	if in.workers == nil || len(in.workers.sups) == 0 {
		return "", fmt.Errorf("order workers: %w", errSetUp)
	}
	point, err := asyncorders.ParseFaultPoint(at)
	if err != nil {
		return "", err
	}
	sig, err := crashhook.Signal(point)
	if err != nil {
		return "", err
	}
	w := in.workers.sups[0]
	return w.name, w.signalUntilExit(ctx, sig, crashBound)
}

func (in *injector) PauseOrderWorker(_ context.Context, name string, paused bool) error {
	w, err := in.workers.named(name)
	if err != nil {
		return err
	}
	if paused {
		return w.signal(syscall.SIGSTOP)
	}
	return w.signal(syscall.SIGCONT)
}

func (in *injector) StartOrderWorker(_ context.Context, name string) error {
	w, err := in.workers.named(name)
	if err != nil {
		return err
	}
	w.release()
	return nil
}

func (in *injector) OrderWorkers() []string {
	if in.workers == nil {
		return nil
	}
	names := make([]string, len(in.workers.sups))
	for i, s := range in.workers.sups {
		names[i] = s.name
	}
	return names
}

func (in *injector) StoppedReplicas() []string {
	var stopped []string
	for _, r := range in.replicas {
		if pid := r.sup.pid(); pid != 0 {
			if st, err := proc.Read(pid); err == nil && st.State == 'T' {
				stopped = append(stopped, r.name)
			}
		}
	}
	return stopped
}

func (in *injector) ContinueReplica(name string) error {
	r, err := in.replica(name)
	if err != nil {
		return err
	}
	pid := r.sup.pid()
	if pid == 0 {
		return fmt.Errorf("%s: %w", name, errNotRunning)
	}
	if err := syscall.Kill(-pid, syscall.SIGCONT); err != nil { // its own process group
		return fmt.Errorf("SIGCONT %s: %w", name, err)
	}
	return nil
}

func (in *injector) link(name string) (*redisLink, error) {
	if l := in.links[name]; l != nil {
		return l, nil
	}
	return nil, fmt.Errorf("%s's link to Redis: %w (the partition scenario starts one per replica)", name, errSetUp)
}

func (in *injector) CutRedis(name string) error {
	l, err := in.link(name)
	if err != nil {
		return err
	}
	l.partition()
	return nil
}

func (in *injector) HealRedis(name string) error {
	l, err := in.link(name)
	if err != nil {
		return err
	}
	l.heal()
	return nil
}

func (in *injector) server(i int) (*redisProc, error) {
	if i < 0 || i >= len(in.redis.servers) {
		return nil, fmt.Errorf("redis-server %d: %w (an embedded Redis cannot be killed)", i+1, errSetUp)
	}
	return in.redis.servers[i], nil
}

func (in *injector) SetPersistence(ctx context.Context, i int, persistence string) error {
	srv, err := in.server(i)
	if err != nil {
		return err
	}
	return srv.setPersistence(ctx, persistence)
}

func (in *injector) KillRedis(_ context.Context, i int) error {
	srv, err := in.server(i)
	if err != nil {
		return err
	}
	srv.kill()
	return nil
}

func (in *injector) StartRedis(ctx context.Context, i int, persistence string) error {
	srv, err := in.server(i)
	if err != nil || srv.pid() != 0 {
		return err
	}
	return srv.start(ctx, persistence)
}

func (in *injector) sentinels() (*sentinelGroup, error) {
	if in.group == nil {
		return nil, fmt.Errorf("Sentinel group: %w (the failover scenario starts one)", errSetUp)
	}
	return in.group, nil
}

func (in *injector) PrepareFailover(ctx context.Context) error {
	if in.onCluster() {
		return in.redis.clusterWhole(ctx)
	}
	g, err := in.sentinels()
	if err != nil {
		return err
	}
	return g.prepare(ctx)
}

func (in *injector) HoldReplication(ctx context.Context) error {
	if in.onCluster() {
		return in.redis.holdClusterReplication(ctx)
	}
	g, err := in.sentinels()
	if err != nil {
		return err
	}
	return g.holdReplication(ctx)
}

func (in *injector) KillMaster(ctx context.Context, key string) (string, error) {
	if in.onCluster() {
		return in.redis.killClusterMaster(ctx, key)
	}
	g, err := in.sentinels()
	if err != nil {
		return "", err
	}
	return g.killMaster(ctx)
}

func (in *injector) WaitFailover(ctx context.Context, key string) (string, error) {
	if in.onCluster() {
		return in.redis.waitClusterFailover(ctx, key)
	}
	g, err := in.sentinels()
	if err != nil {
		return "", err
	}
	return g.waitFailover(ctx)
}

func (in *injector) KillLeader(ctx context.Context, stage string) (string, error) {
	e, err := in.lockServers.ensembleOf(stage)
	if err != nil {
		return "", err
	}
	return e.KillLeader(ctx)
}

func (in *injector) WaitLeader(ctx context.Context, stage string) (string, error) {
	e, err := in.lockServers.ensembleOf(stage)
	if err != nil {
		return "", err
	}
	return e.WaitLeader(ctx)
}

func (in *injector) RestartMember(ctx context.Context, stage string) error {
	e, err := in.lockServers.ensembleOf(stage)
	if err != nil {
		return err
	}
	return e.RestartKilled(ctx)
}

func (in *injector) HasOrderServer() bool {
	return in.lockServers != nil && in.lockServers.mariadb != nil
}

// orderServerPid is the pid of the MariaDB that keeps the orders.
func (in *injector) orderServerPid() (int, error) {
	if !in.HasOrderServer() {
		return 0, fmt.Errorf("mariadbd: %w (the orders are in the embedded SQLite file)", errSetUp)
	}
	return in.lockServers.mariadb.Pid(), nil
}

// StopOrderServer stops MariaDB and waits until its main thread is
// stopped: kill returns before a busy process has taken the signal.
func (in *injector) StopOrderServer(ctx context.Context) error {
	pid, err := in.orderServerPid()
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("SIGSTOP mariadbd: %w", err)
	}
	for {
		if st, err := proc.Read(pid); err != nil || st.State == 'T' {
			return err
		}
		if err := sleep.For(ctx, 5*time.Millisecond); err != nil {
			return fmt.Errorf("mariadbd stopping: %w", err)
		}
	}
}

func (in *injector) ContinueOrderServer() error {
	pid, err := in.orderServerPid()
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		return fmt.Errorf("SIGCONT mariadbd: %w", err)
	}
	return nil
}
