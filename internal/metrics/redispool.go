package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// RedisPools exports how many connections the shop's Redis clients hold,
// summed over clients, as two unlabelled gauges read at each scrape:
// lockstep_redis_pool_conns (every connection: the pools', the pipeline
// pools' and the pub/sub ones) and lockstep_redis_pool_idle_conns (those
// waiting in a pool). A pool opens a connection whenever more commands run
// at once than it has idle, and keeps it (go-redis closes an idle one after
// 30 min), so its size follows the highest concurrency seen so far, up to
// its PoolSize; what is not idle is what runs now, or what was never
// given back. cmd/soak judges the latter.
func (m *Metrics) RedisPools(clients []redis.UniversalClient) {
	sum := func(count func(*redis.PoolStats) uint32) func() float64 {
		return func() float64 {
			n := 0.0
			for _, c := range clients {
				n += float64(count(c.PoolStats()))
			}
			return n
		}
	}
	m.Registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "lockstep_redis_pool_conns", Help: "Connections the shop's Redis clients hold: pooled, pipelining and pub/sub.",
		}, sum(func(s *redis.PoolStats) uint32 {
			n := s.TotalConns + s.PubSubStats.Active
			if s.PipelineStats != nil {
				n += s.PipelineStats.TotalConns
			}
			return n
		})),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "lockstep_redis_pool_idle_conns", Help: "Connections idle in the shop's Redis clients' pools.",
		}, sum(func(s *redis.PoolStats) uint32 {
			n := s.IdleConns
			if s.PipelineStats != nil {
				n += s.PipelineStats.IdleConns
			}
			return n
		})),
	)
}
