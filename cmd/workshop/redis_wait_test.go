package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/lockstep/lockstep/internal/launch"
	"github.com/redis/go-redis/v9"
)

// goRedisLog collects what go-redis logs.
type goRedisLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *goRedisLog) Printf(_ context.Context, format string, v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, v...))
}

// Waiting for a Redis that is still starting prints nothing: go-redis logs
// every dial its pool fails, which on the terminal reads like a failure
// (the "connection pool: failed to dial after 2 attempts").
func TestWaitingForRedisLogsNoFailedDial(t *testing.T) {
	log := &goRedisLog{}
	redis.SetLogger(log) // the test binary's only go-redis logger
	port, err := launch.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	srv := miniredis.NewMiniRedis()
	t.Cleanup(srv.Close)
	started := time.AfterFunc(300*time.Millisecond, func() { _ = srv.StartAddr(addr) })
	t.Cleanup(func() { started.Stop() })
	running, err := launch.Start("sleep", "sleep", []string{"60"}, nil, filepath.Join(t.TempDir(), "sleep.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { running.Stop(syscall.SIGKILL) })
	if err := waitRedis(context.Background(), addr, running); err != nil {
		t.Fatal(err)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	for _, line := range log.lines {
		if strings.Contains(line, "failed to dial") {
			t.Errorf("go-redis logged while Redis started: %s", line)
		}
	}
}
