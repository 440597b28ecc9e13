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
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockstep/lockstep/internal/childproc"
	"github.com/lockstep/lockstep/internal/launch"
)

// redisServer is the redis-server this command starts for itself, so every
// contender is measured against the same fresh, persistence-free server.
// (internal/redistest does the same for tests but needs a testing.TB.)
type redisServer struct {
	Addr    string
	Version string
	dir     string
	cmd     *exec.Cmd
	exited  chan struct{}
}

// startRedis launches bin on a free loopback port. With cpus set (a taskset
// CPU list such as "0") the server is pinned to those CPUs.
func startRedis(ctx context.Context, bin, cpus string) (*redisServer, error) {
	dir, err := os.MkdirTemp("", "lockstep-peers-redis-")
	if err != nil {
		return nil, fmt.Errorf("redis data dir: %w", err)
	}
	// A free port can be taken between our probe and redis-server's bind;
	// retry a few times rather than fail the whole run.
	for attempt := 0; ; attempt++ {
		s, err := launchRedis(ctx, bin, cpus, dir)
		if err == nil {
			return s, nil
		}
		if attempt == 2 || ctx.Err() != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
}

func launchRedis(ctx context.Context, bin, cpus, dir string) (*redisServer, error) {
	port, err := launch.FreePort()
	if err != nil {
		return nil, err
	}
	args := []string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--dir", dir,
		"--save", "",
		"--appendonly", "no",
		"--protected-mode", "no",
		"--daemonize", "no",
		"--loglevel", "warning",
	}
	name := bin
	if cpus != "" {
		name, args = "taskset", append([]string{"-c", cpus, bin}, args...)
	}
	logFile, err := os.Create(filepath.Join(dir, "redis.log"))
	if err != nil {
		return nil, fmt.Errorf("redis log: %w", err)
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// If this command dies without stopping the server, the server dies too.
	exited, err := childproc.Start(cmd, syscall.SIGKILL)
	if err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	s := &redisServer{
		Addr:   net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		dir:    dir,
		cmd:    cmd,
		exited: make(chan struct{}),
	}
	go func() { <-exited; logFile.Close(); close(s.exited) }()
	if err := s.waitReady(ctx, 5*time.Second); err != nil {
		s.kill()
		log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
		return nil, fmt.Errorf("redis-server on %s not ready: %w\n%s", s.Addr, err, log)
	}
	return s, nil
}

// waitReady pings until the server answers and records its version.
func (s *redisServer) waitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer rdb.Close()
	for {
		info, err := rdb.InfoMap(ctx, "server").Result()
		if err == nil {
			s.Version = info["Server"]["redis_version"]
			return nil
		}
		select {
		case <-s.exited:
			return errors.New("redis-server exited")
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %w)", ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Stop shuts the server down (SIGTERM, then SIGKILL after 2s) and removes
// its data directory.
func (s *redisServer) Stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(2 * time.Second):
		s.kill()
	}
	os.RemoveAll(s.dir)
}

func (s *redisServer) kill() {
	_ = s.cmd.Process.Kill()
	<-s.exited
}
