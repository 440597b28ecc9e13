package lock_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/lockstep/lockstep/lock"
	"github.com/redis/go-redis/v9"
)

// BenchmarkClusterHandOver measures what an unlock's message costs a Redis
// Cluster, plain (PUBLISH, broadcast over the cluster bus to every node)
// against sharded (SPUBLISH, kept in the lock's shard): four Clients, one
// goroutine each, on one lock with cohorting off, so that every release
// hands the lock to another Client and publishes. Both run on one cluster,
// in turns, for -count rounds. Per acquisition it reports the messages
// published and the CPU of the lock's master, of its replica and of the
// four other nodes, less what each spends idle.
//
//	go test -run '^$' -bench ClusterHandOver -benchtime 20000x -count 3 ./lock/
func BenchmarkClusterHandOver(b *testing.B) {
	cluster := redistest.StartCluster(b)
	rdb := cluster.Client(b)
	nodes := make([]*redis.Client, len(cluster.Nodes))
	for i, n := range cluster.Nodes {
		nodes[i] = n.Client(b)
	}
	for _, mode := range []struct {
		name, command string
		opts          []lock.Option
	}{
		{"publish", "publish", []lock.Option{lock.WithPlainPubSub()}},
		{"spublish", "spublish", nil},
	} {
		b.Run(mode.name, func(b *testing.B) {
			ctx := context.Background()
			name := "bench-handover-" + mode.name
			master, err := rdb.MasterForKey(ctx, "{"+name+"}")
			if err != nil {
				b.Fatal(err)
			}
			clients := make([]*lock.Client, 4)
			for i := range clients {
				clients[i] = lock.New(rdb, append([]lock.Option{lock.WithMaxLocalPasses(0)}, mode.opts...)...)
				defer clients[i].Close()
			}
			// The nodes' own background work (cron, cluster bus pings), measured
			// idle, is taken out of the figures.
			idleFrom := nodesCPU(b, nodes)
			time.Sleep(time.Second)
			sh := shardOf(b, master)
			idle := cpuSpent(nodesCPU(b, nodes), idleFrom, sh)
			cpuBefore := nodesCPU(b, nodes)
			start := time.Now()
			published := commandCalls(b, master, mode.command)
			b.ResetTimer()
			var left atomic.Int64
			left.Store(int64(b.N))
			var wg sync.WaitGroup
			for _, c := range clients {
				m := c.Mutex(name)
				wg.Go(func() {
					for left.Add(-1) >= 0 {
						if err := m.Lock(ctx); err != nil {
							b.Error(err)
							return
						}
						if err := m.Unlock(ctx); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			used := cpuSpent(nodesCPU(b, nodes), cpuBefore, sh)
			elapsed := time.Since(start).Seconds()
			n := float64(b.N)
			b.ReportMetric(float64(commandCalls(b, master, mode.command)-published)/n, "msgs/acq")
			b.ReportMetric((used.owner-idle.owner*elapsed)*1e6/n, "owner-cpu-µs/acq")
			b.ReportMetric((used.replica-idle.replica*elapsed)*1e6/n, "replica-cpu-µs/acq")
			b.ReportMetric((used.rest-idle.rest*elapsed)*1e6/n, "rest-cpu-µs/acq")
		})
	}
}

// spent is CPU seconds of the lock's master, of its replica (which
// applies every write of the master's), and of the four other nodes.
type spent struct{ owner, replica, rest float64 }

func cpuSpent(after, before map[string]float64, shard shard) spent {
	var s spent
	for addr, cpu := range after {
		switch addr {
		case shard.master:
			s.owner += cpu - before[addr]
		case shard.replica:
			s.replica += cpu - before[addr]
		default:
			s.rest += cpu - before[addr]
		}
	}
	return s
}

// shard is the addresses of a master and of its replica.
type shard struct{ master, replica string }

func shardOf(b *testing.B, master *redis.Client) shard {
	b.Helper()
	info, err := master.Info(context.Background(), "replication").Result()
	if err != nil {
		b.Fatal(err)
	}
	host, _, _ := strings.Cut(master.Options().Addr, ":")
	for _, line := range strings.Split(info, "\r\n") {
		if _, replica, ok := strings.Cut(line, ",port="); ok && strings.HasPrefix(line, "slave0:") {
			port, _, _ := strings.Cut(replica, ",")
			return shard{master: master.Options().Addr, replica: host + ":" + port}
		}
	}
	b.Fatal("the lock's master has no replica")
	return shard{}
}

// nodesCPU is each node's used_cpu_sys + used_cpu_user, in seconds.
func nodesCPU(b *testing.B, nodes []*redis.Client) map[string]float64 {
	b.Helper()
	cpu := make(map[string]float64, len(nodes))
	for _, n := range nodes {
		info, err := n.Info(context.Background(), "cpu").Result()
		if err != nil {
			b.Fatal(err)
		}
		for _, line := range strings.Split(info, "\r\n") {
			k, v, _ := strings.Cut(line, ":")
			if k == "used_cpu_sys" || k == "used_cpu_user" {
				s, _ := strconv.ParseFloat(v, 64)
				cpu[n.Options().Addr] += s
			}
		}
	}
	return cpu
}
