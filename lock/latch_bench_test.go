package lock

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// BenchmarkLatchMemory is b.N Lock/Unlock cycles at full speed on 1,000
// locks, by 8 goroutines with locks of their own, on a go-redis client
// that re-sends requests (its default options), so that every release
// keeps a latch. It reports how much Redis memory (used_memory) and how
// many keys the run left, for issue 32's target: within 1 MB after
// 1,000,000 cycles (-benchtime 1000000x).
func BenchmarkLatchMemory(b *testing.B) {
	const locks, workers = 1000, 8
	srv := redistest.Start(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: workers})
	defer rdb.Close()
	c := New(rdb)
	defer c.Close()
	ctx := context.Background()
	handles := make([]*Mutex, locks)
	for i := range handles {
		handles[i] = c.Mutex("latch-memory-" + strconv.Itoa(i))
	}
	cycle := func(m *Mutex) {
		if err := m.Lock(ctx); err != nil {
			b.Error(err)
		}
		if err := m.Unlock(ctx); err != nil {
			b.Error(err)
		}
	}
	cycle(handles[0]) // scripts loaded, a connection open
	before := usedMemory(b, rdb)
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < b.N; i += workers {
				cycle(handles[i%locks]) // locks ≡ w mod 8: its own
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	after := usedMemory(b, rdb)
	b.ReportMetric(float64(after-before)/1e6, "MB-left")
	b.ReportMetric(float64(rdb.DBSize(ctx).Val()), "keys-left")
}

func usedMemory(b *testing.B, rdb *redis.Client) int64 {
	info, err := rdb.InfoMap(context.Background(), "memory").Result()
	if err != nil {
		b.Fatal(err)
	}
	n, err := strconv.ParseInt(info["Memory"]["used_memory"], 10, 64)
	if err != nil {
		b.Fatal(err)
	}
	return n
}
