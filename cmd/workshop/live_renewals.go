package main

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"
)

// renewalCounter sums the replicas' watchdog renewals by stage, from
// their Prometheus counters (lockstep_watchdog_renewals_total, result
// renewed), over replica restarts: a counter that went down started over.
type renewalCounter struct {
	http *http.Client

	mu      sync.Mutex
	last    map[string]map[string]float64 // replica URL → stage → counter
	byStage map[string]float64
}

func newRenewalCounter() *renewalCounter {
	return &renewalCounter{http: &http.Client{Timeout: time.Second}, last: map[string]map[string]float64{}, byStage: map[string]float64{}}
}

// renewalsEvery is how often the replicas' counters are read.
const renewalsEvery = 500 * time.Millisecond

// follow reads the replicas' counters until ctx ends.
func (c *renewalCounter) follow(ctx context.Context, replicaURLs []string) {
	tick := time.NewTicker(renewalsEvery)
	defer tick.Stop()
	for {
		for _, u := range replicaURLs {
			if counts, err := c.read(ctx, u); err == nil {
				c.add(u, counts)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (c *renewalCounter) add(replica string, counts map[string]float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	prev := c.last[replica]
	for stage, n := range counts {
		delta := n - prev[stage]
		if delta < 0 { // the replica restarted
			delta = n
		}
		c.byStage[stage] += delta
	}
	c.last[replica] = counts
}

func (c *renewalCounter) count(stage string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return int(c.byStage[stage])
}

// read returns a replica's renewed counters by stage.
func (c *renewalCounter) read(ctx context.Context, base string) (map[string]float64, error) {
	counts := map[string]float64{}
	err := scrapeMetrics(ctx, c.http, base, func(name, labels string, v float64) {
		if name != "lockstep_watchdog_renewals_total" || !strings.Contains(labels, `result="renewed"`) {
			return
		}
		if _, stage, found := strings.Cut(labels, `stage="`); found {
			stage, _, _ = strings.Cut(stage, `"`)
			counts[stage] = v
		}
	})
	return counts, err
}
