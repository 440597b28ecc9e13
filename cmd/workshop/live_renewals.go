package main

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
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
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	counts := map[string]float64{}
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() {
		rest, ok := strings.CutPrefix(lines.Text(), "lockstep_watchdog_renewals_total{")
		labels, value, cut := strings.Cut(rest, "} ")
		if !ok || !cut || !strings.Contains(labels, `result="renewed"`) {
			continue
		}
		_, stage, found := strings.Cut(labels, `stage="`)
		if !found {
			continue
		}
		stage, _, _ = strings.Cut(stage, `"`)
		if n, err := strconv.ParseFloat(value, 64); err == nil {
			counts[stage] = n
		}
	}
	return counts, lines.Err()
}
