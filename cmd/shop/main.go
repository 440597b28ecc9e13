// Command shop is one replica of the lockstep flash-sale service: every
// stage of the distributed-lock progression behind the HTTP contract of
// SPEC.md. Run several behind nginx, all on one Redis.
//
// Every flag has an environment fallback, LOCKSTEP_<FLAG> with dashes as
// underscores (LOCKSTEP_ADDR, LOCKSTEP_REDIS_ADDR, ...); a flag given on the
// command line wins.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/lockstep/lockstep/internal/flagenv"
	"github.com/lockstep/lockstep/internal/frontdoor"
	"github.com/lockstep/lockstep/internal/httpapi"
	"github.com/lockstep/lockstep/internal/shop"
)

// main exits 0 after --help, 2 on a usage error (flagenv.ExitStatus).
func main() {
	err := run(os.Args[1:])
	if status := flagenv.ExitStatus(err); status != 0 {
		fmt.Fprintln(os.Stderr, "shop:", err)
		os.Exit(status)
	}
}

// options are the command's flags.
type options struct {
	addr, redisAddr, redisPassword, replica, adminToken, logLevel string
	redisSentinel, redisMaster, holdersRedisAddr, redisCluster    string
	mysqlDSN, etcdEndpoints, zookeeperServers, ordersSQLite       string
	redisDB, redisPoolSize, segments                              int
	defaultStock                                                  int64
	redisTimeout, lockWait, requestTimeout, idempotencyTTL        time.Duration
	shutdownTimeout                                               time.Duration
	// The front door's limiter (internal/frontdoor) and its rates per second.
	limiter                           string
	limitBuyer, limitGlobal           int
	limitBuyerBurst, limitGlobalBurst int
	// pprofAddr, optional, serves net/http/pprof (bench/shopcpu profiles
	// the shop under load through it).
	pprofAddr      string
	soldOutMarkTTL time.Duration
}

func parseFlags(args []string, getenv func(string) string) (options, error) {
	var o options
	fs := flag.NewFlagSet("shop", flag.ContinueOnError)
	hostname, _ := os.Hostname()
	fs.StringVar(&o.addr, "addr", ":8080", "listen address")
	fs.StringVar(&o.redisAddr, "redis-addr", "127.0.0.1:6379", "Redis address(es), comma-separated; the first holds the stock, three or more independent masters enable redlock")
	fs.StringVar(&o.redisSentinel, "redis-sentinel", "", "Sentinel addresses, comma-separated: the stock then lives on the master they name (--redis-master), followed across failovers, and --redis-addr serves only as redlock's masters")
	fs.StringVar(&o.redisCluster, "redis-cluster", "", "seed addresses of a Redis Cluster, comma-separated: it then holds the stock, locks and faults, and --redis-addr is ignored (redlock is unavailable: a cluster's masters are not independent)")
	fs.StringVar(&o.redisMaster, "redis-master", "", "name of the master the Sentinels monitor (with --redis-sentinel)")
	fs.StringVar(&o.holdersRedisAddr, "holders-redis-addr", "", "Redis for the track_holders fault's counts; empty: the stock's Redis")
	fs.StringVar(&o.mysqlDSN, "mysql-dsn", "", "MySQL/MariaDB data source name of the mysql stage's lock table (user:pass@tcp(host:3306)/db); empty: the stage is unavailable")
	fs.StringVar(&o.ordersSQLite, "orders-sqlite", "", "file of the embedded order table (pure-Go SQLite), used by the order stages when --mysql-dsn is empty; both empty: the order stages are unavailable")
	fs.StringVar(&o.etcdEndpoints, "etcd-endpoints", "", "etcd client URLs, comma-separated, of the etcd stage's locks; empty: the stage is unavailable")
	fs.StringVar(&o.zookeeperServers, "zookeeper-servers", "", "ZooKeeper servers (host:port), comma-separated, of the zookeeper stage's locks; empty: the stage is unavailable")
	fs.StringVar(&o.redisPassword, "redis-password", "", "Redis password")
	fs.IntVar(&o.redisDB, "redis-db", 0, "Redis database number")
	fs.DurationVar(&o.redisTimeout, "redis-timeout", 300*time.Millisecond, "timeout of each Redis dial, read and write")
	fs.IntVar(&o.redisPoolSize, "redis-pool-size", 128, "connections per Redis")
	fs.StringVar(&o.replica, "replica", hostname, "replica name (X-Replica, sale bodies)")
	fs.StringVar(&o.adminToken, "admin-token", "", "bearer token of the admin routes; empty: loopback clients only")
	fs.Int64Var(&o.defaultStock, "default-stock", 500, "stock of a SKU nobody reset yet")
	fs.IntVar(&o.segments, "segments", 16, "default segment count of the segmented stage")
	fs.DurationVar(&o.lockWait, "lock-wait", 3*time.Second, "wait budget of the waiting locks before 423 lock_busy")
	fs.DurationVar(&o.requestTimeout, "request-timeout", 10*time.Second, "bound of one deduct request")
	fs.DurationVar(&o.idempotencyTTL, "idempotency-ttl", 24*time.Hour, "how long an Idempotency-Key's answer is kept")
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 15*time.Second, "how long a shutdown waits for in-flight requests")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&o.limiter, "limiter", "limit-none", "rate limiter before every deduct: limit-none, limit-local (per replica) or limit-redis (shared); limit-nginx lives in nginx")
	fs.IntVar(&o.limitBuyer, "limit-buyer", 0, "requests per second a buyer may make (0: no per-buyer limit)")
	fs.IntVar(&o.limitBuyerBurst, "limit-buyer-burst", 1, "burst of the per-buyer limit")
	fs.IntVar(&o.limitGlobal, "limit-global", 0, "requests per second of all buyers together, per limiter (0: no global limit)")
	fs.IntVar(&o.limitGlobalBurst, "limit-global-burst", 1, "burst of the global limit")
	fs.StringVar(&o.pprofAddr, "pprof-addr", "", "loopback address of the Go profiler's endpoints (/debug/pprof/); empty: none")
	fs.DurationVar(&o.soldOutMarkTTL, "soldout-mark-ttl", 0, "the sold-out mark: a SKU learned sold out is answered from memory, cleared through pub/sub when stock comes back, and at the latest after this long (0: no mark)")
	if err := flagenv.Parse(fs, args, getenv); err != nil {
		return o, err
	}
	if err := o.check(); err != nil {
		return o, flagenv.Usage(err)
	}
	return o, nil
}

// check refuses every value the shop would otherwise refuse only once it
// dials Redis or the lock servers, or listens.
func (o options) check() error {
	return errors.Join(
		flagenv.HostPort("addr", o.addr),
		checkPprofAddr(o.pprofAddr),
		flagenv.HostPorts("redis-addr", o.redisAddr),
		flagenv.HostPorts("redis-sentinel", o.redisSentinel),
		flagenv.HostPorts("redis-cluster", o.redisCluster),
		flagenv.Check((o.redisSentinel == "") == (o.redisMaster == ""), "redis-master", "names the master --redis-sentinel monitors; the two go together"),
		flagenv.Check(o.redisAddr != "" || o.redisCluster != "", "redis-addr", "at least one address (or --redis-cluster)"),
		flagenv.HostPorts("holders-redis-addr", o.holdersRedisAddr),
		checkDSN(o.mysqlDSN),
		flagenv.URLs("etcd-endpoints", o.etcdEndpoints),
		flagenv.HostPorts("zookeeper-servers", o.zookeeperServers),
		flagenv.Check(o.redisDB >= 0, "redis-db", "at least 0"),
		flagenv.Check(o.redisPoolSize >= 1, "redis-pool-size", "at least 1"),
		flagenv.Check(o.replica != "", "replica", "a name"),
		flagenv.Check(o.defaultStock >= 0, "default-stock", "at least 0"),
		flagenv.Check(o.segments >= 1, "segments", "at least 1"),
		flagenv.Check(o.redisTimeout > 0, "redis-timeout", "positive"),
		flagenv.Check(o.lockWait >= 0, "lock-wait", "at least 0"),
		flagenv.Check(o.requestTimeout > 0, "request-timeout", "positive"),
		flagenv.Check(o.idempotencyTTL > 0, "idempotency-ttl", "positive"),
		flagenv.Check(o.shutdownTimeout >= 0, "shutdown-timeout", "at least 0"),
		flagenv.Check(o.soldOutMarkTTL >= 0, "soldout-mark-ttl", "at least 0"),
		flagenv.LogLevel("log-level", o.logLevel),
	)
}

// checkPprofAddr refuses a --pprof-addr off loopback: the profiler shows
// the process's memory and stacks to whoever reaches it. Empty passes.
func checkPprofAddr(addr string) error {
	if addr == "" {
		return nil
	}
	if err := flagenv.HostPort("pprof-addr", addr); err != nil {
		return err
	}
	host, _, _ := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("--pprof-addr %q: must be a loopback address (127.0.0.1:PORT)", addr)
	}
	return nil
}

// checkDSN refuses a --mysql-dsn the driver cannot read; empty passes.
func checkDSN(dsn string) error {
	if dsn == "" {
		return nil
	}
	if _, err := mysql.ParseDSN(dsn); err != nil {
		return fmt.Errorf("--mysql-dsn: %w (want user:pass@tcp(host:3306)/db)", err)
	}
	return nil
}

func run(args []string) error {
	o, err := parseFlags(args, os.Getenv)
	if err != nil {
		return err
	}
	var level slog.Level
	_ = level.UnmarshalText([]byte(o.logLevel)) // checked with the flags
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("replica", o.replica)
	slog.SetDefault(log)

	addrs, sentinels, cluster := flagenv.List(o.redisAddr), flagenv.List(o.redisSentinel), flagenv.List(o.redisCluster)
	if len(cluster) > 0 {
		addrs = nil
	}
	s, err := shop.New(shop.Config{
		RedisAddrs: addrs, RedisSentinels: sentinels, RedisCluster: cluster, RedisMaster: o.redisMaster, HoldersRedisAddr: o.holdersRedisAddr,
		RedisPassword: o.redisPassword, RedisDB: o.redisDB, RedisTimeout: o.redisTimeout,
		RedisPoolSize: o.redisPoolSize, Replica: o.replica, AdminToken: o.adminToken, DefaultStock: o.defaultStock,
		Segments: o.segments, LockWait: o.lockWait, RequestTimeout: o.requestTimeout, IdempotencyTTL: o.idempotencyTTL,
		Limiter: o.limiter, Limits: frontdoor.Limits{
			PerBuyer: frontdoor.Rate{Events: o.limitBuyer, Per: time.Second, Burst: o.limitBuyerBurst},
			Global:   frontdoor.Rate{Events: o.limitGlobal, Per: time.Second, Burst: o.limitGlobalBurst},
		},
		SoldOutMarkTTL: o.soldOutMarkTTL,
		MySQLDSN:       o.mysqlDSN, OrdersSQLite: o.ordersSQLite, EtcdEndpoints: flagenv.List(o.etcdEndpoints), ZooKeeperServers: flagenv.List(o.zookeeperServers),
		Logger: log,
	})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return errors.Join(err, s.Close())
	}
	if o.pprofAddr != "" {
		stopPprof, err := servePprof(o.pprofAddr)
		if err != nil {
			return errors.Join(err, ln.Close(), s.Close())
		}
		defer stopPprof()
	}
	srv := httpapi.NewHTTPServer(s.Handler(), o.requestTimeout)
	srv.ConnState = s.Metrics.HTTPConns()
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	log.Info("shop listening", "addr", ln.Addr().String(), "redis", addrs, "sentinels", sentinels, "master", o.redisMaster,
		"redlock", len(addrs) >= 3, "mysql", o.mysqlDSN != "", "orders_sqlite", o.ordersSQLite, "etcd", o.etcdEndpoints != "", "zookeeper", o.zookeeperServers != "",
		"admin_token", o.adminToken != "", "default_stock", o.defaultStock, "segments", o.segments)

	select {
	case err := <-serveErr:
		return errors.Join(err, s.Close())
	case <-ctx.Done():
	}
	log.Info("shutting down: draining in-flight requests", "timeout", o.shutdownTimeout)
	s.Drain()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
	defer cancel()
	err = srv.Shutdown(shutdownCtx)
	<-serveErr // http.ErrServerClosed once Shutdown began
	err = errors.Join(err, s.Close())
	log.Info("stopped", "err", err)
	return err
}
