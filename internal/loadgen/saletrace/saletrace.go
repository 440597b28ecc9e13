// Package saletrace is the observer that shows what one sale of a stage
// run sends to Redis: it asks the first replica to trace a sale
// (POST /api/stages/{stage}/trace), one after another until a sale shows
// all its lock does or the run ends, hands each best-so-far to its
// Observer (the live page) and keeps the best as the row's record,
// report.SaleTrace. It speaks the shop's HTTP API alone (shopapi), and
// imports no store and no Redis client.
package saletrace

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/internal/loadgen/shopapi"
	"github.com/lockstep/lockstep/internal/redistrace"
)

// What a traced sale can show of its lock, and what each stage's sales
// can show at best: tracing goes on, one sale after another, until a sale
// shows all of it or the stage run ends.
const (
	showsAcquire    = "acquire"
	showsRelease    = "release"
	showsRenewal    = "renewal"
	showsWalkedPast = "walked past a segment"
)

var stageShows = map[string][]string{
	"setnx": {showsAcquire, showsRelease}, "setnx-expire": {showsAcquire, showsRelease},
	"uuid-lua": {showsAcquire, showsRelease}, "redlock": {showsAcquire, showsRelease},
	"fenced":   {showsAcquire, showsRelease},
	"watchdog": {showsAcquire, showsRelease, showsRenewal},
	// A segment another replica holds costs a try in Redis; one this
	// replica holds is passed by in process, and shows nothing.
	"segmented": {showsAcquire, showsRelease, showsWalkedPast},
}

// traceWait bounds one trace request: a stage run's tracing stops with the
// run, and a request outliving it is abandoned.
const traceWait = 2 * time.Second

// showsOf works out what a traced sale shows of its lock.
func showsOf(t *report.SaleTrace) []string {
	var found []string
	locks := map[string]bool{}
	has := map[string]bool{}
	for _, c := range t.Calls {
		lockKey := len(c.Keys) > 0 && strings.HasSuffix(c.Keys[0], ":lock")
		switch {
		case c.Background:
			has[showsRenewal] = true
		case lockKey && (strings.Contains(c.Script, "unlock") || strings.Contains(c.Script, "release") || c.Command == "DEL"):
			has[showsRelease] = true
		case lockKey:
			has[showsAcquire] = true
			locks[c.Keys[0]] = true
		}
	}
	if len(locks) > 1 {
		has[showsWalkedPast] = true
	}
	for _, s := range []string{showsAcquire, showsRelease, showsRenewal, showsWalkedPast} {
		if has[s] {
			found = append(found, s)
		}
	}
	return found
}

// Observer learns each better trace as it is taken.
type Observer interface {
	Traced(*report.SaleTrace)
}

// Func is an Observer of one function.
type Func func(*report.SaleTrace)

// Traced calls f.
func (f Func) Traced(t *report.SaleTrace) { f(t) }

// Tracer traces sales of one stage run until it ends, keeping the one
// that shows the most.
type Tracer struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	best *report.SaleTrace
}

// Start traces the stage run's sales on replica, telling obs of each
// better one, until Stop.
func Start(ctx context.Context, shop *shopapi.Client, replica, stage string, obs Observer) *Tracer {
	ctx, cancel := context.WithCancel(ctx)
	t := &Tracer{cancel: cancel, done: make(chan struct{})}
	want := stageShows[stage]
	url := shopapi.StageURL(replica, stage, "trace") + "?wait=" + traceWait.String()
	go func() {
		defer close(t.done)
		for ctx.Err() == nil {
			var got struct {
				Replica    string            `json:"replica"`
				Sold       bool              `json:"sold"`
				RoundTrips int               `json:"round_trips"`
				Calls      []redistrace.Call `json:"calls"`
				Result     struct {
					Status int             `json:"status"`
					Body   json.RawMessage `json:"body"`
				} `json:"result"`
			}
			err := shop.Do(ctx, http.MethodPost, url, nil, true, &got)
			var apiErr *shopapi.APIError
			switch {
			case errors.As(err, &apiErr) && apiErr.Status == http.StatusServiceUnavailable:
				continue // no sale within the wait: ask again
			case err != nil:
				// The replica is down (a crash step) or the run moves on.
				select {
				case <-ctx.Done():
				case <-time.After(100 * time.Millisecond):
				}
				continue
			}
			tr := &report.SaleTrace{Replica: got.Replica, Sold: got.Sold, Status: got.Result.Status, Answer: got.Result.Body,
				RoundTrips: got.RoundTrips, Calls: got.Calls}
			tr.Shows = showsOf(tr)
			if t.keep(tr) && len(tr.Shows) == len(want) && tr.Sold {
				obs.Traced(tr)
				return
			}
			obs.Traced(t.trace())
		}
	}()
	return t
}

// keep keeps tr when it shows more than the best so far; it reports
// whether tr is now the best.
func (t *Tracer) keep(tr *report.SaleTrace) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	better := t.best == nil || (tr.Sold && !t.best.Sold) || (tr.Sold == t.best.Sold && len(tr.Shows) > len(t.best.Shows))
	if better {
		t.best = tr
	}
	return better
}

func (t *Tracer) trace() *report.SaleTrace {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.best
}

// Stop ends the tracing and returns the best sale traced; nil for none
// (or a nil Tracer: tracing was off).
func (t *Tracer) Stop() *report.SaleTrace {
	if t == nil {
		return nil
	}
	t.cancel()
	<-t.done
	return t.trace()
}
