package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"syscall"
	"time"

	"github.com/lockstep/lockstep/internal/launch"
)

// supervised keeps a process running: when it exits on its own (a replica
// that crashed while holding a lock) it is started again.
type supervised struct {
	name  string
	start func() (*launch.Process, error)
	log   *slog.Logger

	mu       sync.Mutex
	current  *launch.Process
	stopping bool
	restarts int
	stopped  chan struct{}
	// held, while open, keeps the supervisor from starting the process
	// again (signalUntilExit); closed by release or stop.
	held chan struct{}
}

// restartDelay spaces restarts so a child that cannot start does not spin.
const restartDelay = 100 * time.Millisecond

func supervise(name string, log *slog.Logger, start func() (*launch.Process, error)) (*supervised, error) {
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
		<-p.Done()
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
		s.log.Info("process exited; restarting it (crash and kill steps, and a run's front door, end a process on purpose)", "name", s.name, "exit", fmt.Sprint(p.Err()), "restarts", s.restarts)
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
	if s.current.Exited() {
		return 0
	}
	return s.current.Pid()
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
	if p.Exited() {
		return fmt.Errorf("%s: %w", s.name, errNotRunning)
	}
	_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
	<-p.Done()
	return nil
}

// restart ends the running process politely (SIGTERM; its group killed
// after launch.StopGrace) and returns once it exited; supervision then
// starts it again, with what start reads then (a new front door's
// settings).
func (s *supervised) restart() error {
	s.mu.Lock()
	p := s.current
	s.mu.Unlock()
	if p.Exited() {
		return fmt.Errorf("%s: %w", s.name, errNotRunning)
	}
	p.Stop(syscall.SIGTERM)
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
	if p.Exited() {
		s.release()
		return fmt.Errorf("%s: %w", s.name, errNotRunning)
	}
	deadline := time.NewTimer(bound)
	defer deadline.Stop()
	again := time.NewTicker(time.Second)
	defer again.Stop()
	for {
		_ = p.Signal(sig)
		var err error
		select {
		case <-p.Done():
			return nil
		case <-again.C:
			continue
		case <-deadline.C:
			err = fmt.Errorf("%s did not exit within %s of %s", s.name, bound, sig)
		case <-ctx.Done():
			err = ctx.Err()
		}
		_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
		<-p.Done()
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
	p.Stop(sig)
	<-s.stopped
}

// errExited is returned when a child exits while the workshop waits for it.
var errExited = errors.New("exited during start-up")
