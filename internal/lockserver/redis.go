package lockserver

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"time"

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
	bin, err := lookPath("redis-server")
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	r := &Redis{Addr: loopback(ports[0])}
	r.proc, err = startProcess(bin, []string{"--port", strconv.Itoa(ports[0]), "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "no", "--protected-mode", "no", "--loglevel", "warning"}, filepath.Join(dir, "redis.log"))
	if err != nil {
		return nil, err
	}
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr, MaxRetries: -1})
	defer rdb.Close()
	err = r.proc.waitUntil(ctx, "redis-server", func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if rdb.Ping(ctx).Val() != "PONG" {
			return errors.New("no PONG")
		}
		return nil
	})
	if err != nil {
		r.Stop()
		return nil, err
	}
	return r, nil
}

// Pid is the server's process id.
func (r *Redis) Pid() int { return r.proc.Pid() }

// Stop kills the server.
func (r *Redis) Stop() { r.proc.kill() }
