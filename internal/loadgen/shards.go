package loadgen

import (
	"context"
	"fmt"
	"html/template"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// ShardLoad is what one master of a Redis Cluster did during a stage run's
// load phase: the commands it processed (INFO's total_commands_processed,
// which counts the commands scripts run too) and the cores it used (its
// own used_cpu_sys + used_cpu_user per wall second).
type ShardLoad struct {
	Addr     string  `json:"addr"`
	Commands int64   `json:"commands"`
	Cores    float64 `json:"cores"`
	// Segments are the SKU's segments whose keys this master holds (the
	// stages that split the stock).
	Segments []int `json:"segments,omitempty"`
}

// BusiestShare is the busiest master's part of the commands a stage run's
// load phase sent to the masters, and how many masters there were: near 1
// when the stage's keys share one slot, near 1/masters when they spread.
func (r *StageRun) BusiestShare() (share float64, masters int) {
	var total int64
	for _, s := range r.Shards {
		total += s.Commands
	}
	if total == 0 {
		return 0, len(r.Shards)
	}
	return float64(r.Shards[0].Commands) / float64(total), len(r.Shards)
}

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
func (s *shardSampler) stop(ctx context.Context) []ShardLoad { return s.soFar(ctx) }

// soFar returns each master's load since start, busiest first; nil when
// the masters cannot be read.
func (s *shardSampler) soFar(ctx context.Context) []ShardLoad {
	if s == nil || s.before == nil {
		return nil
	}
	wall := time.Since(s.start).Seconds()
	after, err := s.read(ctx)
	if err != nil || wall <= 0 {
		return nil
	}
	var out []ShardLoad
	for addr, a := range after {
		b, ok := s.before[addr]
		if !ok {
			continue // a master promoted during the run
		}
		out = append(out, ShardLoad{Addr: addr, Commands: a.commands - b.commands, Cores: (a.cpu - b.cpu) / wall, Segments: s.segments[addr]})
	}
	slices.SortFunc(out, func(x, y ShardLoad) int { return int(y.Commands - x.Commands) })
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

// writeShardTable prints, when the stages ran on a cluster, how each
// stage's load phase spread over the masters.
func (rep *Report) writeShardTable(w io.Writer) error {
	var rows []*StageRun
	for i := range rep.Stages {
		if len(rep.Stages[i].Shards) > 0 {
			rows = append(rows, &rep.Stages[i])
		}
	}
	if len(rows) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nper shard (the cluster's masters in the load phase, busiest first):")
	table := textTable{cols: []column{{"stage", name}, {"master", name}, {"commands", figure}, {"cores", figure},
		{"segments", figure}, {"cmds/sale", figure}, {"busiest", figure}}}
	for _, r := range rows {
		var total int64
		for _, s := range r.Shards {
			total += s.Commands
		}
		perSale := "-"
		if r.Sales > 0 {
			perSale = fmt.Sprintf("%.1f", float64(total)/float64(r.Sales))
		}
		share, _ := r.BusiestShare()
		for i, s := range r.Shards {
			row := []string{"", s.Addr, fmt.Sprint(s.Commands), fmt.Sprintf("%.2f", s.Cores), fmt.Sprint(len(s.Segments)), "", ""}
			if i == 0 { // the stage's own figures, once
				row[0], row[5], row[6] = r.label(), perSale, fmt.Sprintf("%.0f%%", 100*share)
			}
			table.rows = append(table.rows, row)
		}
	}
	var notes tableNotes // every cell is a figure or a name: nothing is cut
	if err := table.write(w, &notes); err != nil {
		return fmt.Errorf("write shard table: %w", err)
	}
	return nil
}

// shardsTemplate draws each master's part of a stage's commands as a bar.
var shardsTemplate = template.Must(template.New("shards").Parse(`<table class="shards" data-shards>
<thead><tr><th>master</th><th>commands</th><th class="left">share</th><th>cores</th><th>segments</th></tr></thead>
<tbody>{{range .}}<tr data-shard="{{.Addr}}"><td>{{.Addr}}</td><td>{{.Commands}}</td><td class="left"><svg width="100" height="10" role="img" aria-label="{{printf "%.0f" .Percent}}%"><rect class="bar-sales" width="{{printf "%.1f" .Percent}}" height="10"/></svg> {{printf "%.0f" .Percent}}%</td><td>{{printf "%.2f" .Cores}}</td><td>{{len .Segments}}</td></tr>
{{end}}</tbody></table>`))

// ShardsHTML is the table of what each master of a Redis Cluster did in a
// stage run, with each one's share of the commands; "" off a cluster.
func ShardsHTML(shards []ShardLoad) (template.HTML, error) {
	if len(shards) == 0 {
		return "", nil
	}
	var total int64
	for _, s := range shards {
		total += s.Commands
	}
	type row struct {
		ShardLoad
		Percent float64
	}
	rows := make([]row, len(shards))
	for i, s := range shards {
		rows[i].ShardLoad = s
		if total > 0 {
			rows[i].Percent = 100 * float64(s.Commands) / float64(total)
		}
	}
	var b strings.Builder
	if err := shardsTemplate.Execute(&b, rows); err != nil {
		return "", fmt.Errorf("render the shard table: %w", err)
	}
	return template.HTML(b.String()), nil //nolint:gosec // rendered by html/template
}
