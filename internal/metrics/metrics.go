// Package metrics is the Prometheus instrumentation of the shop: request
// outcomes and durations, lock waits and acquisitions, watchdog renewals,
// foreign unlocks, and the audit of every stage as gauges read from Redis at
// scrape time (with the empty segments of segmented stages), and the
// shop-wide gauges of its Redis connections and HTTP connections. Every
// metric has the prefix lockstep_, and all but the shop-wide ones the
// label stage.
package metrics

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/lockstep/lockstep/inventory"
	"github.com/lockstep/lockstep/lock"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Result is the outcome of one deduct request.
type Result uint8

const (
	ResultSold Result = iota
	ResultSoldOut
	ResultBusy
	ResultError
	resultCount
)

// String is the value of the result label of lockstep_requests_total.
func (r Result) String() string {
	switch r {
	case ResultSold:
		return "sold"
	case ResultSoldOut:
		return "sold_out"
	case ResultBusy:
		return "lock_busy"
	default:
		return "error"
	}
}

// auditTimeout bounds the Redis reads of one scrape.
const auditTimeout = 2 * time.Second

// Auditor is what the stock gauges are read from.
type Auditor interface {
	Stages() []inventory.Info
	SKUs(ctx context.Context, stage string) ([]string, error)
	Audit(ctx context.Context, stage, sku string) (inventory.Audit, error)
}

// Metrics is one shop's registry and instruments. It implements
// inventory.Observer.
type Metrics struct {
	Registry *prometheus.Registry

	requests     *prometheus.CounterVec
	replays      *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	lockWait     *prometheus.HistogramVec
	acquisitions *prometheus.CounterVec
	renewals     *prometheus.CounterVec
	foreign      *prometheus.CounterVec

	// The lock series of every acquisition (a lock stage's sale), looked up
	// in the vectors once (their label hashing and lock cost more than a
	// map read).
	lockWaits seriesCache[string, prometheus.Observer]
	acquired  seriesCache[lockSeries, prometheus.Counter]
}

// lockSeries names one series of lockstep_lock_acquisitions_total.
type lockSeries struct {
	stage  string
	result inventory.LockResult
}

// seriesCache holds the children of a vector by key, each made (with
// WithLabelValues, which returns the same child to racing callers) on first
// use. Typed keys, not a sync.Map's any: boxing the key allocated on every
// sale.
type seriesCache[K comparable, V any] struct {
	mu       sync.RWMutex
	children map[K]V
}

func (c *seriesCache[K, V]) get(key K, child func(K) V) V {
	c.mu.RLock()
	v, ok := c.children[key]
	c.mu.RUnlock()
	if ok {
		return v
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.children[key]; ok {
		return v
	}
	if c.children == nil {
		c.children = make(map[K]V)
	}
	v = child(key)
	c.children[key] = v
	return v
}

// New registers the instruments on a fresh registry (one per shop, so
// several shops can live in one test process), with the stock gauges read
// from auditor at each scrape.
func New(auditor Auditor, log *slog.Logger) *Metrics {
	buckets := prometheus.ExponentialBuckets(0.0001, 2, 17) // 100µs .. 6.5s
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockstep_requests_total", Help: "Deduct requests by outcome (sold, sold_out, lock_busy, error); idempotent replays are not counted here.",
		}, []string{"stage", "result"}),
		replays: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockstep_idempotent_replays_total", Help: "Deduct requests answered with the stored answer of an earlier request with the same Idempotency-Key.",
		}, []string{"stage"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "lockstep_request_duration_seconds", Help: "Deduct request duration.", Buckets: buckets,
		}, []string{"stage"}),
		lockWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "lockstep_lock_wait_seconds", Help: "Time spent acquiring the stage's lock, whatever the outcome.", Buckets: buckets,
		}, []string{"stage"}),
		acquisitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockstep_lock_acquisitions_total", Help: "Lock acquisitions by result (acquired, busy, error).",
		}, []string{"stage", "result"}),
		renewals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockstep_watchdog_renewals_total", Help: "Watchdog renewals by result (renewed, lost, error).",
		}, []string{"stage", "result"}),
		foreign: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockstep_foreign_unlocks_total", Help: "Unlocks that deleted a lock another owner held (seen with GETDEL).",
		}, []string{"stage"}),
	}
	m.Registry.MustRegister(
		m.requests, m.replays, m.duration, m.lockWait, m.acquisitions, m.renewals, m.foreign,
		&stockCollector{auditor: auditor, log: log},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// Deducts records the deduct requests of one stage. Each of its series is
// looked up once, on first use (so a stage or result never seen still has
// no series, as with WithLabelValues), and not again on every request.
type Deducts struct {
	results  [resultCount]func() prometheus.Counter
	duration func() prometheus.Observer
	replays  func() prometheus.Counter
}

// Deducts returns the deduct instruments of stage.
func (m *Metrics) Deducts(stage string) *Deducts {
	d := &Deducts{
		duration: sync.OnceValue(func() prometheus.Observer { return m.duration.WithLabelValues(stage) }),
		replays:  sync.OnceValue(func() prometheus.Counter { return m.replays.WithLabelValues(stage) }),
	}
	for r := range resultCount {
		d.results[r] = sync.OnceValue(func() prometheus.Counter { return m.requests.WithLabelValues(stage, r.String()) })
	}
	return d
}

// Request records one executed deduct request.
func (d *Deducts) Request(result Result, took time.Duration) {
	d.results[result]().Inc()
	d.duration().Observe(took.Seconds())
}

// Replay records a deduct answered from the idempotency store.
func (d *Deducts) Replay() { d.replays().Inc() }

// LockAcquire implements inventory.Observer.
func (m *Metrics) LockAcquire(stage string, wait time.Duration, result inventory.LockResult) {
	m.lockWaits.get(stage, func(stage string) prometheus.Observer { return m.lockWait.WithLabelValues(stage) }).Observe(wait.Seconds())
	m.acquired.get(lockSeries{stage, result}, func(k lockSeries) prometheus.Counter {
		return m.acquisitions.WithLabelValues(k.stage, string(k.result))
	}).Inc()
}

// WatchdogRenewal implements inventory.Observer.
func (m *Metrics) WatchdogRenewal(stage string, err error) {
	result := "renewed"
	switch {
	case errors.Is(err, lock.ErrLockLost):
		result = "lost"
	case err != nil:
		result = "error"
	}
	m.renewals.WithLabelValues(stage, result).Inc()
}

// ForeignUnlock implements inventory.Observer.
func (m *Metrics) ForeignUnlock(stage string) { m.foreign.WithLabelValues(stage).Inc() }

var (
	stockDesc    = prometheus.NewDesc("lockstep_stock", "Units left, from the audit in Redis.", []string{"stage", "sku"}, nil)
	soldDesc     = prometheus.NewDesc("lockstep_sold", "Units sold, from the audit in Redis.", []string{"stage", "sku"}, nil)
	oversoldDesc = prometheus.NewDesc("lockstep_oversold", "Units sold beyond the initial stock: max(0, sold - initial).", []string{"stage", "sku"}, nil)
	consistDesc  = prometheus.NewDesc("lockstep_consistent", "1 when stock + sold == initial, else 0 (lost updates).", []string{"stage", "sku"}, nil)
	emptyDesc    = prometheus.NewDesc("lockstep_segments_empty", "Segments whose stock is 0, for stages that split the stock into segments (segmented).", []string{"stage", "sku"}, nil)
	// The order stages' figures, from their order table.
	ordersDesc     = prometheus.NewDesc("lockstep_orders", "Live orders of an order stage, from its order table.", []string{"stage", "sku"}, nil)
	duplicatesDesc = prometheus.NewDesc("lockstep_duplicate_orders", "Orders beyond each buyer's first, on an order stage.", []string{"stage", "sku"}, nil)
	undersoldDesc  = prometheus.NewDesc("lockstep_undersold", "Units gone from an order stage's stock that no order holds: initial - remaining - units ordered.", []string{"stage", "sku"}, nil)
	// The async stages' order stream, from Redis.
	pendingDesc     = prometheus.NewDesc("lockstep_stream_pending", "Entries of an async stage's order stream read by a worker and not acknowledged.", []string{"stage", "sku"}, nil)
	undeliveredDesc = prometheus.NewDesc("lockstep_stream_undelivered", "Entries of an async stage's order stream no worker has read yet.", []string{"stage", "sku"}, nil)
	oldestDesc      = prometheus.NewDesc("lockstep_stream_oldest_pending_seconds", "Age of the oldest pending entry of an async stage's order stream (0: none).", []string{"stage", "sku"}, nil)
	deadDesc        = prometheus.NewDesc("lockstep_dead_letters", "Entries of an async stage moved to its dead-letter stream.", []string{"stage", "sku"}, nil)
	lagDesc         = prometheus.NewDesc("lockstep_order_lag_seconds", "Time from an async sale to its order row, over the last orders the workers wrote.", []string{"stage", "sku", "quantile"}, nil)
)

// stockCollector reads the audit of every available stage's tracked SKUs
// at scrape time, so every replica reports the same global figures.
type stockCollector struct {
	auditor Auditor
	log     *slog.Logger
}

func (c *stockCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{stockDesc, soldDesc, oversoldDesc, consistDesc, emptyDesc, ordersDesc, duplicatesDesc, undersoldDesc,
		pendingDesc, undeliveredDesc, oldestDesc, deadDesc, lagDesc} {
		ch <- d
	}
}

func (c *stockCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), auditTimeout)
	defer cancel()
	for _, info := range c.auditor.Stages() {
		if !info.Available {
			continue
		}
		skus, err := c.auditor.SKUs(ctx, info.ID)
		if err != nil {
			c.log.Warn("metrics: list skus", "stage", info.ID, "err", err)
			return
		}
		for _, sku := range skus {
			a, err := c.auditor.Audit(ctx, info.ID, sku)
			if err != nil {
				c.log.Warn("metrics: audit", "stage", info.ID, "sku", sku, "err", err)
				return
			}
			consistent := 0.0
			if a.Consistent {
				consistent = 1
			}
			ch <- prometheus.MustNewConstMetric(stockDesc, prometheus.GaugeValue, float64(a.Stock), info.ID, sku)
			ch <- prometheus.MustNewConstMetric(soldDesc, prometheus.GaugeValue, float64(a.Sold), info.ID, sku)
			ch <- prometheus.MustNewConstMetric(oversoldDesc, prometheus.GaugeValue, float64(a.Oversold), info.ID, sku)
			ch <- prometheus.MustNewConstMetric(consistDesc, prometheus.GaugeValue, consistent, info.ID, sku)
			if len(a.Segments) > 0 {
				ch <- prometheus.MustNewConstMetric(emptyDesc, prometheus.GaugeValue, float64(emptySegments(a.Segments)), info.ID, sku)
			}
			if o := a.Orders; o != nil {
				ch <- prometheus.MustNewConstMetric(ordersDesc, prometheus.GaugeValue, float64(o.Orders), info.ID, sku)
				ch <- prometheus.MustNewConstMetric(duplicatesDesc, prometheus.GaugeValue, float64(o.DuplicateOrders), info.ID, sku)
				ch <- prometheus.MustNewConstMetric(undersoldDesc, prometheus.GaugeValue, float64(o.Undersold), info.ID, sku)
			}
			if st := a.Stream; st != nil {
				ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, float64(st.Pending), info.ID, sku)
				ch <- prometheus.MustNewConstMetric(undeliveredDesc, prometheus.GaugeValue, float64(st.Undelivered), info.ID, sku)
				ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, st.OldestPending.Seconds(), info.ID, sku)
				ch <- prometheus.MustNewConstMetric(deadDesc, prometheus.GaugeValue, float64(st.DeadLetters), info.ID, sku)
				ch <- prometheus.MustNewConstMetric(lagDesc, prometheus.GaugeValue, st.LagP50.Seconds(), info.ID, sku, "0.5")
				ch <- prometheus.MustNewConstMetric(lagDesc, prometheus.GaugeValue, st.LagP99.Seconds(), info.ID, sku, "0.99")
			}
		}
	}
}

// emptySegments counts the segments a sale can no longer take from.
func emptySegments(segments []inventory.Counts) int {
	n := 0
	for _, s := range segments {
		if s.Stock <= 0 {
			n++
		}
	}
	return n
}
