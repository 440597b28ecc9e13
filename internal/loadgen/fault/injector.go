package fault

import (
	"context"
	"slices"
	"time"

	"github.com/lockstep/lockstep/asyncorders"
)

// Injector does to the set-up's processes what the fault steps need. The
// workshop implements it; without one, runs with a fault step are skipped.
// Replicas are named as they call themselves (X-Replica).
type Injector interface {
	// KillReplica kills the replica's processes with SIGKILL and returns
	// once they are gone (the workshop then starts it again).
	KillReplica(ctx context.Context, replica string) error
	// StoppedReplicas names the replicas that are stopped (state T).
	StoppedReplicas() []string
	// ContinueReplica sends SIGCONT to a stopped replica.
	ContinueReplica(replica string) error
	// CutRedis drops every byte between the replica and its Redis, and
	// HealRedis ends that: a network partition.
	CutRedis(replica string) error
	HealRedis(replica string) error
	// SetPersistence turns the i-th independent Redis master's append-only
	// file on (aof-everysec) or off (none); KillRedis kills it with
	// SIGKILL; StartRedis starts it again on its address and data, with
	// that persistence, and returns once it answers.
	SetPersistence(ctx context.Context, i int, persistence string) error
	KillRedis(ctx context.Context, i int) error
	StartRedis(ctx context.Context, i int, persistence string) error
	// PrepareFailover waits until the Sentinel group is whole: every
	// Sentinel names the same master, which has its replicas in sync (on a
	// Redis Cluster: every master has its replica, linked).
	PrepareFailover(ctx context.Context) error
	// HoldReplication cuts the replicas off the master (every master of a
	// cluster), so that what it grants from then on is on it alone.
	HoldReplication(ctx context.Context) error
	// KillMaster kills the master with SIGKILL and returns its address:
	// the Sentinel group's, or on a Redis Cluster the master of key's slot.
	KillMaster(ctx context.Context, key string) (string, error)
	// WaitFailover waits until every Sentinel names a new master (on a
	// cluster: another master serves key's slot) and that master has a
	// replica again; it returns the new master's address.
	WaitFailover(ctx context.Context, key string) (string, error)
	// KillLeader kills with SIGKILL the leader of the ensemble the stage's
	// lock lives on (etcd's cluster, ZooKeeper's) and returns its name;
	// WaitLeader returns once the members left serve under a new leader,
	// and names it; RestartMember starts the killed member again.
	KillLeader(ctx context.Context, stage string) (string, error)
	WaitLeader(ctx context.Context, stage string) (string, error)
	RestartMember(ctx context.Context, stage string) error
	// MigrateSlot moves the Redis Cluster slot of key to another master as
	// redis-cli --cluster reshard does (IMPORTING and MIGRATING, MIGRATEs,
	// the slot handed over) and returns both masters' addresses.
	MigrateSlot(ctx context.Context, key string, move SlotMove) (from, to string, err error)
	// HasOrderServer reports whether the order stages keep their orders in
	// a server (MariaDB) the step can stop, rather than the embedded
	// SQLite file. StopOrderServer stops it with SIGSTOP and returns once
	// it is stopped; ContinueOrderServer sends SIGCONT.
	HasOrderServer() bool
	StopOrderServer(ctx context.Context) error
	ContinueOrderServer() error
	// CrashOrderWorker arms an order worker's crash hook at a fault point
	// and returns its name (its consumer name) once it died there, killed
	// with SIGKILL; it stays down until StartOrderWorker starts it again
	// under that name.
	// at names the hook's point as cmd/orderworker does (after-read,
	// after-insert).
	CrashOrderWorker(ctx context.Context, at string) (string, error)
	StartOrderWorker(ctx context.Context, name string) error
	// PauseOrderWorker stops the named order worker with SIGSTOP (paused)
	// or lets it go on with SIGCONT.
	PauseOrderWorker(ctx context.Context, name string, paused bool) error
	// OrderWorkers names the order workers (their consumer names).
	OrderWorkers() []string
	// OrderStream reads an async stage's order stream in the stock's Redis
	// itself: the shop's audit also counts the orders, which waits on a
	// stopped order database.
	OrderStream(ctx context.Context, stage, sku string) (asyncorders.Stats, error)
	// HeldEntries lists the entries of an async stage's stream that the
	// named order worker read and did not acknowledge, in stream order.
	HeldEntries(ctx context.Context, stage, sku, worker string) ([]HeldEntry, error)
}

// HeldEntry is a stream entry an order worker holds: its order id ("" for
// none) and how often it was delivered.
type HeldEntry struct {
	Entry, OrderID string
	Deliveries     int64
}

// SlotMove is how MigrateSlot moves a slot's keys.
type SlotMove struct {
	// Pace is spread between the MIGRATEs of the keys, one key each.
	Pace time.Duration
	// First, when set, is a key prefix: the slot's keys with it move first,
	// in one MIGRATE (redis-cli moves up to ten keys per MIGRATE), and the
	// migration then stops for Stop, the slot MIGRATING on its master and
	// IMPORTING on the target, before the other keys move and the slot is
	// handed over.
	First string
	Stop  time.Duration
}

// namesBut returns the replicas' names but one, in order.
func namesBut(names []string, except string) []string {
	return slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == except })
}
