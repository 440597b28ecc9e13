package shop_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/redis/go-redis/v9"
)

const (
	// benchClients is the number of concurrent HTTP clients.
	benchClients = 64
	benchRounds  = 8
	benchRound   = 300 * time.Millisecond
)

// workload is one kind of request the throughput benchmark sends.
type workload struct {
	name, method, path string
	stage, faults      string // stage to reset and the faults it runs with
	segments           int
}

// BenchmarkThroughput measures, through ONE shop replica with 64 concurrent
// HTTP clients, the sales/s of watchdog, segmented (16 segments) and atomic
// with no injected work, and the same replica's /healthz req/s (the HTTP
// ceiling). The workloads alternate in short rounds so that each figure
// sees the same machine (loopback latency on a shared box drifts by
// several times within seconds). It also reports watchdog and segmented
// with 1 ms of business work, where the critical section rather than the
// CPU bounds them. Next to the rates it reports the CPU each request cost
// this process (the shop and its HTTP clients) and redis-server, in µs:
// where the CPU is the bound, their ratio is what the rates' ratio tends
// to, and it moves less with the machine's load. Run it as
//
//	go test -run '^$' -bench BenchmarkThroughput -benchtime 1x ./internal/shop/
func BenchmarkThroughput(b *testing.B) {
	srv := redistest.Start(b)
	r := startReplicas(b, srv, 1)
	rdb := srv.Client(b)
	workloads := []workload{
		{name: "healthz", method: http.MethodGet, path: "/healthz"},
		{name: "atomic", method: http.MethodPost, path: "/api/stages/atomic/deduct", stage: "atomic", faults: `{}`},
		{name: "watchdog", method: http.MethodPost, path: "/api/stages/watchdog/deduct", stage: "watchdog", faults: `{}`},
		{name: "segmented", method: http.MethodPost, path: "/api/stages/segmented/deduct", stage: "segmented", faults: `{}`, segments: 16},
		{name: "watchdog-work1ms", method: http.MethodPost, path: "/api/stages/watchdog/deduct", stage: "watchdog", faults: `{"work":"1ms"}`},
		{name: "segmented-work1ms", method: http.MethodPost, path: "/api/stages/segmented/deduct", stage: "segmented", faults: `{"work":"1ms"}`, segments: 16},
	}
	for _, w := range workloads {
		if w.stage != "" {
			r.reset(w.stage, 1_000_000_000, w.segments)
		}
	}
	rate := make(map[string]float64)
	shopCPU := make(map[string]float64) // µs per request
	redisCPU := make(map[string]float64)
	for b.Loop() {
		ok := make(map[string]int64)
		var elapsed, shopUsed, redisUsed = make(map[string]time.Duration), make(map[string]time.Duration), make(map[string]time.Duration)
		for range benchRounds {
			for _, w := range workloads {
				if w.stage != "" {
					r.setFaults(w.stage, w.faults)
				}
				shop0, redis0 := processCPU(b), redisServerCPU(b, rdb)
				n, d := r.load(b, w)
				shop1, redis1 := processCPU(b), redisServerCPU(b, rdb)
				ok[w.name] += n
				elapsed[w.name] += d
				shopUsed[w.name] += shop1 - shop0
				redisUsed[w.name] += redis1 - redis0
			}
		}
		for _, w := range workloads {
			rate[w.name] = float64(ok[w.name]) / elapsed[w.name].Seconds()
			shopCPU[w.name] = float64(shopUsed[w.name].Microseconds()) / float64(ok[w.name])
			redisCPU[w.name] = float64(redisUsed[w.name].Microseconds()) / float64(ok[w.name])
		}
	}
	for _, w := range workloads {
		b.ReportMetric(rate[w.name], w.name+"/s")
	}
	for _, w := range []string{"healthz", "atomic"} {
		b.ReportMetric(shopCPU[w], w+"-shop-cpu-µs/req")
		b.ReportMetric(redisCPU[w], w+"-redis-cpu-µs/req")
	}
	b.ReportMetric(shopCPU["healthz"]/(shopCPU["atomic"]+redisCPU["atomic"]), "atomic/healthz-by-cpu")
	b.ReportMetric(rate["segmented"]/rate["watchdog"], "segmented/watchdog")
	b.ReportMetric(rate["atomic"]/rate["healthz"], "atomic/healthz")
	b.ReportMetric(rate["segmented-work1ms"]/rate["watchdog-work1ms"], "segmented/watchdog@work1ms")
	for _, s := range []string{"atomic", "watchdog", "segmented"} {
		if a := r.audit(s); !a.Consistent || a.Oversold != 0 {
			b.Errorf("%s: %+v", s, a.Audit)
		}
	}
}

// load runs benchClients clients against replica 0 for one round and
// returns how many answered 200, and how long the round took.
func (r *replicas) load(b *testing.B, w workload) (int64, time.Duration) {
	url := r.urls[0] + w.path
	ctx, cancel := context.WithTimeout(context.Background(), benchRound)
	defer cancel()
	var (
		ok   atomic.Int64
		wg   sync.WaitGroup
		fail atomic.Value
	)
	start := time.Now()
	for range benchClients {
		wg.Go(func() {
			for ctx.Err() == nil {
				req, _ := http.NewRequest(w.method, url, nil)
				res, err := r.http.Do(req)
				if err != nil {
					fail.Store(err.Error())
					return
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusOK {
					fail.Store(fmt.Sprintf("%s: %d", w.path, res.StatusCode))
					return
				}
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	if f := fail.Load(); f != nil {
		b.Fatalf("%s: %v", w.name, f)
	}
	return ok.Load(), time.Since(start)
}

// processCPU is the CPU time this process has used so far.
func processCPU(b *testing.B) time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// redisServerCPU is the CPU time redis-server has used so far, from INFO.
func redisServerCPU(b *testing.B, rdb *redis.Client) time.Duration {
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatalf("INFO cpu: %v", err)
	}
	var seconds float64
	for line := range strings.Lines(info) {
		name, value, _ := strings.Cut(strings.TrimSpace(line), ":")
		if name == "used_cpu_sys" || name == "used_cpu_user" {
			v, err := strconv.ParseFloat(value, 64)
			if err != nil {
				b.Fatalf("INFO cpu: %s: %v", line, err)
			}
			seconds += v
		}
	}
	return time.Duration(seconds * float64(time.Second))
}
