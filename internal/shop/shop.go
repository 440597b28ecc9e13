// Package shop assembles one shop replica — Redis clients, inventory,
// metrics and HTTP routes — from its configuration, for cmd/shop and for
// tests that run several replicas in one process.
package shop

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	_ "github.com/go-sql-driver/mysql" // the mysql stage's driver
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lockstep/lockstep/internal/frontdoor"
	"github.com/lockstep/lockstep/internal/httpapi"
	"github.com/lockstep/lockstep/internal/metrics"
	"github.com/lockstep/lockstep/internal/redisbatch"
	"github.com/lockstep/lockstep/internal/redisclient"
	"github.com/lockstep/lockstep/internal/redistrace"
	"github.com/lockstep/lockstep/inventory"
	"github.com/lockstep/lockstep/lock"
	"github.com/lockstep/lockstep/orders"
	"github.com/redis/go-redis/v9"
)

// Config configures one replica. Zero values take the defaults noted.
type Config struct {
	// RedisAddrs: the first holds the stock; three or more are also the
	// independent masters of redlock. With RedisSentinels, the stock lives
	// on the Sentinel-managed master and RedisAddrs serve only as redlock's
	// masters, when there are three or more.
	RedisAddrs []string
	// RedisSentinels are Sentinel addresses and RedisMaster the name of the
	// master they monitor: the stock's Redis is then whichever server they
	// name master, followed across failovers.
	RedisSentinels []string
	RedisMaster    string
	// RedisCluster are seed addresses of a Redis Cluster that then holds
	// the stock, the locks and the faults (RedisAddrs must be empty: a
	// cluster's masters are not independent, so redlock is unavailable).
	RedisCluster []string
	// HoldersRedisAddr, optional, keeps the holder counts of the
	// track_holders fault on a Redis of their own, so they survive a
	// restart or a failover of the stock's Redis.
	HoldersRedisAddr string
	RedisPassword    string
	RedisDB          int
	// RedisTimeout bounds each dial, read and write (default 300ms), so a
	// dead Redis answers 503 within a second.
	RedisTimeout time.Duration
	// RedisPoolSize is each Redis client's pool (default 128).
	RedisPoolSize int
	// NoAutoPipeline turns off sending concurrent commands as one pipeline.
	NoAutoPipeline bool
	// MySQLDSN, optional, is the go-sql-driver data source name of the
	// mysql stage's database; EtcdEndpoints, optional, the etcd stage's
	// cluster. Without them those stages are unavailable.
	MySQLDSN      string
	EtcdEndpoints []string
	// OrdersSQLite, optional, is the file of the embedded order table, used
	// by the order stages when no MySQLDSN is given (a workshop without
	// MariaDB); with MySQLDSN the orders live in MySQL.
	OrdersSQLite string
	// ZooKeeperServers, optional, are the zookeeper stage's ensemble.
	ZooKeeperServers []string

	Replica        string
	AdminToken     string
	DefaultStock   int64
	Segments       int
	LockWait       time.Duration
	RequestTimeout time.Duration
	IdempotencyTTL time.Duration
	// Limiter names the front door's rate limiter (frontdoor.None, Local,
	// Redis; empty is none) and Limits its rates; limit-redis keeps its
	// state on the stock's Redis.
	Limiter string
	Limits  frontdoor.Limits
	// SoldOutMarkTTL, when positive, puts the sold-out mark before every
	// stage: a SKU learned sold out is answered from memory for at most
	// this long after a lost stock-back message (0: no mark).
	SoldOutMarkTTL time.Duration
	Logger         *slog.Logger
	// Exit ends the process for the crash-while-holding fault (os.Exit).
	Exit func(code int)
	// Pause stops the process for the pause_before_write fault (SIGSTOP to
	// itself).
	Pause func()
}

// redisSettings are the shop's Redis client settings; internal/redisclient
// builds every client from them, so none of them resends a command that
// may have run (a sale's script, an EXEC, a lock's script).
func redisSettings(cfg Config) redisclient.Settings {
	return redisclient.Settings{Password: cfg.RedisPassword, DB: cfg.RedisDB, Timeout: cfg.RedisTimeout, PoolSize: cfg.RedisPoolSize}
}

// Shop is one replica.
type Shop struct {
	Inventory *inventory.Inventory
	Metrics   *metrics.Metrics
	server    *httpapi.Server
	clients   []redis.UniversalClient
	batchers  []*redisbatch.Batcher
	closers   []io.Closer // the lock servers' clients
	stopMark  func()      // ends the sold-out mark's subscriber, if any
}

// New connects (lazily: go-redis dials on first use) and builds the replica.
func New(cfg Config) (*Shop, error) {
	switch {
	case len(cfg.RedisSentinels) > 0 && cfg.RedisMaster == "":
		return nil, errors.New("shop: Sentinel addresses without the master's name")
	case len(cfg.RedisSentinels) == 0 && len(cfg.RedisAddrs) == 0 && len(cfg.RedisCluster) == 0:
		return nil, errors.New("shop: no Redis address")
	case len(cfg.RedisCluster) > 0 && (len(cfg.RedisAddrs) > 0 || len(cfg.RedisSentinels) > 0):
		return nil, errors.New("shop: a Redis Cluster holds everything: no Redis or Sentinel addresses beside it")
	case len(cfg.RedisCluster) > 0 && cfg.RedisDB != 0:
		return nil, errors.New("shop: a Redis Cluster has only database 0")
	case cfg.IdempotencyTTL < 0 || cfg.IdempotencyTTL > 0 && cfg.IdempotencyTTL < time.Millisecond:
		// Redis keeps whole milliseconds: below one, every keyed sale's
		// answer would fail to be stored.
		return nil, fmt.Errorf("shop: idempotency TTL %v: must be at least 1ms", cfg.IdempotencyTTL)
	}
	if cfg.RedisTimeout == 0 {
		cfg.RedisTimeout = 300 * time.Millisecond
	}
	if cfg.RedisPoolSize == 0 {
		cfg.RedisPoolSize = 128
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	// The tracer goes on every client before automatic pipelining, which
	// sends commands from a goroutine of its own: it must see the sale's.
	tracer, err := redistrace.New(lock.Scripts(), inventory.Scripts(), httpapi.Scripts())
	if err != nil {
		return nil, fmt.Errorf("shop: %w", err)
	}
	s := &Shop{}
	connect := func(addr string) *redis.Client {
		rdb := redisclient.New(redisSettings(cfg), addr)
		s.clients = append(s.clients, rdb)
		tracer.Attach(rdb)
		if !cfg.NoAutoPipeline {
			s.batchers = append(s.batchers, redisbatch.Attach(rdb))
		}
		return rdb
	}
	var stock redis.UniversalClient
	switch {
	case len(cfg.RedisSentinels) > 0:
		failover := redisclient.NewFailover(redisSettings(cfg), cfg.RedisMaster, cfg.RedisSentinels)
		s.clients = append(s.clients, failover)
		tracer.Attach(failover)
		if !cfg.NoAutoPipeline {
			s.batchers = append(s.batchers, redisbatch.Attach(failover))
		}
		stock = failover
	case len(cfg.RedisCluster) > 0:
		// No automatic pipelining: a cluster client already sends a
		// pipeline per node, and the batcher's one pipeline would mix
		// the slots of many sales.
		cluster := redisclient.NewCluster(redisSettings(cfg), cfg.RedisCluster)
		s.clients = append(s.clients, cluster)
		tracer.Attach(cluster)
		stock = cluster
	}
	addrs := cfg.RedisAddrs
	if stock != nil && len(addrs) < 3 {
		addrs = nil // no stock on them and too few for redlock
	}
	var masters []redis.UniversalClient
	for _, addr := range addrs {
		rdb := connect(addr)
		if stock == nil {
			stock = rdb
		}
		masters = append(masters, rdb)
	}
	if len(masters) < 3 {
		masters = nil
	}
	holders := stock
	if cfg.HoldersRedisAddr != "" {
		holders = connect(cfg.HoldersRedisAddr)
	}
	var auditor lateAuditor
	s.Metrics = metrics.New(&auditor, cfg.Logger)
	s.Metrics.RedisPools(s.clients)
	invCfg := inventory.Config{
		ZooKeeper: cfg.ZooKeeperServers,
		Redis:     stock, RedlockRedis: masters, HoldersRedis: holders, DefaultStock: cfg.DefaultStock,
		DefaultSegments: cfg.Segments, LockWait: cfg.LockWait, Observer: s.Metrics, Logger: cfg.Logger,
		Exit: cfg.Exit, Pause: cfg.Pause, Replica: cfg.Replica,
	}
	if err := s.connectLockServers(cfg, &invCfg); err != nil {
		s.closeClients()
		return nil, fmt.Errorf("shop: %w", err)
	}
	inv, err := inventory.New(invCfg)
	if err != nil {
		s.closeClients()
		return nil, fmt.Errorf("shop: %w", err)
	}
	auditor.Inventory = inv
	s.Inventory = inv
	limiter, err := frontdoor.New(cfg.Limiter, cfg.Limits, stock)
	if err != nil {
		s.closeClients()
		return nil, fmt.Errorf("shop: %w", err)
	}
	if cfg.Limiter == "" || cfg.Limiter == frontdoor.None {
		// No limiter at all: asking one that admits everything costs every
		// deduct the buyer's address (gin's ClientIP reads the forwarding
		// headers), a tenth of atomic's handler in its profile.
		limiter = nil
	}
	var mark *frontdoor.SoldOutMark
	var markState metrics.MarkState
	if cfg.SoldOutMarkTTL > 0 {
		mark = frontdoor.NewSoldOutMark(stock, cfg.SoldOutMarkTTL)
		markState = mark
		s.stopMark = s.runMark(mark, cfg.Logger)
	}
	s.server = httpapi.New(httpapi.Config{
		Inventory: inv, Redis: stock, Metrics: s.Metrics, Logger: cfg.Logger, Replica: cfg.Replica,
		AdminToken: cfg.AdminToken, IdempotencyTTL: cfg.IdempotencyTTL, RequestTimeout: cfg.RequestTimeout,
		Tracer: tracer, Limiter: limiter, SoldOut: mark, FrontDoor: metrics.NewFrontDoor(s.Metrics.Registry, markState, inventory.StageIDs()),
	})
	return s, nil
}

// runMark runs the mark's subscriber until the returned stop is called.
func (s *Shop) runMark(mark *frontdoor.SoldOutMark, log *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mark.Run(ctx); err != nil {
			log.Warn("sold-out mark stopped: no SKU is marked", "err", err)
		}
	}()
	return func() { cancel(); <-done }
}

// connectLockServers opens the clients of the lock servers beside Redis.
// Both connect lazily, so a server that is down makes its stage answer 503,
// not the shop fail to start.
func (s *Shop) connectLockServers(cfg Config, inv *inventory.Config) error {
	if cfg.MySQLDSN != "" {
		db, err := sql.Open("mysql", cfg.MySQLDSN)
		if err != nil {
			return fmt.Errorf("mysql: %w", err)
		}
		db.SetMaxOpenConns(cfg.RedisPoolSize)
		db.SetMaxIdleConns(cfg.RedisPoolSize)
		s.closers = append(s.closers, db)
		inv.MySQL = db
	}
	if err := s.openOrders(cfg, inv); err != nil {
		return err
	}
	if len(cfg.EtcdEndpoints) > 0 {
		client, err := clientv3.New(clientv3.Config{
			Endpoints: cfg.EtcdEndpoints, DialTimeout: 2 * time.Second, Logger: zap.NewNop(),
		})
		if err != nil {
			return fmt.Errorf("etcd: %w", err)
		}
		s.closers = append(s.closers, client)
		inv.Etcd = client
	}
	return nil
}

// ordersTimeout bounds creating the order tables at start.
const ordersTimeout = 10 * time.Second

// openOrders opens the order table of the order stages: in MySQL when the
// shop has one, else in the embedded SQLite file when one is configured.
// A MySQL that is down at start leaves the order stages unavailable (said
// in the log), as the mysql stage's lock table does.
func (s *Shop) openOrders(cfg Config, inv *inventory.Config) error {
	ctx, cancel := context.WithTimeout(context.Background(), ordersTimeout)
	defer cancel()
	switch {
	case inv.MySQL != nil:
		store, err := orders.OpenMySQL(ctx, inv.MySQL)
		if err != nil {
			cfg.Logger.Warn("order stages unavailable: cannot create the order table", "err", err)
			return nil
		}
		inv.Orders = tracedOrders{Store: s.groupCommit(store), db: "mysql"}
		inv.Payments = openPayments(ctx, store, cfg.Logger)
	case cfg.OrdersSQLite != "":
		store, err := orders.OpenSQLite(ctx, cfg.OrdersSQLite)
		if err != nil {
			return err
		}
		inv.Orders = tracedOrders{Store: s.groupCommit(store), db: "sqlite"}
		inv.Payments = openPayments(ctx, store, cfg.Logger)
	}
	return nil
}

// groupCommit writes the orders of the sales that insert at the same time
// together (orders.GroupCommit), each sale still answered by its own row.
// Its Close, first of the closers (before the MySQL pool it writes with),
// writes what is queued and closes store.
func (s *Shop) groupCommit(store *orders.SQLStore) orders.Store {
	g := orders.NewGroupCommit(store)
	s.closers = append([]io.Closer{g}, s.closers...)
	return g
}

// openPayments gives the async stages their payments table; without it
// payments answer stage_unavailable (said in the log).
func openPayments(ctx context.Context, store *orders.SQLStore, log *slog.Logger) *orders.Payments {
	p, err := store.Payments(ctx)
	if err != nil {
		log.Warn("payments unavailable: cannot create the payment table", "err", err)
		return nil
	}
	return p
}

// lateAuditor lets the metrics, which the inventory reports to, read the
// inventory's audit once it exists.
type lateAuditor struct{ *inventory.Inventory }

// Handler serves the shop's routes.
func (s *Shop) Handler() http.Handler { return s.server.Handler() }

// Drain makes readiness fail ahead of a shutdown.
func (s *Shop) Drain() { s.server.Drain() }

// Close stops the server's background work, and releases the inventory
// (fault follower, lock clients) and the Redis clients. Call it after the HTTP server has drained.
func (s *Shop) Close() error {
	s.server.Close()
	if s.stopMark != nil {
		s.stopMark()
	}
	err := s.Inventory.Close()
	return errors.Join(err, s.closeClients())
}

func (s *Shop) closeClients() error {
	for _, b := range s.batchers {
		b.Close()
	}
	var errs []error
	for _, c := range s.clients {
		errs = append(errs, c.Close())
	}
	for _, c := range s.closers {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}
