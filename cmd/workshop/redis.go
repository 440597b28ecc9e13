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
	"syscall"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockstep/lockstep/internal/loadgen"
)

// Redis modes of the --redis flag.
const (
	redisAuto     = "auto"
	redisServer   = "server"
	redisEmbedded = "embedded"
)

// embeddedWarning is printed whenever the workshop runs on the in-process
// Redis; the report says it too.
const embeddedWarning = "using an embedded Redis (miniredis, in this process). Every stage still shows its defect, " +
	"but TIMINGS ARE NOT REPRESENTATIVE: install redis-server for real figures."

// redisSet is the workshop's private Redis: the first address holds the
// stock; all of them are the independent masters of redlock.
type redisSet struct {
	addrs     []string
	component loadgen.Component
	servers   []*process
	embedded  []*miniredis.Miniredis
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
	case mode == redisServer && lookErr != nil:
		return nil, fmt.Errorf("--redis server: %w", lookErr)
	case mode != redisAuto && mode != redisServer:
		return nil, fmt.Errorf("--redis %q: want auto, server or embedded", mode)
	}
	set := &redisSet{component: loadgen.Component{Kind: "redis-server", Version: redisVersion(bin)}}
	for i := range count {
		port, err := freePort()
		if err != nil {
			set.stop()
			return nil, err
		}
		data := filepath.Join(dir, fmt.Sprintf("redis-%d", i+1))
		if err := os.MkdirAll(data, 0o755); err != nil {
			set.stop()
			return nil, fmt.Errorf("redis dir: %w", err)
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		p, err := startProcess(fmt.Sprintf("redis-%d", i+1), bin, []string{
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", data,
			"--save", "", "--appendonly", "no", "--protected-mode", "no",
			"--daemonize", "no", "--loglevel", "warning",
		}, nil, filepath.Join(dir, fmt.Sprintf("redis-%d.log", i+1)))
		if err != nil {
			set.stop()
			return nil, err
		}
		set.servers = append(set.servers, p)
		set.addrs = append(set.addrs, addr)
		if err := waitRedis(ctx, addr, p); err != nil {
			set.stop()
			return nil, err
		}
	}
	set.component.Addr = set.addrs[0]
	return set, nil
}

func startEmbeddedRedis(count int, why string) (*redisSet, error) {
	set := &redisSet{component: loadgen.Component{Kind: "embedded miniredis", Note: why + "; timings not representative"}}
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

func waitRedis(ctx context.Context, addr string, p *process) error {
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		err := rdb.Ping(ctx).Err()
		switch {
		case err == nil:
			return nil
		case p.exited():
			return fmt.Errorf("redis-server on %s: %w (see its log)", addr, errExited)
		case ctx.Err() != nil:
			return fmt.Errorf("redis-server on %s not ready: %w", addr, errors.Join(err, ctx.Err()))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *redisSet) pids() []int {
	var pids []int
	for _, p := range s.servers {
		pids = append(pids, p.pid())
	}
	return pids
}

func (s *redisSet) stop() {
	for _, p := range s.servers {
		p.stop(syscall.SIGTERM)
	}
	for _, m := range s.embedded {
		m.Close()
	}
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
