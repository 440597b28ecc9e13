package loadgen

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
	CrashOrderWorker(ctx context.Context, at asyncorders.FaultPoint) (string, error)
	StartOrderWorker(ctx context.Context, name string) error
	// PauseOrderWorker stops the named order worker with SIGSTOP (paused)
	// or lets it go on with SIGCONT.
	PauseOrderWorker(ctx context.Context, name string, paused bool) error
	// OrderWorkers names the order workers (their consumer names).
	OrderWorkers() []string
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

// FaultReport is what a fault step saw. Times are milliseconds from the
// start of the stage run (like the timeline's) or durations.
type FaultReport struct {
	Kind string `json:"kind"`
	// Victim is what the fault hit: a replica, or a Redis address.
	Victim string `json:"victim,omitempty"`
	// VictimAnswer is what the sale that held the lock when the fault
	// struck answered (or why it did not), and VictimAnswerMS when, from the
	// fault.
	VictimAnswer   string   `json:"victim_answer,omitempty"`
	VictimStatus   int      `json:"victim_status,omitempty"`
	VictimAnswerMS *float64 `json:"victim_answer_ms,omitempty"`
	// VictimLeftMS is when, from the fault, that sale left its critical
	// section (track_holders): when it gave its work up, which its answer
	// may follow much later, after an unlock that had to time out.
	VictimLeftMS *float64 `json:"victim_left_ms,omitempty"`
	AtMS         float64  `json:"at_ms"`
	// HealedAtMS is when the fault ended: SIGCONT, Redis answering again,
	// the partition healed, the failover done; a crash ends at once.
	HealedAtMS float64 `json:"healed_at_ms"`
	// LongestGapMS, when measured (reshard-halfway), is the longest time
	// between two sales from the fault to the end of the window.
	LongestGapMS *float64 `json:"longest_gap_ms,omitempty"`
	// StuckMS is how long no sale went through from the fault on: until
	// the first sale of a request sent after it, or the whole window.
	StuckMS float64 `json:"stuck_ms"`
	// Stuck: no such sale within the window at all.
	Stuck bool `json:"stuck"`
	// RecoveryMS is from the fault's end to the first sale of a request
	// sent after it.
	RecoveryMS *float64 `json:"recovery_ms,omitempty"`
	WindowMS   float64  `json:"window_ms"`
	// Answers to the sales offered around the fault.
	Requests int `json:"requests"`
	Sales    int `json:"sales"`
	Busy     int `json:"busy"`
	Errors   int `json:"errors"`
	// LockKeys and SaleAfterReset: after a crash that left the stage stuck.
	LockKeys       []LockKey     `json:"lock_keys,omitempty"`
	SaleAfterReset *bool         `json:"sale_after_reset,omitempty"`
	Outage         *OutageReport `json:"outage,omitempty"`
	// OrderOutage: what an orders-down step's sales answered.
	OrderOutage *OrderOutageReport `json:"order_outage,omitempty"`
	// WorkerKill: what a worker-kill or duplicate-delivery step saw while
	// the worker was down.
	WorkerKill *WorkerKillReport `json:"worker_kill,omitempty"`
	// AsyncOrders: what an async stage's orders did through an
	// orders-down or redis-restart step (fault_async.go).
	AsyncOrders *AsyncOutageReport `json:"async_orders,omitempty"`
	// Notes say in words what happened, step by step.
	Notes []string `json:"notes,omitempty"`
}

// OutageReport is what a redis-restart step measured: how the shops
// answered while Redis was down, and what the restart lost.
type OutageReport struct {
	Persistence string  `json:"persistence"`
	DownMS      float64 `json:"down_ms"`
	// Answers sent while Redis was down, how many failed, the slowest.
	Answers    int     `json:"answers"`
	Failures   int     `json:"failures"`
	MaxFailMS  float64 `json:"max_fail_ms"`
	SalesAcked int     `json:"sales_acked"` // 200 answers over the whole run
	// SalesBefore answered before the kill; their rate before it.
	SalesBefore       int     `json:"sales_before"`
	SalesPerSecBefore float64 `json:"sales_per_sec_before"`
	// AuditSold and AuditInitial after the restart; InitialKept says the
	// data survived: a probe key written before the kill was still there
	// (not the audit's initial stock, which a wiped SKU's default may
	// equal).
	AuditSold    int  `json:"audit_sold"`
	AuditInitial int  `json:"audit_initial"`
	InitialKept  bool `json:"initial_kept"`
	// LostSales are acknowledged sales the audit no longer counts; LostMS
	// the same at the rate before the kill.
	LostSales int     `json:"lost_sales"`
	LostMS    float64 `json:"lost_ms"`
	Why       string  `json:"why"`
}

// namesBut returns the replicas' names but one, in order.
func namesBut(names []string, except string) []string {
	return slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == except })
}
