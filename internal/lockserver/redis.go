package lockserver

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"time"

	"github.com/lockstep/lockstep/internal/redisclient"
	"github.com/redis/go-redis/v9"
)

// Redis is one redis-server on loopback without persistence, for tools that
// set Redis beside the other lock servers (bench/locksystems); tests use
// internal/redistest, the workshop its own.
type Redis struct {
	Addr string
	proc *process
}

// StartRedis starts a redis-server with its data under dir.
func StartRedis(ctx context.Context, dir string) (*Redis, error) {
	return startRedis(ctx, dir)
}

// startRedis starts a redis-server with its data under dir and extra
// arguments, and waits until it answers PING.
func startRedis(ctx context.Context, dir string, extra ...string) (*Redis, error) {
	bin, err := lookPath("redis-server")
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	r := &Redis{Addr: loopback(ports[0])}
	args := append([]string{"--port", strconv.Itoa(ports[0]), "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "no", "--protected-mode", "no", "--loglevel", "warning"}, extra...)
	r.proc, err = startProcess(bin, args, filepath.Join(dir, "redis.log"))
	if err != nil {
		return nil, err
	}
	err = r.proc.waitUntil(ctx, "redis-server", func(ctx context.Context) error {
		return r.with(ctx, func(ctx context.Context, rdb *redis.Client) error {
			if rdb.Ping(ctx).Val() != "PONG" {
				return errors.New("no PONG")
			}
			return nil
		})
	})
	if err != nil {
		r.Stop()
		return nil, err
	}
	return r, nil
}

// with calls f with a client of the server, each call at most a second.
func (r *Redis) with(ctx context.Context, f func(context.Context, *redis.Client) error) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	rdb := redisclient.New(redisclient.Settings{}, r.Addr)
	defer rdb.Close()
	return f(ctx, rdb)
}

// Pid is the server's process id.
func (r *Redis) Pid() int { return r.proc.Pid() }

// Stop kills the server with SIGKILL, as a crash would.
func (r *Redis) Stop() { r.proc.kill() }
