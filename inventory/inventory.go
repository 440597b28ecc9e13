package inventory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/lockstep/lockstep/lock"
	"github.com/lockstep/lockstep/orders"
	"github.com/lockstep/lockstep/segments"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Limits of a request.
const (
	MaxQty   = 100
	MaxStock = 1_000_000_000
	// DefaultSKU is the SKU of a request that names none.
	DefaultSKU = "sku-1"
)

// maxSKULength keeps SKUs short.
const maxSKULength = 64

// ValidateSKU reports a SKU the shop does not accept: one of 1-64
// characters of A-Z a-z 0-9 . _ -, free of the braces and colons that would
// break the keys' hash tags. (A loop, not a regexp: every sale checks it.)
func ValidateSKU(sku string) error {
	if len(sku) < 1 || len(sku) > maxSKULength || strings.IndexFunc(sku, notSKURune) >= 0 {
		return fmt.Errorf("%w: sku must be 1-64 characters of A-Z a-z 0-9 . _ -", ErrInvalid)
	}
	return nil
}

func notSKURune(r rune) bool {
	return !('A' <= r && r <= 'Z' || 'a' <= r && r <= 'z' || '0' <= r && r <= '9' || r == '.' || r == '_' || r == '-')
}

// ValidateQty reports a quantity outside [1, MaxQty].
func ValidateQty(qty int64) error {
	if qty < 1 || qty > MaxQty {
		return fmt.Errorf("%w: qty must be within [1, %d], got %d", ErrInvalid, MaxQty, qty)
	}
	return nil
}

// LockResult is the outcome of one lock acquisition.
type LockResult string

const (
	LockAcquired LockResult = "acquired"
	LockBusy     LockResult = "busy"
	LockError    LockResult = "error"
)

// Observer is told what the stages' locks do, for metrics.
type Observer interface {
	LockAcquire(stage string, wait time.Duration, result LockResult)
	// WatchdogRenewal gets nil, lock.ErrLockLost or the Redis error.
	WatchdogRenewal(stage string, err error)
	ForeignUnlock(stage string)
}

type nopObserver struct{}

func (nopObserver) LockAcquire(string, time.Duration, LockResult) {}
func (nopObserver) WatchdogRenewal(string, error)                 {}
func (nopObserver) ForeignUnlock(string)                          {}

// Config configures an Inventory.
type Config struct {
	// Redis holds the stock, the faults and the locks of every stage but
	// redlock's.
	Redis redis.UniversalClient
	// RedlockRedis are independent Redis masters for redlock's locks; with
	// fewer than three the stage is unavailable.
	RedlockRedis []redis.UniversalClient
	// DefaultStock is the stock a never-reset SKU starts with (default 500).
	DefaultStock int64
	// DefaultSegments is the segment count of segmented (default 16).
	DefaultSegments int
	// LockWait is how long the waiting stages (synchronized, watchdog,
	// segmented, redlock) wait for their lock before answering busy
	// (default 3s).
	LockWait time.Duration
	// FaultRefresh is how often faults are re-read from Redis besides the
	// pub/sub announcements (default 1s).
	FaultRefresh time.Duration
	Observer     Observer
	Logger       *slog.Logger
	// Exit ends the process for the crash-while-holding fault (default
	// os.Exit). Tests inject one that returns.
	Exit func(code int)
	// Pause stops the process for the pause_before_write fault and returns
	// once it runs again (default: SIGSTOP to itself, until a SIGCONT).
	// Tests inject one that blocks.
	Pause func()
	// Replica names this replica among a SKU's holders (track_holders).
	Replica string
	// MySQL, optional, is the database of the mysql stage's lock table
	// (created when missing); without it the stage is unavailable.
	MySQL *sql.DB
	// Etcd, optional, is the cluster of the etcd stage's locks; without it
	// the stage is unavailable.
	Etcd *clientv3.Client
	// ZooKeeper, optional, are the servers of the zookeeper stage's
	// ensemble; without them the stage is unavailable.
	ZooKeeper []string
	// Orders, optional, is the order table of the order stages (the
	// one-per-user and optimistic rungs); without it they are unavailable.
	Orders orders.Store
	// Payments, optional, are the async stages' payment states (in the
	// order table's database); without them Pay is unavailable.
	Payments *orders.Payments
	// HoldersRedis keeps the holder counts of track_holders (default Redis):
	// a Redis apart from the stock's keeps them across a restart or a
	// failover of the stock's Redis.
	HoldersRedis redis.UniversalClient
}

func (c *Config) setDefaults() {
	if c.DefaultStock == 0 {
		c.DefaultStock = 500
	}
	if c.DefaultSegments == 0 {
		c.DefaultSegments = segments.DefaultCount
	}
	if c.LockWait == 0 {
		c.LockWait = 3 * time.Second
	}
	if c.FaultRefresh == 0 {
		c.FaultRefresh = time.Second
	}
	if c.Observer == nil {
		c.Observer = nopObserver{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Exit == nil {
		c.Exit = os.Exit
	}
	if c.Pause == nil {
		c.Pause = stopSelf
	}
	if c.HoldersRedis == nil {
		c.HoldersRedis = c.Redis
	}
}

// stopSelf stops the whole process, every thread, as kill -STOP would, and
// returns once it was continued. The signal goes to the calling thread:
// sent to the process, the kernel may hand it to another thread, and this
// one would run on (and write) until that thread stopped them all.
func stopSelf() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	_ = syscall.Tgkill(os.Getpid(), syscall.Gettid(), syscall.SIGSTOP)
}

// Inventory runs every stage against Redis.
type Inventory struct {
	cfg     Config
	stages  map[string]stage
	faults  *faultBook
	health  *health
	clients []*lockClients
	// Why a configured stage could not start, by stage id.
	broken     map[string]string
	sessions   *etcdSessions
	zkSessions *zkSessions
	// resolver removes what the lock-server stages' requests without an
	// answer may have left.
	resolver *resolver
	// pending is the order resolutions kept in Redis (nil: no order stages).
	pending *pendingOrders
}

// New builds every stage and starts following the faults. Close stops it.
func New(cfg Config) (*Inventory, error) {
	cfg.setDefaults()
	switch {
	case cfg.Redis == nil:
		return nil, errors.New("inventory: no Redis client")
	case cfg.DefaultStock < 0 || cfg.DefaultStock > MaxStock:
		return nil, fmt.Errorf("inventory: default stock %d out of [0, %d]", cfg.DefaultStock, MaxStock)
	case cfg.DefaultSegments < 1 || cfg.DefaultSegments > segments.MaxCount:
		return nil, fmt.Errorf("inventory: default segments %d out of [1, %d]", cfg.DefaultSegments, segments.MaxCount)
	}
	inv := &Inventory{cfg: cfg, stages: make(map[string]stage), broken: make(map[string]string), resolver: newResolver(cfg.Logger)}
	inv.faults = newFaultBook(cfg.Redis, cfg.Logger, StageIDs(), cfg.FaultRefresh)
	inv.health = newHealth(cfg.Redis)
	seller := func(id string) *seller {
		return &seller{
			id: id, store: store{rdb: cfg.Redis, stage: id}, faults: inv.faults, obs: cfg.Observer,
			log: cfg.Logger, exit: cfg.Exit, pause: cfg.Pause, defaultStock: cfg.DefaultStock, lockWait: cfg.LockWait,
			holders: &holders{rdb: cfg.HoldersRedis, stage: id, replica: cfg.Replica, log: cfg.Logger},
		}
	}
	watchdog := func(id string, rdb redis.UniversalClient) *lockClients {
		c := newLockClients(rdb, lock.WithRenewalObserver(func(_ string, err error) { cfg.Observer.WatchdogRenewal(id, err) }))
		inv.clients = append(inv.clients, c)
		return c
	}
	inv.stages["naive"] = &guardedStage{seller: seller("naive"), guard: noGuard{}}
	inv.stages["synchronized"] = &guardedStage{seller: seller("synchronized"), guard: newLocalGuard(cfg.LockWait), locking: true}
	inv.stages["setnx"] = &guardedStage{seller: seller("setnx"), guard: setnxGuard(cfg.Redis), locking: true, crashes: true}
	inv.stages["setnx-expire"] = &guardedStage{seller: seller("setnx-expire"), guard: expiringGuard(cfg.Redis), locking: true, crashes: true}
	inv.stages["uuid-lua"] = &guardedStage{seller: seller("uuid-lua"), guard: tokenGuard(cfg.Redis), locking: true, crashes: true}
	inv.stages["watchdog"] = &guardedStage{
		seller: seller("watchdog"), guard: watchdogGuard{clients: watchdog("watchdog", cfg.Redis), health: inv.health, wait: cfg.LockWait},
		locking: true, crashes: true,
	}
	inv.stages["segmented"] = &segmentedStage{
		seller: seller("segmented"), guard: watchdogGuard{clients: watchdog("segmented", cfg.Redis), health: inv.health, wait: cfg.LockWait},
		defaultSegments: cfg.DefaultSegments, counts: make(map[string]cachedCount),
	}
	inv.stages["atomic"] = &atomicStage{seller: seller("atomic")}
	inv.stages["segmented-atomic"] = &segmentedAtomicStage{&segmentedStage{
		seller: seller("segmented-atomic"), guard: watchdogGuard{clients: watchdog("segmented-atomic", cfg.Redis), health: inv.health, wait: cfg.LockWait},
		defaultSegments: cfg.DefaultSegments, counts: make(map[string]cachedCount),
	}}
	inv.stages["fenced"] = &fencedStage{seller: seller("fenced"), clients: watchdog("fenced", cfg.Redis), health: inv.health, wait: cfg.LockWait}
	if len(cfg.RedlockRedis) >= 3 {
		masters := make([]*lockClients, len(cfg.RedlockRedis))
		for i, rdb := range cfg.RedlockRedis {
			masters[i] = watchdog("redlock", rdb)
		}
		inv.stages["redlock"] = &guardedStage{
			seller: seller("redlock"), guard: redlockGuard{clients: masters, health: inv.health, wait: cfg.LockWait},
			locking: true, crashes: true, dropLocks: dropOn(cfg.RedlockRedis),
		}
	}
	inv.addLockServerStages(seller)
	if cfg.Orders != nil {
		inv.pending = newPendingOrders(cfg.Redis, cfg.Replica, cfg.Logger)
		inv.addOrderStages(func(id string) *orderSeller {
			s := &orderSeller{seller: seller(id), orders: cfg.Orders, replica: cfg.Replica, resolver: inv.resolver, pending: inv.pending}
			inv.pending.add(s)
			return s
		}, watchdog)
		inv.pending.start()
	}
	return inv, nil
}

// addOrderStages adds the stages whose sales become orders.
func (inv *Inventory) addOrderStages(seller func(id string) *orderSeller, watchdog func(id string, rdb redis.UniversalClient) *lockClients) {
	cfg := inv.cfg
	inv.stages["one-per-user-naive"] = &onePerUserStage{orderSeller: seller("one-per-user-naive"), guard: noGuard{}}
	inv.stages["one-per-user-synchronized"] = &onePerUserStage{orderSeller: seller("one-per-user-synchronized"), guard: newKeyedLocalGuard(cfg.LockWait)}
	inv.stages["one-per-user-lua"] = &onePerUserLuaStage{seller("one-per-user-lua")}
	inv.stages["one-per-user-lock"] = &onePerUserStage{
		orderSeller: seller("one-per-user-lock"),
		guard:       watchdogGuard{clients: watchdog("one-per-user-lock", cfg.Redis), health: inv.health, wait: cfg.LockWait},
	}
	inv.stages["optimistic-redis"] = &optimisticRedisStage{seller("optimistic-redis")}
	inv.stages["optimistic-mysql-version"] = &optimisticSQLStage{orderSeller: seller("optimistic-mysql-version"), cond: orders.SameStock}
	inv.stages["optimistic-mysql"] = &optimisticSQLStage{orderSeller: seller("optimistic-mysql"), cond: orders.EnoughStock}
	inv.stages["semaphore"] = &semaphoreStage{orderSeller: seller("semaphore"), clients: watchdog("semaphore", cfg.Redis)}
	inv.stages["semaphore-expirable"] = &semaphoreExpirableStage{orderSeller: seller("semaphore-expirable"), clients: watchdog("semaphore-expirable", cfg.Redis)}
	inv.addAsyncStages(seller)
}

// addLockServerStages adds the stages whose lock lives on a server beside
// Redis, when it is configured; one that cannot start is listed as
// unavailable with the reason.
func (inv *Inventory) addLockServerStages(seller func(id string) *seller) {
	if inv.cfg.MySQL != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		g, err := newMySQLGuard(ctx, inv.cfg.MySQL, inv.resolver)
		cancel()
		if err != nil {
			inv.broken["mysql"] = err.Error()
		} else {
			inv.stages["mysql"] = &guardedStage{seller: seller("mysql"), guard: g, locking: true, crashes: true, dropLocks: g.drop}
		}
	}
	if inv.cfg.Etcd != nil {
		inv.sessions = newEtcdSessions(inv.cfg.Etcd, inv.resolver)
		g := etcdGuard{sessions: inv.sessions, wait: inv.cfg.LockWait}
		inv.stages["etcd"] = &guardedStage{seller: seller("etcd"), guard: g, locking: true, crashes: true, dropLocks: g.drop}
	}
	if len(inv.cfg.ZooKeeper) > 0 {
		inv.zkSessions = newZKSessions(inv.cfg.ZooKeeper, inv.cfg.Logger)
		g := zkGuard{sessions: inv.zkSessions, wait: inv.cfg.LockWait}
		inv.stages["zookeeper"] = &guardedStage{seller: seller("zookeeper"), guard: g, locking: true, crashes: true, dropLocks: g.drop}
	}
}

// dropOn deletes a lock key on every master it can reach; like the lock
// itself it needs a majority, so a reset works with one master down (a
// stale copy there expires, and never makes a majority on its own).
func dropOn(masters []redis.UniversalClient) func(ctx context.Context, key string) error {
	return func(ctx context.Context, key string) error {
		var errs []error
		for _, rdb := range masters {
			if err := rdb.Del(ctx, key).Err(); err != nil {
				errs = append(errs, err)
			}
		}
		if len(masters)-len(errs) > len(masters)/2 {
			return nil
		}
		return unavailable("drop lock on a majority", errors.Join(errs...))
	}
}

// Close stops following the faults and closes the lock clients. Locks
// still held are left to expire, as after a crash; call it once requests
// have drained.
func (inv *Inventory) Close() error {
	inv.faults.close()
	inv.health.close()
	inv.resolver.close()
	if inv.pending != nil {
		inv.pending.close()
	}
	var errs []error
	for _, c := range inv.clients {
		errs = append(errs, c.close())
	}
	if inv.sessions != nil {
		errs = append(errs, inv.sessions.close())
	}
	if inv.zkSessions != nil {
		inv.zkSessions.close()
	}
	return errors.Join(errs...)
}

func (inv *Inventory) stage(id string) (stage, error) {
	if s, ok := inv.stages[id]; ok {
		return s, nil
	}
	if _, known := catalogIndex[id]; known {
		return nil, fmt.Errorf("%w: %s: %s", ErrStageUnavailable, id, inv.unavailableReason(id))
	}
	return nil, fmt.Errorf("%w: %q", ErrUnknownStage, id)
}

func (inv *Inventory) unavailableReason(id string) string {
	if reason, ok := inv.broken[id]; ok {
		return reason
	}
	switch id {
	case "redlock":
		if _, cluster := inv.cfg.Redis.(*redis.ClusterClient); cluster {
			return "needs at least 3 independent Redis masters: a Redis Cluster's masters share one keyspace, each key on one of them"
		}
		return fmt.Sprintf("needs at least 3 independent Redis masters, this shop has %d", len(inv.cfg.RedlockRedis))
	case "mysql":
		return "needs a MySQL/MariaDB database (--mysql-dsn)"
	case "etcd":
		return "needs an etcd cluster (--etcd-endpoints)"
	case "zookeeper":
		return "needs a ZooKeeper ensemble (--zookeeper-servers)"
	case "one-per-user-naive", "one-per-user-synchronized", "one-per-user-lua", "one-per-user-lock",
		"optimistic-redis", "optimistic-mysql-version", "optimistic-mysql", "semaphore", "semaphore-expirable",
		"async-stream", "async-two-steps", "async-no-claim", "async-wrong-ack":
		return "needs an order database (--mysql-dsn, or --orders-sqlite for the embedded one)"
	case "mongodb":
		return "described, not run: no MongoDB server can be installed on these machines, and no untested lock ships"
	}
	return "not configured"
}

// Available reports whether the shop runs stageID: nil, or an error
// wrapping ErrUnknownStage or ErrStageUnavailable.
func (inv *Inventory) Available(stageID string) error {
	_, err := inv.stage(stageID)
	return err
}

// Deduct makes one sale attempt of qty units of sku on a stage, for no
// named buyer.
func (inv *Inventory) Deduct(ctx context.Context, stageID, sku string, qty int64) (Sale, error) {
	return inv.DeductFor(ctx, stageID, sku, "", qty)
}

// DeductFor makes one sale attempt of qty units of sku on a stage for user
// ("": none). The order stages make the sale an order of user, and the
// one-per-user ones refuse a sale without one (ErrInvalid); the other
// stages sell as Deduct does.
func (inv *Inventory) DeductFor(ctx context.Context, stageID, sku, user string, qty int64) (Sale, error) {
	s, err := inv.stage(stageID)
	if err != nil {
		return Sale{}, err
	}
	if err := errors.Join(ValidateSKU(sku), ValidateQty(qty), validateUser(user)); err != nil {
		return Sale{}, err
	}
	if b, ok := s.(buyerStage); ok {
		return b.sell(ctx, sku, user, qty, inv.faults.get(stageID))
	}
	return s.deduct(ctx, sku, qty, inv.faults.get(stageID))
}

// validateUser reports a buyer id the order table cannot hold; "" is none.
func validateUser(user string) error {
	if user == "" {
		return nil
	}
	if err := orders.ValidateUser(user); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

// Orders pages through the orders of sku on an order stage, by id after
// after; limit is 1..1000.
func (inv *Inventory) Orders(ctx context.Context, stageID, sku, after string, limit int) ([]orders.Order, error) {
	s, err := inv.stage(stageID)
	if err != nil {
		return nil, err
	}
	if _, ok := s.(buyerStage); !ok {
		return nil, fmt.Errorf("%w: stage %s makes no orders", ErrInvalid, stageID)
	}
	if err := ValidateSKU(sku); err != nil {
		return nil, err
	}
	if limit < 1 || limit > maxOrderPage {
		return nil, fmt.Errorf("%w: limit must be within [1, %d], got %d", ErrInvalid, maxOrderPage, limit)
	}
	list, err := inv.cfg.Orders.List(ctx, stageID, sku, after, limit)
	if err != nil {
		return nil, ordersUnavailable("list orders", err)
	}
	return list, nil
}

// maxOrderPage bounds a page of Orders.
const maxOrderPage = 1000

// Audit reads the accounting of sku on a stage.
func (inv *Inventory) Audit(ctx context.Context, stageID, sku string) (Audit, error) {
	s, err := inv.stage(stageID)
	if err != nil {
		return Audit{}, err
	}
	if err := ValidateSKU(sku); err != nil {
		return Audit{}, err
	}
	return s.audit(ctx, sku)
}

// Reset sets sku's stock on a stage, zeroes its sales and drops its locks,
// and announces it on StockBackChannel.
// segments (0: the default) applies to segmented only.
func (inv *Inventory) Reset(ctx context.Context, stageID, sku string, stock int64, segmentCount int) error {
	s, err := inv.stage(stageID)
	if err != nil {
		return err
	}
	if err := ValidateSKU(sku); err != nil {
		return err
	}
	if stock < 0 || stock > MaxStock {
		return fmt.Errorf("%w: stock must be within [0, %d], got %d", ErrInvalid, MaxStock, stock)
	}
	if segmentCount < 0 || segmentCount > segments.MaxCount {
		return fmt.Errorf("%w: segments must be within [0, %d] (0: the default), got %d", ErrInvalid, segments.MaxCount, segmentCount)
	}
	if err := s.reset(ctx, sku, stock, segmentCount); err != nil {
		return err
	}
	if err := inv.cfg.Redis.SAdd(ctx, skusKey(stageID), sku).Err(); err != nil {
		return unavailable("track sku", err)
	}
	if err := inv.cfg.Redis.Publish(ctx, StockBackChannel, stageID+" "+sku).Err(); err != nil {
		return unavailable("announce the reset", err)
	}
	return nil
}

func skusKey(stage string) string { return "lockstep:" + stage + ":skus" }

// SKUs lists the SKUs of a stage that were ever reset, and the default SKU:
// the ones whose accounting the metrics report.
func (inv *Inventory) SKUs(ctx context.Context, stageID string) ([]string, error) {
	skus, err := inv.cfg.Redis.SMembers(ctx, skusKey(stageID)).Result()
	if err != nil {
		return nil, unavailable("list skus", err)
	}
	for _, s := range skus {
		if s == DefaultSKU {
			return skus, nil
		}
	}
	return append(skus, DefaultSKU), nil
}

// Faults returns the faults a stage runs with on this replica.
func (inv *Inventory) Faults(stageID string) (Faults, error) {
	if _, err := inv.stage(stageID); err != nil {
		return Faults{}, err
	}
	return inv.faults.get(stageID), nil
}

// SetFaults sets a stage's faults on every replica.
func (inv *Inventory) SetFaults(ctx context.Context, stageID string, f Faults) error {
	if _, err := inv.stage(stageID); err != nil {
		return err
	}
	if err := f.Validate(); err != nil {
		return err
	}
	if err := unsupportedFaults(stageID, inv.stages[stageID], f); err != nil {
		return err
	}
	return inv.faults.set(ctx, stageID, f)
}

// unsupportedFaults refuses the knobs a stage has no use for, so that a
// fault set on the wrong stage fails loudly instead of doing nothing.
func unsupportedFaults(id string, s stage, f Faults) error {
	_, guarded := s.(*guardedStage)
	_, fenced := s.(*fencedStage)
	_, segmented := s.(*segmentedStage)
	var watchdogMutex bool // the stage's lock is a watchdog lock on the stock's Redis
	var tokens bool        // the stage's lock can fence
	switch st := s.(type) {
	case *guardedStage:
		_, watchdogMutex = st.guard.(watchdogGuard)
		_, tokens = st.guard.(fencingGuard)
	case *segmentedStage, *fencedStage:
		watchdogMutex = true
	}
	switch {
	case f.CrashHoldingLock && !catalog[catalogIndex[id]].redisLock:
		return fmt.Errorf("%w: crash_holding_lock: stage %s holds no Redis lock", ErrInvalid, id)
	case (f.PauseBeforeWrite || f.TrackHolders) && !guarded && !fenced && !segmented:
		return fmt.Errorf("%w: pause_before_write and track_holders need a read-modify-write under one lock, which %s does not have", ErrInvalid, id)
	case f.WaitReplicas > 0 && !watchdogMutex:
		return fmt.Errorf("%w: wait_replicas applies to the watchdog locks of watchdog, segmented and fenced, not to %s", ErrInvalid, id)
	case f.Fence && !tokens:
		return fmt.Errorf("%w: fence needs a lock that hands out fencing tokens (etcd, zookeeper), not %s's (fenced fences always)", ErrInvalid, id)
	}
	return nil
}

// Ping checks every Redis the shop uses.
func (inv *Inventory) Ping(ctx context.Context) error {
	var errs []error
	all := append([]redis.UniversalClient{inv.cfg.Redis, inv.cfg.HoldersRedis}, inv.cfg.RedlockRedis...)
	for i, rdb := range all {
		if slices.Contains(all[:i], rdb) {
			continue // the stock Redis is usually the first redlock master too
		}
		if err := rdb.Ping(ctx).Err(); err != nil {
			errs = append(errs, unavailable("ping", err))
		}
	}
	return errors.Join(errs...)
}

// Stages describes every stage, in the order of the progression.
func (inv *Inventory) Stages() []Info {
	out := make([]Info, len(catalog))
	for i, e := range catalog {
		info := e.Info
		if _, ok := inv.stages[info.ID]; ok {
			info.Available = true
			info.Faults = inv.faults.get(info.ID)
		} else {
			info.Unavailable = inv.unavailableReason(info.ID)
		}
		out[i] = info
	}
	return out
}
