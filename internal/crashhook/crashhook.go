// Package crashhook is an order worker process's crash hook: armed at an
// asyncorders.FaultPoint, it kills the process with SIGKILL the next time a
// batch reaches that point, as kill -9 would strike there. Killing a worker
// from outside can only guess where in its batch it is (the workshop's
// earlier worker-kill step guessed wrong under load); armed, the worker
// dies at a known point, and what it leaves pending is known.
//
// It is armed at start at any point (cmd/orderworker's -crash-at), or at
// run time by a signal (Signal names it): SIGUSR1 arms after-read, SIGUSR2
// after-insert. There are two user signals and four points: after-claim
// and after-void are armed at start only, and fire at the first claim or
// give-up, with or without a read before. It disarms as it fires: one
// arming, one death.
package crashhook

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/lockstep/lockstep/asyncorders"
)

// ErrNoSignal: no signal arms the point; -crash-at at start does.
var ErrNoSignal = errors.New("crash hook: no signal arms this point")

// Signal is the signal that arms the hook at p.
func Signal(p asyncorders.FaultPoint) (syscall.Signal, error) {
	switch p {
	case asyncorders.AfterRead:
		return syscall.SIGUSR1, nil
	case asyncorders.AfterInsert:
		return syscall.SIGUSR2, nil
	}
	if _, err := asyncorders.ParseFaultPoint(string(p)); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%w: %s (arm it with -crash-at)", ErrNoSignal, p)
}

// pointOf is the fault point sig arms.
func pointOf(sig os.Signal) asyncorders.FaultPoint {
	for _, p := range asyncorders.FaultPoints() {
		if s, _ := Signal(p); s == sig {
			return p
		}
	}
	return ""
}

// Hook is one process's crash hook.
type Hook struct {
	log *slog.Logger
	// kill ends the process; a test of the arming replaces it.
	kill func() error

	mu    sync.Mutex
	armed asyncorders.FaultPoint
	// read: a batch was read since the arming (see At).
	read bool
}

// New is a hook armed at armed ("" for none), killing this process.
func New(log *slog.Logger, armed asyncorders.FaultPoint) (*Hook, error) {
	if armed != "" {
		if _, err := asyncorders.ParseFaultPoint(string(armed)); err != nil {
			return nil, err
		}
	}
	kill := func() error { return syscall.Kill(os.Getpid(), syscall.SIGKILL) }
	return &Hook{log: log, kill: kill, armed: armed}, nil
}

// Listen arms the hook on each arming signal until ctx ends or stop is
// called; it returns once it listens. Call it first thing: an arming
// signal that comes before is lost.
func (h *Hook) Listen(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGUSR1, syscall.SIGUSR2)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer signal.Stop(sigs)
		for {
			select {
			case <-ctx.Done():
				return
			case sig := <-sigs:
				p := pointOf(sig)
				h.arm(p)
				h.log.Warn("crash hook armed", "at", string(p), "signal", sig.String())
			}
		}
	}()
	return func() { cancel(); <-done }
}

// arm arms the hook at p. Armed at p already, it changes nothing: the
// workshop sends its signal again until the worker dies, and a batch read
// since the first one still counts.
func (h *Hook) arm(p asyncorders.FaultPoint) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.armed != p {
		h.armed, h.read = p, false
	}
}

// errKilled: the kill did not end the process at once.
var errKilled = errors.New("crash hook: killed")

// At is the workers' asyncorders.Config.FaultHook: armed at p, it disarms
// and kills the process. Armed after-insert, it waits for an insert of a
// batch read after the arming, so the batch the worker dies holding was
// delivered just before: an entry of an older batch may have waited past
// the claim bound, and another worker take it before anyone sees what the
// dead one held. (A worker serving several streams counts a read of any.)
func (h *Hook) At(p asyncorders.FaultPoint) error {
	h.mu.Lock()
	if p == asyncorders.AfterRead {
		h.read = true
	}
	fire := h.armed == p && (p != asyncorders.AfterInsert || h.read)
	if fire {
		h.armed = ""
	}
	h.mu.Unlock()
	if !fire {
		return nil
	}
	h.log.Error("crash hook: killing this worker with SIGKILL", "at", string(p))
	if err := h.kill(); err != nil {
		return fmt.Errorf("%w: %w", errKilled, err)
	}
	return errKilled // the entries in hand stay pending whatever comes first
}
