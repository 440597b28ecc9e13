// Package redistest starts real redis-server processes for tests, each on a
// free loopback port with a private data directory and no persistence, and
// stops them when the test ends — or kills them when the test process dies
// without stopping them (internal/childproc).
//
// Without redis-server on PATH a test is skipped, except under CI=true where
// a missing server is a failure: CI must never pass by testing nothing.
package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/childproc"
	"github.com/lockstep/lockstep/internal/launch"
	"github.com/lockstep/lockstep/internal/redisclient"
	"github.com/redis/go-redis/v9"
)

// Server is one redis-server process owned by a test.
type Server struct {
	t    testing.TB
	Addr string
	port int
	dir  string
	args []string
	env  []string // added to the process's environment
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
	return StartWithEnv(t, nil, extra...)
}

// StartWithEnv is Start with env added to the server's environment (an
// LD_PRELOAD that slows its disk, say); Restart keeps it.
func StartWithEnv(t testing.TB, env []string, extra ...string) *Server {
	t.Helper()
	bin := Binary(t)
	s := &Server{t: t, dir: t.TempDir(), args: extra, env: env}
	t.Cleanup(s.Stop)
	if err := s.startOnFreePort(bin); err != nil {
		t.Fatal(err)
	}
	return s
}

// StartMain launches a redis-server for a package's TestMain, which has no
// testing.TB: a package's Example functions need a server too, and cannot
// start one themselves. Its data goes to dir, which must exist. The caller
// stops it after m.Run; Restart needs a server from Start. Without
// redis-server on PATH the error wraps exec.ErrNotFound.
func StartMain(dir string, extra ...string) (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server: %w", err)
	}
	s := &Server{dir: dir, args: extra}
	if err := s.startOnFreePort(bin); err != nil {
		return nil, err
	}
	return s, nil
}

// startOnFreePort starts the server on a free loopback port. FreePort's
// port can be taken by another test before redis-server binds it: then it
// picks another.
func (s *Server) startOnFreePort(bin string) error {
	for attempt := 1; ; attempt++ {
		port, err := launch.FreePort()
		if err != nil {
			return err
		}
		s.port = port
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
		err = s.start(bin)
		if err == nil {
			return nil
		}
		log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
		if attempt == 5 || !strings.Contains(string(log), "Address already in use") {
			return fmt.Errorf("redis-server on %s not ready: %w\n%s", s.Addr, err, log)
		}
	}
}

func (s *Server) start(bin string) error {
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
	if s.env != nil {
		cmd.Env = append(os.Environ(), s.env...)
	}
	logFile, err := os.Create(filepath.Join(s.dir, "redis.log"))
	if err != nil {
		return fmt.Errorf("redis log: %w", err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// SIGKILL when the test process ends however it ends (its -timeout, a
	// kill): no cleanup runs then, and the server would be left running.
	exited, err := childproc.Start(cmd, syscall.SIGKILL)
	if err != nil {
		logFile.Close()
		return fmt.Errorf("start redis-server: %w", err)
	}
	s.cmd, s.done = cmd, make(chan struct{})
	go func(done chan struct{}) { <-exited; logFile.Close(); close(done) }(s.done)
	if err := s.waitReady(5 * time.Second); err != nil {
		s.Stop()
		return err
	}
	return nil
}

// waitReady waits until this process answers on s.Addr: the process_id in
// INFO proves the answer does not come from another test's server that
// took the port first.
func (s *Server) waitReady(timeout time.Duration) error {
	rdb := redisclient.New(redisclient.Settings{Timeout: 200 * time.Millisecond}, s.Addr)
	defer rdb.Close()
	want := strconv.Itoa(s.cmd.Process.Pid)
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		info, err := rdb.InfoMap(ctx, "server").Result()
		cancel()
		if err == nil {
			if pid := info["Server"]["process_id"]; pid != want {
				return fmt.Errorf("port answered by redis-server pid %s, not ours (%s)", pid, want)
			}
			return nil
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

// Pid is the server's process id (0 once stopped).
func (s *Server) Pid() int {
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
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

// Pause stops the server's process (SIGSTOP) until Continue, or the end of
// the test: a master stalled (a long fork, a swapped-out process) that
// still accepts connections and takes in requests, and runs them, in
// order, once it continues.
func (s *Server) Pause() {
	s.t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		s.t.Fatalf("pause redis-server on %s: %v", s.Addr, err)
	}
	s.t.Cleanup(s.Continue)
}

// Continue lets a paused server run again (SIGCONT).
func (s *Server) Continue() {
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(syscall.SIGCONT)
	}
}

// Restart starts the server again on the same port and data directory.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	if err := s.start(Binary(s.t)); err != nil {
		log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
		s.t.Fatalf("redis-server restart on %s: %v\n%s", s.Addr, err, log)
	}
}

// Client returns a go-redis client for the server, closed when the test ends.
func (s *Server) Client(t testing.TB) *redis.Client {
	t.Helper()
	rdb := redisclient.New(redisclient.Settings{}, s.Addr)
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
	port, err := launch.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}
