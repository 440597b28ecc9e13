package main

import (
	"context"
	"fmt"
	"time"
)

// crashed is what followed a holder's kill -9.
type crashed struct {
	recovered time.Duration // from the kill to another process's acquisition
	stuck     bool          // no acquisition within the bound
	kept      bool          // stuck, and the server still kept the dead holder's record
	failed    string        // none acquired, some attempts failing otherwise than at their deadline
}

// measureCrash has a child take the lock on the system's fault lease,
// kills it with SIGKILL at once, and times until another process, ready
// and connected beforehand, acquires the lock — within cfg.faultWait, or
// stuck, and then whether the dead holder's key, row or node is still there.
func measureCrash(ctx context.Context, r *run, s system, conn connection) (crashed, error) {
	ctx, cancel := context.WithTimeout(ctx, r.faultBudget())
	defer cancel()
	check, shared, err := r.sharedCheck()
	if err != nil {
		return crashed{}, err
	}
	defer check.Close()
	const key = "crash"
	spec := childSpec{System: s.name, Endpoints: r.servers.endpoints, Lease: s.faultLease, Shared: shared, Key: key, Bound: r.cfg.faultWait, Attempt: r.cfg.attempt}
	holder, other, err := startLeaseTest(ctx, spec)
	if err != nil {
		return crashed{}, err
	}
	defer holder.stop()
	defer other.stop()
	if err := take(holder); err != nil {
		return crashed{}, err
	}
	killed := time.Now()
	holder.kill()
	if err := other.send(wordGo); err != nil {
		return crashed{}, err
	}
	ev, err := other.next()
	if err != nil {
		return crashed{}, err
	}
	switch ev.Name {
	case evAcquired:
		if err := leave(other); err != nil {
			return crashed{}, err
		}
		return crashed{recovered: ev.At.Sub(killed)}, nil
	case evFailed:
		return crashed{stuck: true, failed: failure(ev)}, nil
	case evNotAcquired:
		kept, err := conn.recorded(ctx, key)
		if err != nil {
			return crashed{}, fmt.Errorf("after a crash: read the lock's record: %w", err)
		}
		return crashed{stuck: true, kept: kept}, nil
	}
	return crashed{}, fmt.Errorf("after a crash: %q (%s)", ev.Name, ev.Err)
}
