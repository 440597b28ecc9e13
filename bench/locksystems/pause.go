package main

import (
	"context"
	"fmt"
	"syscall"
	"time"
)

// paused is what a holder frozen past its lease saw.
type paused struct {
	holders  int64         // the most critical sections under way at once
	otherIn  time.Duration // from the freeze to another process's acquisition
	otherOut bool          // the other process was kept out: every attempt ended at its deadline
	failed   string        // the other process did not get the lock, some attempts failing otherwise
}

// measurePause has a child take the lock on the system's fault lease and
// freezes it (SIGSTOP) right away; another process tries for the lock
// within cfg.faultWait and, once it has it, stays in its critical section;
// then the holder is told to enter its own and continued (SIGCONT), as a
// holder back from a GC pause that believes it still holds, and does. The
// shared check counts how many were inside at once.
func measurePause(ctx context.Context, r *run, s system) (paused, error) {
	ctx, cancel := context.WithTimeout(ctx, r.faultBudget())
	defer cancel()
	check, shared, err := r.sharedCheck()
	if err != nil {
		return paused{}, err
	}
	defer check.Close()
	spec := childSpec{System: s.name, Endpoints: r.servers.endpoints, Lease: s.faultLease, Shared: shared, Key: "pause", Bound: r.cfg.faultWait, Attempt: r.cfg.attempt}
	holder, other, err := startLeaseTest(ctx, spec)
	if err != nil {
		return paused{}, err
	}
	defer holder.stop()
	defer other.stop()
	if err := take(holder); err != nil {
		return paused{}, err
	}
	if err := holder.signal(syscall.SIGSTOP); err != nil {
		return paused{}, err
	}
	frozen := time.Now()
	if err := other.send(wordGo); err != nil {
		return paused{}, err
	}
	ev, err := other.next()
	if err != nil {
		return paused{}, err
	}
	var p paused
	switch ev.Name {
	case evAcquired:
		p.otherIn = ev.At.Sub(frozen)
	case evNotAcquired:
		p.otherOut = true
	case evFailed:
		p.failed = failure(ev)
	default:
		return paused{}, fmt.Errorf("during a pause: %q (%s)", ev.Name, ev.Err)
	}
	if err := holder.send(wordEnter); err != nil {
		return paused{}, err
	}
	if err := holder.signal(syscall.SIGCONT); err != nil {
		return paused{}, err
	}
	if _, err := holder.expect(evEntered); err != nil {
		return paused{}, err
	}
	p.holders = check.Peak(0)
	if !p.otherOut && p.failed == "" {
		if err := leave(other); err != nil {
			return paused{}, err
		}
	}
	// The holder's unlock may fail (its lock expired): not this figure.
	return p, leave(holder)
}
