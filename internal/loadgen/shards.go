package loadgen

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/redis/go-redis/v9"
)

// shardSampler reads every master's counters at the start of a load phase
// and again at its end; nil when the shops do not run on a cluster.
type shardSampler struct {
	rdb      *redis.ClusterClient
	start    time.Time
	before   map[string]shardCounters
	segments map[string][]int // master → the SKU's segments on it
}

type shardCounters struct {
	commands int64
	cpu      float64 // seconds
}

// startShardSampler starts sampling; n is the SKU's segment count on the
// stages that split the stock, 0 on the others.
func startShardSampler(ctx context.Context, rdb redis.UniversalClient, stage, sku string, n int) *shardSampler {
	cluster, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return nil
	}
	s := &shardSampler{rdb: cluster, start: time.Now(), segments: map[string][]int{}}
	s.before, _ = s.read(ctx) // a failed read leaves the run without shard figures
	for i := range n {
		if master, err := cluster.MasterForKey(ctx, segmentKey(stage, sku, i, n, "stock")); err == nil {
			addr := master.Options().Addr
			s.segments[addr] = append(s.segments[addr], i)
		}
	}
	return s
}

// stop returns each master's load since start, busiest first.
func (s *shardSampler) stop(ctx context.Context) []report.ShardLoad { return s.soFar(ctx) }

// soFar returns each master's load since start, busiest first; nil when
// the masters cannot be read.
func (s *shardSampler) soFar(ctx context.Context) []report.ShardLoad {
	if s == nil || s.before == nil {
		return nil
	}
	wall := time.Since(s.start).Seconds()
	after, err := s.read(ctx)
	if err != nil || wall <= 0 {
		return nil
	}
	var out []report.ShardLoad
	for addr, a := range after {
		b, ok := s.before[addr]
		if !ok {
			continue // a master promoted during the run
		}
		out = append(out, report.ShardLoad{Addr: addr, Commands: a.commands - b.commands, Cores: (a.cpu - b.cpu) / wall, Segments: s.segments[addr]})
	}
	slices.SortFunc(out, func(x, y report.ShardLoad) int { return int(y.Commands - x.Commands) })
	return out
}

func (s *shardSampler) read(ctx context.Context) (map[string]shardCounters, error) {
	var mu sync.Mutex
	out := map[string]shardCounters{}
	err := s.rdb.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		info, err := node.InfoMap(ctx, "stats", "cpu").Result()
		if err != nil {
			return err
		}
		commands, err := strconv.ParseInt(info["Stats"]["total_commands_processed"], 10, 64)
		if err != nil {
			return fmt.Errorf("total_commands_processed: %w", err)
		}
		sys, err1 := strconv.ParseFloat(info["CPU"]["used_cpu_sys"], 64)
		user, err2 := strconv.ParseFloat(info["CPU"]["used_cpu_user"], 64)
		if err1 != nil || err2 != nil {
			return fmt.Errorf("used_cpu: %v %v", err1, err2)
		}
		mu.Lock()
		out[node.Options().Addr] = shardCounters{commands: commands, cpu: sys + user}
		mu.Unlock()
		return nil
	})
	return out, err
}
