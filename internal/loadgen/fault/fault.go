// Package fault carries out a stage run's fault step: one kind of fault
// (plan.Fault*) per file, each a Kind behind one small interface, done to
// the set-up through an Injector (processes: kill, stop, cut off) and read
// through Stores (what the shops keep in their servers: the lock's
// holders and TTL, a probe key), both of which the workshop provides.
//
// A kind's Run prepares the stage (Step.resetWith and the faults it arms),
// strikes while sales go on (Step.background, Step.victim), heals, and
// reports: what it saw goes in the step's report.FaultReport (Step.note,
// the kind's own record), and Step.conclude times the window from the
// answers and reads the audit. Run fills the row's fault columns from it.
//
// fault speaks HTTP to the shops (shopapi) and imports no store, no Redis
// client and nothing of the runner (internal/loadgen) above it.
//
// Adding a kind: a file here with its type and Run, its case in kindOf
// (kinds.go), and its name and checks in plan (plan/fault.go); see
// docs/workshop.md, "Adding a fault kind: three files".
package fault

import (
	"context"
	"slices"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/attack"
	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/internal/loadgen/shopapi"
)

// A Kind is one kind of fault step, in a file of its own: it does its
// fault to the set-up while sales go on and notes what it saw in st's
// report (see the package doc).
type Kind interface {
	Run(ctx context.Context, st *Step) error
}

// Env is what a fault step works with: the shops, the set-up's Injector
// and Stores, and the run's progress.
type Env struct {
	Shop *shopapi.Client
	// Target is the proxy's URL; Names and URLs the replicas', in order.
	Target      string
	Names, URLs []string
	// SKU is the scenario's SKU.
	SKU      string
	Injector Injector
	Stores   Stores
	// Progress follows the step's sales (the progress line).
	Progress attack.Observer
	// WaitAllReady waits for every replica, and for the proxy to route
	// to each.
	WaitAllReady func(context.Context) error
	// IsAsync reports whether a stage has order workers.
	IsAsync func(stage string) bool
}

// urlsOf maps replica names to their URLs.
func (env *Env) urlsOf(names []string) []string {
	var urls []string
	for _, n := range names {
		if i := slices.Index(env.Names, n); i >= 0 {
			urls = append(urls, env.URLs[i])
		}
	}
	return urls
}

// livingReplicas names every replica, or all but one that is stopped.
func (env *Env) livingReplicas(oneStopped bool, stopped string) []string {
	if oneStopped {
		return namesBut(env.Names, stopped)
	}
	return env.Names
}

// Stores reads and writes, for the steps, what the shops keep in their
// servers; the workshop implements it on the set-up's Redis (the key
// names are the stores' own).
type Stores interface {
	// LockKey is the key of the lock a step's victim sale takes on stage
	// for sku (on segmented, its first segment's); StockKey the key of the
	// SKU's busiest stock (its first segment's on the stages that split
	// it). segments is the run's segment count (0: the shop's default).
	LockKey(stage, sku string, segments int) string
	StockKey(stage, sku string, segments int) string
	// Holders counts, per replica, the sales inside the critical section
	// of LockKey's lock (the shops' track_holders fault); ForgetHolder
	// drops a killed replica's count.
	Holders(ctx context.Context, stage, sku string, segments int) (map[string]int64, error)
	ForgetHolder(ctx context.Context, stage, sku string, segments int, replica string) error
	// TTL is how long key has left; ≤ 0 when it has no expiry or is gone.
	TTL(ctx context.Context, key string) (time.Duration, error)
	// LockKeys lists the stage's keys that hold a lock, with their TTLs.
	LockKeys(ctx context.Context, stage string) ([]report.LockKey, error)
	// WriteProbe writes a key of its own in the stock's Redis; ProbeKept
	// says whether it is still there, and deletes it.
	WriteProbe(ctx context.Context) (string, error)
	ProbeKept(ctx context.Context, key string) (bool, error)
	// LoadSKU is a SKU beside sku for a failover's load: on a Redis
	// Cluster one whose keys live on the master of lockKey's slot.
	LoadSKU(ctx context.Context, sku, lockKey string) (string, error)
}
