// Package lockserver runs the lock servers the articles set beside Redis —
// an etcd cluster, a ZooKeeper ensemble and a MariaDB server — and Redis
// itself (with a replica to fail over to) as child processes on free
// loopback ports with private data directories, for the workshop, the
// benchmarks and tests. Each Stop kills what its Start began.
package lockserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/lockstep/lockstep/internal/childproc"
)

// ErrNotInstalled is returned by a Start whose server binary is not on PATH.
var ErrNotInstalled = errors.New("lockserver: not installed")

// errExited is a server that exited before it was ready: most often a port
// freePorts found free that another process took before the server bound
// it (tests start servers in parallel), so its Start tries again.
var errExited = errors.New("exited before it was ready")

// startAttempts bounds the tries of a Start whose server exited early.
const startAttempts = 3

// retryExited runs start until it succeeds, fails otherwise than by a
// server's early exit, or has failed startAttempts times. Each attempt gets
// a directory of its own (dir itself first), as a failed one may leave a
// data directory behind that names the ports it was given.
func retryExited[T any](dir string, start func(dir string) (T, error)) (T, error) {
	var (
		server T
		err    error
	)
	for attempt := range startAttempts {
		d := dir
		if attempt > 0 {
			d = filepath.Join(dir, "attempt-"+strconv.Itoa(attempt+1))
			if err := os.MkdirAll(d, 0o755); err != nil {
				return server, err
			}
		}
		if server, err = start(d); !errors.Is(err, errExited) {
			return server, err
		}
	}
	return server, fmt.Errorf("%d attempts: %w", startAttempts, err)
}

// lookPath finds a server binary, wrapping ErrNotInstalled when absent.
func lookPath(name string) (string, error) {
	path, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrNotInstalled, name, err)
	}
	return path, nil
}

// process is one server process: its own process group, its output in a
// log file, reaped by a goroutine that closes done.
type process struct {
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
}

func startProcess(bin string, args []string, logPath string) (*process, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// SIGKILL when this process ends however it ends: a test binary killed
	// or ended by its -timeout runs no Stop.
	exited, err := childproc.Start(cmd, syscall.SIGKILL)
	if err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	p := &process{cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		<-exited
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process id.
func (p *process) Pid() int { return p.cmd.Process.Pid }

// exited reports whether the process is gone.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signal sends sig to the process's group.
func (p *process) signal(sig syscall.Signal) {
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
}

// kill ends the process group with SIGKILL and waits for the process.
func (p *process) kill() {
	if p == nil {
		return
	}
	p.signal(syscall.SIGCONT) // a stopped process is killed all the same; continue it for tidiness
	p.signal(syscall.SIGKILL)
	<-p.done
}

// logTail is the end of the process's log, for errors.
func (p *process) logTail() string {
	b, _ := os.ReadFile(p.logPath)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// waitUntil polls ready until it succeeds, the process exits or ctx ends.
func (p *process) waitUntil(ctx context.Context, what string, ready func(context.Context) error) error {
	for {
		err := ready(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s %w: %w\n%s", what, errExited, err, p.logTail())
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w (last error: %w)\n%s", what, ctx.Err(), err, p.logTail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// member is one server of an etcd cluster or a ZooKeeper ensemble: its
// command, and its process, replaced when it is started again.
type member struct {
	name, bin string
	args      []string
	logPath   string

	mu   sync.Mutex
	proc *process
}

func (m *member) start() error {
	p, err := startProcess(m.bin, m.args, m.logPath)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.proc = p
	m.mu.Unlock()
	return nil
}

func (m *member) current() *process {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.proc
}

// startMembers starts every member, then waits until each is ready
// (ready(i) checks member i); on a failure it kills them all.
func startMembers(ctx context.Context, what string, members []*member, ready func(i int) func(context.Context) error) error {
	for _, m := range members {
		if err := m.start(); err != nil {
			stopMembers(members)
			return err
		}
	}
	for i, m := range members {
		if err := m.current().waitUntil(ctx, what+" "+m.name, ready(i)); err != nil {
			stopMembers(members)
			return err
		}
	}
	return nil
}

// stopMembers kills every member that was started.
func stopMembers(members []*member) {
	for _, m := range members {
		if p := m.current(); p != nil {
			p.kill()
		}
	}
}

// freePorts returns n loopback TCP ports that were free a moment ago, held
// open together so that they differ.
func freePorts(n int) ([]int, error) {
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}

func loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
