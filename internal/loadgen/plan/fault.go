package plan

import (
	"errors"
	"fmt"
	"time"
)

// Fault kinds: the failure scenarios of the workshop.
const (
	// FaultCrash: kill -9 of the replica that holds the lock.
	FaultCrash = "crash"
	// FaultPause: the holder stops (SIGSTOP) right before its stock write,
	// past its lease, and is continued while another holder works.
	FaultPause = "pause"
	// FaultRedisRestart: kill -9 of the stock's redis-server mid-load, and a
	// restart with or without an append-only file; on an async stage the
	// order workers are held (SIGSTOP) from halfway through before until
	// Redis answers again.
	FaultRedisRestart = "redis-restart"
	// FaultFailover: the Sentinel-managed master dies right after a lock
	// grant it never replicated (or one of redlock's masters does).
	FaultFailover = "failover"
	// FaultPartition: the holder's replica loses its Redis connection.
	FaultPartition = "partition"
	// FaultReshard: on a Redis Cluster, the slot of the SKU's busiest key
	// moves to another master while sales go on.
	FaultReshard = "reshard"
	// FaultReshardHalfWay: the same move stops half-way for a while, the
	// stage's keys moved and the slot not handed over, as an interrupted
	// redis-cli --cluster reshard leaves it.
	FaultReshardHalfWay = "reshard-halfway"
	// FaultOrdersDown: an order stage's MariaDB stops answering (SIGSTOP)
	// for hold while sales go on, then continues (SIGCONT); on an async
	// stage the order workers wait, and the run is judged after draining.
	FaultOrdersDown = "orders-down"
	// FaultWorkerKill: on an async stage, an order worker dies (SIGKILL,
	// its crash hook) right after a read, holding entries it has written
	// no order for; it is kept down past the workers' claim bound, then
	// started again under its name.
	FaultWorkerKill = "worker-kill"
	// FaultDuplicateDelivery: the same, dying after an order's insert and
	// before its ack, so that entry is delivered again with its row
	// already written.
	FaultDuplicateDelivery = "duplicate-delivery"
)

var faultKinds = []string{FaultCrash, FaultPause, FaultRedisRestart, FaultFailover, FaultPartition, FaultReshard, FaultReshardHalfWay, FaultOrdersDown,
	FaultWorkerKill, FaultDuplicateDelivery}

// Persistence modes of a redis-restart step.
const (
	PersistenceNone        = "none"
	PersistenceAOFEverySec = "aof-everysec"
)

// Targets of a failover step.
const (
	FailoverMaster        = "master"         // the master of the Sentinel group
	FailoverRedlockMaster = "redlock-master" // the first of redlock's independent masters
	FailoverLeader        = "leader"         // the leader of the stage's etcd cluster or ZooKeeper ensemble
)

// FaultStep is what a failure scenario does to the set-up's processes during
// a stage run, instead of the plain load phase: see the Fault* kinds. The
// runner says per kind what it sends, when, and what it measures
// (internal/loadgen/fault, a file per kind).
type FaultStep struct {
	Kind string `yaml:"kind" json:"kind"`
	// VictimWork is the business work of the sale that will hold the lock
	// when the fault strikes (crash, partition), so it is still inside when
	// the step looks; the other sales run with the run's faults.
	VictimWork Duration `yaml:"victim_work" json:"victim_work,omitempty"`
	// Before is how long sales go on before the fault (redis-restart,
	// orders-down).
	Before Duration `yaml:"before" json:"before,omitempty"`
	// Hold is how long the fault lasts before it heals: the pause, Redis
	// being down, the partition.
	Hold Duration `yaml:"hold" json:"hold,omitempty"`
	// Observe is how long sales are offered from the fault on (crash,
	// pause, partition; redis-restart: after Redis is back).
	Observe Duration `yaml:"observe" json:"observe,omitempty"`
	// Rate and Workers shape those sales (default 100/s, 32 workers).
	Rate    Rate `yaml:"rate" json:"rate,omitempty"`
	Workers int  `yaml:"workers" json:"workers,omitempty"`
	// Persistence of the restarted Redis: none or aof-everysec.
	Persistence string `yaml:"persistence" json:"persistence,omitempty"`
	// Target of a failover: master (the Sentinel group's) or redlock-master.
	Target string `yaml:"target" json:"target,omitempty"`
}

func (f *FaultStep) setDefaults() {
	if f.Rate == MaxRate {
		f.Rate = 100
	}
	if f.Workers == 0 {
		f.Workers = 32
	}
	if f.Kind == FaultRedisRestart && f.Persistence == "" {
		f.Persistence = PersistenceNone
	}
	if f.Kind == FaultFailover && f.Target == "" {
		f.Target = FailoverMaster
	}
}

// Window is about how long the step offers sales, for the progress line.
func (f *FaultStep) Window() time.Duration { return (f.Before + f.Hold + f.Observe).D() }

func (f *FaultStep) validate() error {
	needs := func(what string, ok bool) error {
		if ok {
			return nil
		}
		return fmt.Errorf("%s needs %s", f.Kind, what)
	}
	var err error
	switch f.Kind {
	case FaultCrash:
		err = errors.Join(needs("victim_work", f.VictimWork > 0), needs("observe", f.Observe > 0))
	case FaultPause:
		err = errors.Join(needs("hold", f.Hold > 0), needs("observe", f.Observe > f.Hold))
	case FaultRedisRestart:
		err = errors.Join(needs("before", f.Before > 0), needs("hold", f.Hold > 0), needs("observe", f.Observe > 0),
			needs("persistence none or aof-everysec", f.Persistence == PersistenceNone || f.Persistence == PersistenceAOFEverySec))
	case FaultFailover:
		err = needs("target master, redlock-master or leader", f.Target == FailoverMaster || f.Target == FailoverRedlockMaster || f.Target == FailoverLeader)
		if f.Target == FailoverLeader {
			err = errors.Join(err, needs("observe", f.Observe > 0))
		}
	case FaultPartition:
		err = errors.Join(needs("victim_work", f.VictimWork > f.Hold), needs("hold", f.Hold > 0), needs("observe", f.Observe > f.Hold))
	case FaultReshard, FaultReshardHalfWay:
		err = errors.Join(needs("before", f.Before > 0), needs("observe", f.Observe > f.Before+f.Hold))
	case FaultOrdersDown:
		err = errors.Join(needs("before", f.Before > 0), needs("hold", f.Hold > 0), needs("observe", f.Observe > f.Hold))
	case FaultWorkerKill, FaultDuplicateDelivery:
		// The sales end before the worker is started again, so what the
		// audit reads while it is down is all the others could do.
		err = errors.Join(needs("before", f.Before > 0), needs("observe", f.Observe > 0), needs("hold", f.Hold >= f.Observe))
	default:
		return fmt.Errorf("kind %q: want one of %v", f.Kind, faultKinds)
	}
	if f.Rate < 0 || f.Workers < 1 {
		err = errors.Join(err, errors.New("rate must be positive and workers at least 1"))
	}
	return err
}
