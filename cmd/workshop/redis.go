package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/lockstep/lockstep/internal/launch"
	"github.com/lockstep/lockstep/internal/loadgen/plan"
	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/internal/redisclient"
)

// Redis modes of the --redis flag.
const (
	redisAuto     = "auto"
	redisServer   = "server"
	redisEmbedded = "embedded"
	redisCluster  = "cluster" // six redis-server processes: three masters, three replicas
)

// embeddedWarning is printed whenever the workshop runs on the in-process
// Redis; the report says it too.
const embeddedWarning = "using an embedded Redis (miniredis, in this process). Every stage still shows its defect, " +
	"but TIMINGS ARE NOT REPRESENTATIVE: install redis-server for real figures."

// redisSet is the workshop's private Redis: the first address holds the
// stock; all of them are the independent masters of redlock.
type redisSet struct {
	addrs     []string
	cluster   bool // addrs are the nodes of one Redis Cluster, not independent masters
	component report.Component
	servers   []*redisProc
	embedded  []*miniredis.Miniredis
}

// redisProc is one redis-server process on a fixed address and data
// directory, which a fault step may kill and start again.
type redisProc struct {
	name, bin, addr, dir, logPath string
	args                          []string // besides address, directory and persistence

	mu   sync.Mutex
	proc *launch.Process
}

// Persistence flags of a restart, by loadgen persistence mode.
var persistenceArgs = map[string][]string{
	plan.PersistenceNone:        {"--appendonly", "no"},
	plan.PersistenceAOFEverySec: {"--appendonly", "yes", "--appendfsync", "everysec"},
}

// start runs the server (again) with the given persistence and waits until
// it answers.
func (s *redisProc) start(ctx context.Context, persistence string) error {
	_, port, _ := net.SplitHostPort(s.addr)
	args := append([]string{"--port", port, "--bind", "127.0.0.1", "--dir", s.dir, "--save", "",
		"--protected-mode", "no", "--daemonize", "no", "--loglevel", "warning"}, persistenceArgs[persistence]...)
	p, err := launch.Start(s.name, s.bin, append(args, s.args...), nil, s.logPath)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
	return waitRedis(ctx, s.addr, p)
}

// kill kills the server with SIGKILL, as a crash would, and waits until it
// is gone. Its data directory stays for a restart.
func (s *redisProc) kill() {
	if p := s.current(); p != nil {
		p.Stop(syscall.SIGKILL)
	}
}

// stop stops the server politely (final flush included).
func (s *redisProc) stop() {
	if p := s.current(); p != nil {
		p.Stop(syscall.SIGTERM)
	}
}

func (s *redisProc) current() *launch.Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc
}

// pid is the running server's pid, 0 when it is down.
func (s *redisProc) pid() int {
	if p := s.current(); p != nil && !p.Exited() {
		return p.Pid()
	}
	return 0
}

// newRedisProc prepares a server on a free loopback port with its own
// data directory under dir; start runs it.
func newRedisProc(bin, name, dir string, args ...string) (*redisProc, error) {
	port, err := launch.FreePort()
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, name)
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, fmt.Errorf("redis dir: %w", err)
	}
	return &redisProc{name: name, bin: bin, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: data,
		logPath: filepath.Join(dir, name+".log"), args: args}, nil
}

// startRedis starts count independent Redis masters on free loopback
// ports: real redis-server processes when one is on PATH (mode auto or
// server), else embedded ones.
func startRedis(ctx context.Context, mode string, count int, dir string) (*redisSet, error) {
	bin, lookErr := exec.LookPath("redis-server")
	switch {
	case mode == redisEmbedded:
		return startEmbeddedRedis(count, "chosen with --redis embedded")
	case mode == redisAuto && lookErr != nil:
		return startEmbeddedRedis(count, "no redis-server on PATH")
	case (mode == redisServer || mode == redisCluster) && lookErr != nil:
		return nil, fmt.Errorf("--redis %s: %w", mode, lookErr)
	case mode == redisCluster:
		return startRedisCluster(ctx, bin, dir)
	case mode != redisAuto && mode != redisServer:
		return nil, fmt.Errorf("--redis %q: want auto, server, cluster or embedded", mode)
	}
	set := &redisSet{component: report.Component{Kind: "redis-server", Version: redisVersion(bin)}}
	for i := range count {
		if err := set.startServer(ctx, bin, fmt.Sprintf("redis-%d", i+1), dir); err != nil {
			set.stop()
			return nil, err
		}
	}
	set.component.Addr = set.addrs[0]
	return set, nil
}

// startServer adds a redis-server with args to the set and starts it. A
// free port can be taken by another program before redis-server binds it
// (or, on a cluster node, its bus port, 10000 above): then it tries
// another, as redistest does.
func (s *redisSet) startServer(ctx context.Context, bin, name, dir string, args ...string) error {
	for attempt := 1; ; attempt++ {
		srv, err := newRedisProc(bin, name, dir, args...)
		if err != nil {
			return err
		}
		err = srv.start(ctx, plan.PersistenceNone)
		if err == nil {
			s.servers = append(s.servers, srv)
			s.addrs = append(s.addrs, srv.addr)
			return nil
		}
		srv.stop()
		log, _ := os.ReadFile(srv.logPath)
		if attempt == 5 || !errors.Is(err, errExited) || !strings.Contains(string(log), "Address already in use") {
			return err
		}
	}
}

func startEmbeddedRedis(count int, why string) (*redisSet, error) {
	set := &redisSet{component: report.Component{Kind: "embedded miniredis", Note: why + "; timings not representative"}}
	for range count {
		m := miniredis.NewMiniRedis()
		// By default miniredis TTLs only move with FastForward; the lock
		// stages need them to run out on the wall clock, as in Redis.
		m.ClockTTL(true)
		if err := m.StartAddr("127.0.0.1:0"); err != nil {
			set.stop()
			return nil, fmt.Errorf("embedded redis: %w", err)
		}
		set.embedded = append(set.embedded, m)
		set.addrs = append(set.addrs, m.Addr())
	}
	set.component.Addr = set.addrs[0]
	return set, nil
}

// redisVersion asks the binary for its version ("Redis server v=7.0.15 ...").
func redisVersion(bin string) string {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return ""
	}
	for _, f := range strings.Fields(string(out)) {
		if v, ok := strings.CutPrefix(f, "v="); ok {
			return v
		}
	}
	return ""
}

func waitRedis(ctx context.Context, addr string, p *launch.Process) error {
	rdb := redisclient.New(redisclient.Settings{}, addr)
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		err := listening(ctx, addr)
		if err == nil {
			err = rdb.Ping(ctx).Err()
		}
		switch {
		case err == nil:
			return nil
		case p.Exited():
			return fmt.Errorf("redis-server on %s: %w (see its log)", addr, errExited)
		case ctx.Err() != nil:
			return fmt.Errorf("redis-server on %s not ready: %w", addr, errors.Join(err, ctx.Err()))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// listening dials addr once: go-redis logs every dial its pool fails
// ("connection pool: failed to dial after 2 attempts … connection
// refused"), which reads like a failure on the terminal while a server is
// only starting, so the client is used once the port accepts.
func listening(ctx context.Context, addr string) error {
	conn, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return conn.Close()
}

func (s *redisSet) pids() []int {
	var pids []int
	for _, srv := range s.servers {
		if pid := srv.pid(); pid != 0 {
			pids = append(pids, pid)
		}
	}
	return pids
}

func (s *redisSet) stop() {
	for _, srv := range s.servers {
		srv.stop()
	}
	for _, m := range s.embedded {
		m.Close()
	}
}

// setPersistence switches the running server's append-only file on
// (aof-everysec) or off (none), waiting until the file it starts from is
// written, so a kill right after finds every write so far in it.
func (s *redisProc) setPersistence(ctx context.Context, persistence string) error {
	rdb := redisclient.New(redisclient.Settings{}, s.addr)
	defer rdb.Close()
	on := persistence == plan.PersistenceAOFEverySec
	if on {
		if err := rdb.ConfigSet(ctx, "appendfsync", "everysec").Err(); err != nil {
			return fmt.Errorf("%s: appendfsync: %w", s.name, err)
		}
	}
	if err := rdb.ConfigSet(ctx, "appendonly", map[bool]string{true: "yes", false: "no"}[on]).Err(); err != nil {
		return fmt.Errorf("%s: appendonly: %w", s.name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		info, err := rdb.InfoMap(ctx, "persistence").Result()
		p := info["Persistence"]
		if err == nil && p["aof_enabled"] == map[bool]string{true: "1", false: "0"}[on] &&
			p["aof_rewrite_in_progress"] == "0" && p["aof_rewrite_scheduled"] == "0" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: persistence %s not in effect: %w", s.name, persistence, errors.Join(err, ctx.Err()))
		case <-time.After(20 * time.Millisecond):
		}
	}
}
