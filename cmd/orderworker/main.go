// Command orderworker is an order worker of the async stages: it reads the
// stages' order streams in one consumer group and writes the orders into
// the order table (package asyncorders). The workshop runs two; run more
// under other -consumer names.
//
// Fault hook: a worker started with -crash-at after-read (after-insert,
// after-claim, after-void), or sent SIGUSR1 (after-read) or SIGUSR2
// (after-insert) while it runs, kills itself with SIGKILL the next time a
// batch reaches that point (package internal/crashhook): the workshop's
// worker-kill and duplicate-delivery steps.
//
// Every flag has an environment fallback, LOCKSTEP_<FLAG> with dashes as
// underscores (LOCKSTEP_REDIS_ADDR, LOCKSTEP_CONSUMER, ...); a flag given
// on the command line wins.
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/lockstep/lockstep/asyncorders"
	"github.com/lockstep/lockstep/internal/crashhook"
	"github.com/lockstep/lockstep/internal/flagenv"
	"github.com/lockstep/lockstep/orders"
)

// main exits 0 after -h, 2 on a usage error (flagenv.ExitStatus), 1 when
// the worker failed.
func main() {
	err := run(os.Args[1:])
	if status := flagenv.ExitStatus(err); status != 0 {
		fmt.Fprintln(os.Stderr, "orderworker:", err)
		os.Exit(status)
	}
}

type options struct {
	redisAddr, redisPassword, mysqlDSN, ordersSQLite string
	consumer, stages, skus, logLevel, crashAt        string
	redisDB                                          int
	batch, maxDeliveries                             int64
	block, claimIdle, claimEvery, shutdownTimeout    time.Duration
	payWithin, sweepEvery                            time.Duration
}

func parseFlags(args []string, getenv func(string) string) (options, error) {
	var o options
	hostname, _ := os.Hostname()
	d := asyncorders.DefaultConfig("", nil)
	fs := flag.NewFlagSet("orderworker", flag.ContinueOnError)
	fs.StringVar(&o.redisAddr, "redis-addr", "127.0.0.1:6379", "Redis address of the stock and the order streams")
	fs.StringVar(&o.redisPassword, "redis-password", "", "Redis password")
	fs.IntVar(&o.redisDB, "redis-db", 0, "Redis database number")
	fs.StringVar(&o.mysqlDSN, "mysql-dsn", "", "MySQL/MariaDB data source name of the order table (user:pass@tcp(host:3306)/db)")
	fs.StringVar(&o.ordersSQLite, "orders-sqlite", "", "path of the embedded SQLite order table, when no -mysql-dsn")
	fs.StringVar(&o.consumer, "consumer", hostname+"-"+fmt.Sprint(os.Getpid()), "consumer name in the group; a worker restarted under its name finishes its own pending entries first")
	fs.StringVar(&o.stages, "stages", "async-stream,async-two-steps,async-no-claim,async-wrong-ack", "async stages to serve, comma-separated")
	fs.StringVar(&o.skus, "skus", "sku-1", "SKUs to serve, comma-separated")
	fs.Int64Var(&o.batch, "batch", d.Batch, "most entries per read or claim")
	fs.DurationVar(&o.block, "block", d.Block, "how long one read waits for an entry")
	fs.DurationVar(&o.claimIdle, "claim-idle", d.ClaimIdle, "an entry pending this long is claimed from its consumer (XAUTOCLAIM)")
	fs.DurationVar(&o.claimEvery, "claim-every", d.ClaimEvery, "how often to look for idle entries")
	fs.Int64Var(&o.maxDeliveries, "max-deliveries", d.MaxDeliveries, "an entry whose order the order database refused this many times (an error about the row, never an outage or a redelivery) goes to the dead letters, its units back on sale")
	fs.StringVar(&o.crashAt, "crash-at", "", "fault: kill this worker with SIGKILL the first time a batch reaches after-read (entries read, none handled), after-insert (a batch's orders inserted, its entries not acknowledged), after-claim (idle entries claimed, none handled) or after-void (a give-up's order id voided, its units not yet returned); SIGUSR1 and SIGUSR2 arm after-read and after-insert at run time")
	fs.DurationVar(&o.payWithin, "pay-within", 0, "each order is unpaid until paid (POST /api/orders/{id}/pay) or this long after its sale; 0: orders need no payment")
	fs.DurationVar(&o.sweepEvery, "sweep-every", 0, "run the payment sweeper this often, cancelling expired unpaid orders and returning their units (0: no sweeper here)")
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long a stop waits for the entries in hand")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	if err := flagenv.Parse(fs, args, getenv); err != nil {
		return o, err
	}
	if err := o.check(); err != nil {
		return o, flagenv.Usage(err)
	}
	return o, nil
}

// check refuses every value before the worker dials Redis or opens the
// order table. Durations go to Redis in whole milliseconds: a block under
// 1 ms is XREADGROUP BLOCK 0, which never returns (the worker would ignore
// its stop and never claim), and a claim bound of 0 takes the entries live
// workers are handling.
func (o options) check() error {
	var errs []error
	for _, s := range flagenv.List(o.stages) {
		if _, ok := asyncorders.ModeOf(s); !ok {
			errs = append(errs, fmt.Errorf("--stages: %q is not an async stage (%v)", s, asyncorders.Stages()))
		}
	}
	if o.crashAt != "" {
		if _, err := asyncorders.ParseFaultPoint(o.crashAt); err != nil {
			errs = append(errs, fmt.Errorf("--crash-at: %w", err))
		}
	}
	return errors.Join(append(errs,
		flagenv.Check(len(flagenv.List(o.stages)) > 0, "stages", "at least one async stage"),
		flagenv.Check(len(flagenv.List(o.skus)) > 0, "skus", "at least one SKU"),
		flagenv.Check((o.mysqlDSN == "") != (o.ordersSQLite == ""), "orders-sqlite", "the order table: exactly one of --mysql-dsn and --orders-sqlite"),
		flagenv.HostPort("redis-addr", o.redisAddr),
		flagenv.Check(o.redisDB >= 0, "redis-db", "at least 0"),
		flagenv.Check(o.consumer != "", "consumer", "a name"),
		flagenv.Check(o.batch >= 1, "batch", "at least 1"),
		flagenv.Check(o.maxDeliveries >= 1, "max-deliveries", "at least 1"),
		flagenv.Check(o.block >= time.Millisecond, "block", "at least 1ms"),
		flagenv.Check(o.claimIdle >= time.Millisecond, "claim-idle", "at least 1ms"),
		flagenv.Check(o.claimEvery >= time.Millisecond, "claim-every", "at least 1ms"),
		flagenv.Check(o.payWithin == 0 || o.payWithin >= time.Millisecond, "pay-within", "0 (none) or at least 1ms"),
		flagenv.Check(o.sweepEvery == 0 || o.sweepEvery >= time.Millisecond, "sweep-every", "0 (none) or at least 1ms"),
		flagenv.Check(o.shutdownTimeout >= time.Millisecond, "shutdown-timeout", "at least 1ms"),
		flagenv.LogLevel("log-level", o.logLevel),
	)...)
}

func run(args []string) error {
	o, err := parseFlags(args, os.Getenv)
	if err != nil {
		return err
	}
	var level slog.Level
	_ = level.UnmarshalText([]byte(o.logLevel)) // checked with the flags
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("consumer", o.consumer)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	crash, err := crashhook.New(log, asyncorders.FaultPoint(o.crashAt))
	if err != nil {
		return err
	}
	defer crash.Listen(ctx)() // first: an arming signal before it would be lost
	store, closeStore, err := openStore(ctx, o)
	if err != nil {
		return err
	}
	defer closeStore()
	rdb := redis.NewClient(&redis.Options{Addr: o.redisAddr, Password: o.redisPassword, DB: o.redisDB})
	defer rdb.Close()

	payments, err := store.Payments(ctx)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	for _, stage := range flagenv.List(o.stages) {
		mode, _ := asyncorders.ModeOf(stage)
		cfg := asyncorders.Config{Consumer: o.consumer, SKUs: flagenv.List(o.skus), Mode: mode, Batch: o.batch, Block: o.block,
			ClaimIdle: o.claimIdle, ClaimEvery: o.claimEvery, MaxDeliveries: o.maxDeliveries, Payments: payments, PayWithin: o.payWithin,
			FaultHook: crash.At}
		q := asyncorders.NewQueue(rdb, stage)
		w := asyncorders.NewWorker(q, store, cfg, log)
		wg.Go(func() { _ = w.Run(ctx) })
		if o.sweepEvery > 0 {
			sw := asyncorders.NewSweeper(q, payments, o.sweepEvery, log)
			wg.Go(func() { _ = sw.Run(ctx) })
		}
	}
	log.Info("order worker started", "redis", o.redisAddr, "stages", o.stages, "skus", o.skus, "mysql", o.mysqlDSN != "",
		"claim_idle", o.claimIdle, "max_deliveries", o.maxDeliveries, "pay_within", o.payWithin, "sweep_every", o.sweepEvery)
	<-ctx.Done()
	log.Info("stopping: finishing the entries in hand", "timeout", o.shutdownTimeout)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		log.Info("stopped")
		return nil
	case <-time.After(o.shutdownTimeout):
		return errors.New("stop: entries still in hand after the shutdown timeout; they stay pending for another worker")
	}
}

func openStore(ctx context.Context, o options) (*orders.SQLStore, func(), error) {
	if o.ordersSQLite != "" {
		s, err := orders.OpenSQLite(ctx, o.ordersSQLite)
		if err != nil {
			return nil, nil, err
		}
		return s, func() { _ = s.Close() }, nil
	}
	db, err := sql.Open("mysql", o.mysqlDSN)
	if err != nil {
		return nil, nil, fmt.Errorf("mysql: %w", err)
	}
	s, err := orders.OpenMySQL(ctx, db)
	if err != nil {
		_ = db.Close()
		return nil, nil, err
	}
	return s, func() { _ = db.Close() }, nil
}
