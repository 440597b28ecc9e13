// Package redistest starts real redis-server processes for tests, each on a
// free loopback port with a private data directory and no persistence, and
// stops them when the test ends.
//
// Without redis-server on PATH a test is skipped, except under CI=true where
// a missing server is a failure: CI must never pass by testing nothing.
package redistest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is one redis-server process owned by a test.
type Server struct {
	t    testing.TB
	Addr string
	port int
	dir  string
	args []string
	cmd  *exec.Cmd
	done chan struct{}
}

// Binary returns the redis-server path, failing (CI) or skipping the test
// when there is none.
func Binary(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err == nil {
		return path
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("redis-server not found on PATH (CI=true: the test command must install it): %v", err)
	}
	t.Skipf("redis-server not found on PATH: %v (run `make test`, which installs it)", err)
	return ""
}

// Start launches a redis-server for the test and registers its shutdown.
// Extra arguments are appended to the command line (e.g. "--appendonly", "yes").
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	bin := Binary(t)
	s := &Server{t: t, dir: t.TempDir(), args: extra}
	s.port = FreePort(t)
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
	s.start(bin)
	t.Cleanup(s.Stop)
	return s
}

func (s *Server) start(bin string) {
	s.t.Helper()
	args := append([]string{
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--dir", s.dir,
		"--save", "",
		"--appendonly", "no",
		"--protected-mode", "no",
		"--daemonize", "no",
		"--loglevel", "warning",
	}, s.args...)
	cmd := exec.Command(bin, args...)
	logFile, err := os.Create(filepath.Join(s.dir, "redis.log"))
	if err != nil {
		s.t.Fatalf("redis log: %v", err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start redis-server: %v", err)
	}
	s.cmd, s.done = cmd, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); logFile.Close(); close(done) }(s.done)
	if err := s.waitReady(5 * time.Second); err != nil {
		s.Stop()
		log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
		s.t.Fatalf("redis-server on %s not ready: %v\n%s", s.Addr, err, log)
	}
}

func (s *Server) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		conn, err := net.DialTimeout("tcp", s.Addr, 200*time.Millisecond)
		if err == nil {
			_ = conn.SetDeadline(time.Now().Add(time.Second))
			_, err = conn.Write([]byte("PING\r\n"))
			if err == nil {
				var line string
				line, err = bufio.NewReader(conn).ReadString('\n')
				if err == nil && !strings.HasPrefix(line, "+PONG") {
					err = fmt.Errorf("unexpected reply %q", line)
				}
			}
			conn.Close()
			if err == nil {
				return nil
			}
		}
		select {
		case <-s.done:
			return fmt.Errorf("redis-server exited")
		default:
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the server (SIGKILL: no shutdown save) and waits for it to exit.
// Stopping a stopped server does nothing.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// Restart starts the server again on the same port and data directory.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	s.start(Binary(s.t))
}

// Client returns a go-redis client for the server, closed when the test ends.
func (s *Server) Client(t testing.TB) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("ping %s: %v", s.Addr, err)
	}
	return rdb
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
