package shop_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/redistest"
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
// CPU bounds them. Run it as
//
//	go test -run '^$' -bench BenchmarkThroughput -benchtime 1x ./internal/shop/
func BenchmarkThroughput(b *testing.B) {
	r := startReplicas(b, redistest.Start(b), 1)
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
	for b.Loop() {
		ok := make(map[string]int64)
		var elapsed = make(map[string]time.Duration)
		for range benchRounds {
			for _, w := range workloads {
				if w.stage != "" {
					r.setFaults(w.stage, w.faults)
				}
				n, d := r.load(b, w)
				ok[w.name] += n
				elapsed[w.name] += d
			}
		}
		for _, w := range workloads {
			rate[w.name] = float64(ok[w.name]) / elapsed[w.name].Seconds()
		}
	}
	for _, w := range workloads {
		b.ReportMetric(rate[w.name], w.name+"/s")
	}
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
