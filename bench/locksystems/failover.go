package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/lockstep/lockstep/internal/lockserver"
)

// failoverPlan is how a system's leader or master is killed under a held
// lock.
type failoverPlan struct {
	// none says why the system has no failover to measure.
	none string
	// setUp prepares one failover, its files under dir.
	setUp func(ctx context.Context, dir string) (*failoverRun, error)
}

// failoverRun is one prepared failover.
type failoverRun struct {
	// holder and other are where the holder, and the process that tries
	// for the lock after the failover, reach the system.
	holder, other endpoints
	// elects: the servers elect a new leader themselves, and the other
	// process's wait for one is measured.
	elects bool
	// kill kills the leader or master, and promotes a replica where the
	// servers do not elect one.
	kill func(ctx context.Context) error
	// awaitLeader, where the servers elect, returns once the survivors
	// agree on a new leader.
	awaitLeader func(ctx context.Context) error
	stop        func()
}

// ensemble is an etcd cluster or a ZooKeeper ensemble.
type ensemble interface {
	KillLeader(ctx context.Context) (string, error)
	WaitLeader(ctx context.Context) (string, error)
}

// electionPlan kills the leader of the run's own ensemble, which elects
// another: the row's last measurement, as it leaves the ensemble a member
// short.
func electionPlan(ep endpoints, e ensemble) failoverPlan {
	return failoverPlan{setUp: func(context.Context, string) (*failoverRun, error) {
		return &failoverRun{holder: ep, other: ep, elects: true, stop: func() {},
			kill: func(ctx context.Context) error {
				_, err := e.KillLeader(ctx)
				return err
			},
			awaitLeader: func(ctx context.Context) error {
				_, err := e.WaitLeader(ctx)
				return err
			}}, nil
	}}
}

// promotionPlan starts a master and a replica of its own and cuts the
// replica off before the lock is taken, as asynchronous replication does
// to a write the master had no time to ship; the failover kills the
// master and promotes the replica (REPLICAOF NO ONE), what Sentinel does
// once it agrees the master is down — here at once, so no wait for it is
// measured.
func promotionPlan(ep endpoints) failoverPlan {
	return failoverPlan{setUp: func(ctx context.Context, dir string) (*failoverRun, error) {
		masterDir, replicaDir := filepath.Join(dir, "master"), filepath.Join(dir, "replica")
		if err := errors.Join(os.Mkdir(masterDir, 0o755), os.Mkdir(replicaDir, 0o755)); err != nil {
			return nil, err
		}
		master, err := lockserver.StartRedis(ctx, masterDir)
		if err != nil {
			return nil, err
		}
		replica, err := master.StartReplica(ctx, replicaDir)
		if err == nil {
			err = replica.CutOff(ctx, master)
		}
		stop := func() {
			if replica != nil {
				replica.Stop()
			}
			master.Stop()
		}
		if err != nil {
			stop()
			return nil, err
		}
		holder, other := ep, ep
		holder.Redis, other.Redis = master.Addr, replica.Addr
		return &failoverRun{holder: holder, other: other, stop: stop, kill: func(ctx context.Context) error {
			master.Stop()
			return replica.Promote(ctx)
		}}, nil
	}}
}

// failedOver is what a failover under a held lock did.
type failedOver struct {
	none     string        // why there was no failover to measure
	holders  int64         // the most critical sections under way at once
	stalled  time.Duration // from the kill until a free lock could be taken (elects only)
	attempts probed        // the attempts at the free lock that failed before
	elected  time.Duration // from the kill until the survivors agreed on a leader (elects only)
	elects   bool
	otherOut bool   // the other process was kept out of the held lock: every attempt ended at its deadline
	failed   string // the other process did not get it, some attempts failing otherwise
}

// measureFailover has a child take the lock (steady lease) and enter its
// critical section, kills the leader or master, and has another process,
// connected beforehand, take a free lock (how long the system served no
// one) and then try for the held one within cfg.faultWait: a second holder
// inside means the failover lost the lock.
func measureFailover(ctx context.Context, r *run, s system) (failedOver, error) {
	plan := r.servers.of(s.name).failover
	if plan.none != "" {
		return failedOver{none: plan.none}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, r.faultBudget())
	defer cancel()
	dir, err := os.MkdirTemp(r.dir, "failover-")
	if err != nil {
		return failedOver{}, err
	}
	fo, err := plan.setUp(ctx, dir)
	if err != nil {
		return failedOver{}, fmt.Errorf("set up the failover: %w", err)
	}
	defer fo.stop()
	check, shared, err := r.sharedCheck()
	if err != nil {
		return failedOver{}, err
	}
	defer check.Close()
	spec := childSpec{System: s.name, Endpoints: fo.holder, Lease: steadyLease, Shared: shared, Key: "failover", Bound: r.cfg.faultWait, Attempt: r.cfg.attempt}
	otherSpec := spec
	otherSpec.Endpoints = fo.other
	if fo.elects {
		otherSpec.ProbeKey, otherSpec.ProbeBound = "failover-probe", r.probeBound()
	}
	holder, other, err := startBoth(ctx, spec, otherSpec)
	if err != nil {
		return failedOver{}, err
	}
	defer holder.stop()
	defer other.stop()
	if err := take(holder); err != nil {
		return failedOver{}, err
	}
	if err := holder.send(wordEnter); err != nil {
		return failedOver{}, err
	}
	if _, err := holder.expect(evEntered); err != nil {
		return failedOver{}, err
	}
	killed := time.Now()
	if err := fo.kill(ctx); err != nil {
		return failedOver{}, fmt.Errorf("kill the leader: %w", err)
	}
	f := failedOver{elects: fo.elects}
	if fo.elects {
		var electErr error
		elected := make(chan struct{})
		go func() {
			defer close(elected)
			electErr = fo.awaitLeader(ctx)
			f.elected = time.Since(killed)
		}()
		f.stalled, f.attempts, err = probeAfter(other, killed)
		<-elected
		if err = errors.Join(err, electErr); err != nil {
			return failedOver{}, err
		}
	} else if err := other.send(wordGo); err != nil {
		return failedOver{}, err
	}
	ev, err := other.next()
	if err != nil {
		return failedOver{}, err
	}
	switch ev.Name {
	case evAcquired:
		if err := leave(other); err != nil {
			return failedOver{}, err
		}
	case evNotAcquired:
		f.otherOut = true
	case evFailed:
		f.failed = failure(ev)
	default:
		return failedOver{}, fmt.Errorf("after the failover: %q (%s)", ev.Name, ev.Err)
	}
	f.holders = check.Peak(0)
	// The holder is killed as it is (deferred): its unlock, against a
	// master that is gone, is not this figure.
	return f, nil
}

// probeAfter starts the other process and returns how long after the kill
// it took its free lock, and what its failed attempts were.
func probeAfter(other *childProcess, killed time.Time) (time.Duration, probed, error) {
	if err := other.send(wordGo); err != nil {
		return 0, probed{}, err
	}
	ev, err := other.expect(evProbed)
	switch {
	case err != nil:
		return 0, probed{}, err
	case ev.Err != "":
		return 0, probed{}, fmt.Errorf("after the failover: %s", ev.Err)
	case ev.Probe == nil:
		return 0, probed{}, fmt.Errorf("after the failover: the probe's attempts not told")
	}
	return ev.At.Sub(killed), *ev.Probe, nil
}
