package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// sample is one look at every shop and at Redis.
type sample struct {
	At    float64      `json:"t_s"` // seconds since the load started
	Shops []shopSample `json:"shops"`
	Redis redisSample  `json:"redis"`
}

// shopSample is a shop's process and Go runtime figures from its /metrics.
type shopSample struct {
	Name       string  `json:"name"`
	RSS        float64 `json:"rss_bytes"`
	HeapInuse  float64 `json:"heap_inuse_bytes"`
	HeapGoal   float64 `json:"heap_goal_bytes"` // go_memstats_next_gc_bytes: twice the live heap after the last GC
	Goroutines float64 `json:"goroutines"`
	// PoolConns are the connections the shop's Redis clients hold, PoolIdle
	// those of them idle in a pool (see metrics.RedisPools).
	PoolConns float64 `json:"redis_pool_conns"`
	PoolIdle  float64 `json:"redis_pool_idle_conns"`
	// HTTPConns are the connections its HTTP server holds open, each
	// served by a goroutine (see metrics.HTTPConns).
	HTTPConns float64 `json:"http_open_conns"`
	Error     string  `json:"error,omitempty"`
}

// redisSample counts the segmented stage's keys and Redis's own figures.
type redisSample struct {
	Keys            int64  `json:"keys"`
	LockKeys        int64  `json:"lock_keys"`
	IdempotencyKeys int64  `json:"idempotency_keys"`
	Channels        int64  `json:"lock_channels"` // pub/sub channels of the stage's locks with a subscriber
	Clients         int64  `json:"clients"`
	UsedMemory      int64  `json:"used_memory_bytes"`
	Error           string `json:"error,omitempty"`
}

// The soak's stage and its key patterns (inventory's and lock's key names:
// lockstep:segmented:{sku:3}:lock, its unlock channel ...:lock:channel, and
// the idempotency keys lockstep:segmented:idempotency:{hash}).
const (
	stage              = "segmented"
	stagePattern       = "lockstep:" + stage + ":*"
	idempotencyPrefix  = "lockstep:" + stage + ":idempotency:"
	lockSuffix         = ":lock"
	lockChannelPattern = "lockstep:" + stage + ":*:lock:channel"
)

// shopMetrics are the unlabelled series read from each shop's /metrics.
var shopMetrics = map[string]func(*shopSample) *float64{
	"process_resident_memory_bytes":  func(s *shopSample) *float64 { return &s.RSS },
	"go_memstats_heap_inuse_bytes":   func(s *shopSample) *float64 { return &s.HeapInuse },
	"go_memstats_next_gc_bytes":      func(s *shopSample) *float64 { return &s.HeapGoal },
	"go_goroutines":                  func(s *shopSample) *float64 { return &s.Goroutines },
	"lockstep_redis_pool_conns":      func(s *shopSample) *float64 { return &s.PoolConns },
	"lockstep_redis_pool_idle_conns": func(s *shopSample) *float64 { return &s.PoolIdle },
	"lockstep_http_open_conns":       func(s *shopSample) *float64 { return &s.HTTPConns },
}

type sampler struct {
	http     *http.Client
	rdb      *redis.Client
	replicas []replicaRef
}

type replicaRef struct{ name, url string }

func (s *sampler) take(ctx context.Context, at float64) sample {
	out := sample{At: at}
	for _, r := range s.replicas {
		out.Shops = append(out.Shops, s.shop(ctx, r))
	}
	out.Redis = s.redis(ctx)
	return out
}

func (s *sampler) shop(ctx context.Context, r replicaRef) shopSample {
	out := shopSample{Name: r.name}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.url+"/metrics", nil)
	if err != nil {
		out.Error = err.Error()
		return out
	}
	res, err := s.http.Do(req)
	if err != nil {
		out.Error = err.Error()
		return out
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		out.Error = res.Status
		return out
	}
	found, err := readGauges(res.Body, &out)
	if err == nil && found < len(shopMetrics) {
		err = fmt.Errorf("%d of the %d series in /metrics", found, len(shopMetrics))
	}
	if err != nil {
		out.Error = err.Error()
	}
	return out
}

// readGauges fills out from the exposition's unlabelled samples, e.g.
// "go_goroutines 42", and says how many of shopMetrics it found.
func readGauges(r io.Reader, out *shopSample) (int, error) {
	found := 0
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		field, wanted := shopMetrics[name]
		if !ok || !wanted {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return found, fmt.Errorf("%s: %w", name, err)
		}
		*field(out) = v
		found++
	}
	return found, sc.Err()
}

func (s *sampler) redis(ctx context.Context) redisSample {
	var out redisSample
	err := func() error {
		var err error
		if out.Keys, err = s.rdb.DBSize(ctx).Result(); err != nil {
			return err
		}
		iter := s.rdb.Scan(ctx, 0, stagePattern, 1000).Iterator()
		for iter.Next(ctx) {
			switch k := iter.Val(); {
			case strings.HasPrefix(k, idempotencyPrefix):
				out.IdempotencyKeys++
			case strings.HasSuffix(k, lockSuffix):
				out.LockKeys++
			}
		}
		if err := iter.Err(); err != nil {
			return err
		}
		channels, err := s.rdb.PubSubChannels(ctx, lockChannelPattern).Result()
		if err != nil {
			return err
		}
		out.Channels = int64(len(channels))
		info, err := s.rdb.InfoMap(ctx, "clients", "memory").Result()
		if err != nil {
			return err
		}
		out.Clients, _ = strconv.ParseInt(info["Clients"]["connected_clients"], 10, 64)
		out.UsedMemory, _ = strconv.ParseInt(info["Memory"]["used_memory"], 10, 64)
		return nil
	}()
	if err != nil {
		out.Error = err.Error()
	}
	return out
}

// clientsInUse is Redis's clients less the connections idle in the shops'
// pools: the connections running a command now (the shops', the soak's
// own), the shops' pub/sub ones, and any that nothing will close.
func (s sample) clientsInUse() float64 {
	n := float64(s.Redis.Clients)
	for _, sh := range s.Shops {
		n -= sh.PoolIdle
	}
	return n
}

// idempotencyAudit is a look at every idempotency key of the stage.
type idempotencyAudit struct {
	Keys    int `json:"keys"`
	NoTTL   int `json:"without_ttl"`
	Pending int `json:"pending"` // markers of a request still running, or whose outcome is unknown
	// MaxTTL is the longest TTL of an answer, MaxPendingTTL of a marker
	// (the shop's request timeout + 5 s, twice that past the stock write).
	MaxTTL        int64 `json:"max_ttl_ms"`
	MaxPendingTTL int64 `json:"max_pending_ttl_ms"`
}

func auditIdempotencyKeys(ctx context.Context, rdb *redis.Client) (idempotencyAudit, error) {
	var a idempotencyAudit
	var keys []string
	iter := rdb.Scan(ctx, 0, idempotencyPrefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return a, err
	}
	for start := 0; start < len(keys); start += 500 {
		batch := keys[start:min(start+500, len(keys))]
		ttls := make([]*redis.DurationCmd, len(batch))
		heads := make([]*redis.StringCmd, len(batch))
		if _, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, k := range batch {
				ttls[i] = p.PTTL(ctx, k)
				heads[i] = p.GetRange(ctx, k, 0, 7)
			}
			return nil
		}); err != nil {
			return a, err
		}
		for i := range batch {
			ttl := ttls[i].Val()
			if ttl == -2*time.Nanosecond { // expired since the scan (go-redis keeps -2 as is)
				continue
			}
			a.Keys++
			if ttl < 0 {
				a.NoTTL++
			}
			if heads[i].Val() == "pending:" {
				a.Pending++
				a.MaxPendingTTL = max(a.MaxPendingTTL, ttl.Milliseconds())
			} else {
				a.MaxTTL = max(a.MaxTTL, ttl.Milliseconds())
			}
		}
	}
	return a, nil
}
