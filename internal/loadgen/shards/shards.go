// Package shards is the observer that says what each master of a Redis
// Cluster did during a load phase: the commands it ran, the cores it
// used, and which of the SKU's segments it holds. Its record is
// []report.ShardLoad. It reads the masters through a Reader the workshop
// provides, and imports no store and no Redis client.
package shards

import (
	"context"
	"slices"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/report"
)

// Counters are a master's running totals.
type Counters struct {
	Commands int64
	CPU      float64 // seconds
}

// Reader reads the masters of the cluster the shops run on.
type Reader interface {
	// ShardCounters reads every master's counters, by address; nil, nil
	// when the shops do not run on a cluster.
	ShardCounters(ctx context.Context) (map[string]Counters, error)
	// SegmentMasters says which of sku's segments on stage (segments: the
	// run's count, 0 for the shop's default) each master holds; nil on
	// the stages that do not split the stock.
	SegmentMasters(ctx context.Context, stage, sku string, segments int) map[string][]int
}

// Sampler reads every master's counters at the start of a load phase and
// again when asked; nil when the shops do not run on a cluster.
type Sampler struct {
	reader   Reader
	start    time.Time
	before   map[string]Counters
	segments map[string][]int // master → the SKU's segments on it
}

// Start starts sampling; a nil reader, or one off a cluster, gives a nil
// Sampler.
func Start(ctx context.Context, reader Reader, stage, sku string, segments int) *Sampler {
	if reader == nil {
		return nil
	}
	before, err := reader.ShardCounters(ctx)
	if before == nil && err == nil {
		return nil
	}
	// A failed read leaves the run without shard figures.
	return &Sampler{reader: reader, start: time.Now(), before: before, segments: reader.SegmentMasters(ctx, stage, sku, segments)}
}

// Stop returns each master's load since start, busiest first.
func (s *Sampler) Stop(ctx context.Context) []report.ShardLoad { return s.SoFar(ctx) }

// SoFar returns each master's load since start, busiest first; nil when
// the masters cannot be read.
func (s *Sampler) SoFar(ctx context.Context) []report.ShardLoad {
	if s == nil || s.before == nil {
		return nil
	}
	wall := time.Since(s.start).Seconds()
	after, err := s.reader.ShardCounters(ctx)
	if err != nil || wall <= 0 {
		return nil
	}
	var out []report.ShardLoad
	for addr, a := range after {
		b, ok := s.before[addr]
		if !ok {
			continue // a master promoted during the run
		}
		out = append(out, report.ShardLoad{Addr: addr, Commands: a.Commands - b.Commands, Cores: (a.CPU - b.CPU) / wall, Segments: s.segments[addr]})
	}
	slices.SortFunc(out, func(x, y report.ShardLoad) int { return int(y.Commands - x.Commands) })
	return out
}
