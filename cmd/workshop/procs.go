package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/lockstep/lockstep/internal/childproc"
	"github.com/lockstep/lockstep/internal/proc"
)

// stopGrace is how long a child gets to exit after its polite signal before
// its whole process group is killed.
const stopGrace = 5 * time.Second

// process is one child process of the workshop, in a process group of its
// own so that stopping it also stops what it forked (nginx's workers), and
// so that a Ctrl-C on the terminal reaches only the workshop, which then
// stops the children in order.
type process struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed once Wait returned
	err  error         // Wait's result, set before done closes
}

// startProcess starts bin with its output appended to logPath.
func startProcess(name, bin string, args, env []string, logPath string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s: log: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// The parent-death signal: if the workshop itself is killed outright
	// (SIGKILL), the kernel signals the child instead of leaving it
	// running. SIGTERM, not SIGKILL: nginx's master must live long enough
	// to stop its workers. childproc forks from a thread that lives as
	// long as the child, since the signal fires when that thread exits.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	exited, err := childproc.Start(cmd, syscall.SIGTERM)
	if err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = <-exited
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *process) pid() int { return p.cmd.Process.Pid }

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends sig to the process, waits up to stopGrace, then kills its
// whole group; it returns once the process has exited and its group is
// empty, so nothing it forked outlives it.
func (p *process) stop(sig syscall.Signal) {
	pgid := p.pid() // Setpgid: the group id is the leader's pid
	if !p.exited() {
		_ = p.cmd.Process.Signal(sig)
		_ = p.cmd.Process.Signal(syscall.SIGCONT) // a stopped process must run to exit
		select {
		case <-p.done:
		case <-time.After(stopGrace):
		}
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	<-p.done
	deadline := time.Now().Add(stopGrace)
	for len(proc.Group(pgid)) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
}

// supervised keeps a process running: when it exits on its own (a replica
// that crashed while holding a lock) it is started again.
type supervised struct {
	name  string
	start func() (*process, error)
	log   *slog.Logger

	mu       sync.Mutex
	current  *process
	stopping bool
	restarts int
	stopped  chan struct{}
	// held, while open, keeps the supervisor from starting the process
	// again (signalUntilExit); closed by release or stop.
	held chan struct{}
}

// restartDelay spaces restarts so a child that cannot start does not spin.
const restartDelay = 100 * time.Millisecond

func supervise(name string, log *slog.Logger, start func() (*process, error)) (*supervised, error) {
	p, err := start()
	if err != nil {
		return nil, err
	}
	s := &supervised{name: name, start: start, log: log, current: p, stopped: make(chan struct{})}
	go s.loop()
	return s, nil
}

func (s *supervised) loop() {
	defer close(s.stopped)
	for {
		s.mu.Lock()
		p := s.current
		s.mu.Unlock()
		<-p.done
		time.Sleep(restartDelay)
		s.mu.Lock()
		held := s.held
		s.mu.Unlock()
		if held != nil {
			<-held
		}
		s.mu.Lock()
		if s.stopping {
			s.mu.Unlock()
			return
		}
		s.restarts++
		// Crash steps and the crash scenario end a replica on purpose (exit
		// status 137 is their SIGKILL), and a run's front door restarts
		// the replicas: said here, not only at the end.
		s.log.Info("process exited; restarting it (crash and kill steps, and a run's front door, end a process on purpose)", "name", s.name, "exit", fmt.Sprint(p.err), "restarts", s.restarts)
		next, err := s.start()
		if err != nil {
			s.log.Error("restart failed; giving up on it", "name", s.name, "err", err)
			s.mu.Unlock()
			return
		}
		s.current = next
		s.mu.Unlock()
	}
}

// pid is the running process's pid, or 0 between an exit and its restart.
func (s *supervised) pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.current.exited() {
		return 0
	}
	return s.current.pid()
}

func (s *supervised) restartCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.restarts
}

// kill kills the running process's group with SIGKILL, as kill -9 would,
// and returns once it is gone; supervision then starts it again.
func (s *supervised) kill() error {
	s.mu.Lock()
	p := s.current
	s.mu.Unlock()
	if p.exited() {
		return fmt.Errorf("%s: %w", s.name, errNotRunning)
	}
	_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
	<-p.done
	return nil
}

// restart ends the running process politely (SIGTERM; its group killed
// after stopGrace) and returns once it exited; supervision then starts it
// again, with what start reads then (a new front door's settings).
func (s *supervised) restart() error {
	s.mu.Lock()
	p := s.current
	s.mu.Unlock()
	if p.exited() {
		return fmt.Errorf("%s: %w", s.name, errNotRunning)
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(stopGrace):
		_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
		<-p.done
	}
	return nil
}

// signal sends sig to the running process's group: SIGSTOP and SIGCONT
// for a step that holds a process without killing it.
func (s *supervised) signal(sig syscall.Signal) error {
	pid := s.pid()
	if pid == 0 {
		return fmt.Errorf("%s: %w", s.name, errNotRunning)
	}
	return syscall.Kill(-pid, sig)
}

// signalUntilExit sends sig to the running process, again every second,
// until it exits by itself (a crash hook the signal arms), and keeps it
// down until release (or stop). When it has not exited within bound (or
// ctx ends) it is killed with SIGKILL and started again, unarmed.
func (s *supervised) signalUntilExit(ctx context.Context, sig syscall.Signal, bound time.Duration) error {
	s.mu.Lock()
	if s.held == nil {
		s.held = make(chan struct{})
	}
	p := s.current
	s.mu.Unlock()
	if p.exited() {
		s.release()
		return fmt.Errorf("%s: %w", s.name, errNotRunning)
	}
	deadline := time.NewTimer(bound)
	defer deadline.Stop()
	again := time.NewTicker(time.Second)
	defer again.Stop()
	for {
		_ = p.cmd.Process.Signal(sig)
		var err error
		select {
		case <-p.done:
			return nil
		case <-again.C:
			continue
		case <-deadline.C:
			err = fmt.Errorf("%s did not exit within %s of %s", s.name, bound, sig)
		case <-ctx.Done():
			err = ctx.Err()
		}
		_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
		<-p.done
		s.release()
		return err
	}
}

// release lets the supervisor start the process again after
// signalUntilExit.
func (s *supervised) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held != nil {
		close(s.held)
		s.held = nil
	}
}

// errNotRunning: a fault step asked for a process that is not running.
var errNotRunning = errors.New("not running")

// stop ends supervision and stops the process.
func (s *supervised) stop(sig syscall.Signal) {
	s.mu.Lock()
	s.stopping = true
	p := s.current
	s.mu.Unlock()
	s.release()
	// Restarts happen under s.mu after checking stopping, so p is the last
	// process this supervisor will ever start.
	p.stop(sig)
	<-s.stopped
}

// errExited is returned when a child exits while the workshop waits for it.
var errExited = errors.New("exited during start-up")
