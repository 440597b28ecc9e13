package main

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// replicaDoor is one replica's front door as the live page shows it: the
// SKUs its sold-out mark holds, whether the mark listens for stock coming
// back, and the requests its limiter refused since it started (each run's
// front door restarts the replicas).
type replicaDoor struct {
	Replica   string
	Marks     int
	Listening bool
	Refused   int
}

// frontDoorReader reads the replicas' front-door gauges and counters
// (internal/metrics/frontdoor.go) from their /metrics.
type frontDoorReader struct {
	http *http.Client

	mu    sync.Mutex
	doors []replicaDoor
}

func newFrontDoorReader() *frontDoorReader {
	return &frontDoorReader{http: &http.Client{Timeout: time.Second}}
}

// follow reads the replicas every renewalsEvery until ctx ends.
func (f *frontDoorReader) follow(ctx context.Context, replicaURLs []string) {
	tick := time.NewTicker(renewalsEvery)
	defer tick.Stop()
	for {
		doors := make([]replicaDoor, 0, len(replicaURLs))
		for i, u := range replicaURLs {
			if d, err := f.read(ctx, u); err == nil {
				d.Replica = replicaName(i)
				doors = append(doors, d)
			}
		}
		f.mu.Lock()
		f.doors = doors
		f.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// now is the latest reading, one entry per replica that answered.
func (f *frontDoorReader) now() []replicaDoor {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.doors
}

func (f *frontDoorReader) read(ctx context.Context, base string) (replicaDoor, error) {
	var d replicaDoor
	err := scrapeMetrics(ctx, f.http, base, func(name, _ string, v float64) {
		switch name {
		case "lockstep_soldout_marks":
			d.Marks = int(v)
		case "lockstep_soldout_mark_listening":
			d.Listening = v == 1
		case "lockstep_frontdoor_refused_total":
			d.Refused += int(v)
		}
	})
	return d, err
}
