package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	mrand "math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// keySource hands out Idempotency-Keys: a new one per request, except that
// a retryRatio share of requests repeats a key sent at least a second ago
// (a client retrying after a lost answer), which must get the first answer
// back and sell nothing.
type keySource struct {
	mu         sync.Mutex
	prefix     string
	next       uint64
	retryRatio float64
	recent     []sentKey // ring of the latest keys
	pos        int
}

type sentKey struct {
	key  string
	sent time.Time
}

const recentKeys = 1024

func newKeySource(retryRatio float64) *keySource {
	return &keySource{prefix: "soak-" + rand.Text()[:10] + "-", retryRatio: retryRatio, recent: make([]sentKey, 0, recentKeys)}
}

func (k *keySource) pick(now time.Time) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.recent) > 0 && mrand.Float64() < k.retryRatio {
		if old := k.recent[mrand.IntN(len(k.recent))]; now.Sub(old.sent) >= time.Second {
			return old.key
		}
	}
	k.next++
	key := k.prefix + strconv.FormatUint(k.next, 10)
	if len(k.recent) < recentKeys {
		k.recent = append(k.recent, sentKey{key, now})
	} else {
		k.recent[k.pos] = sentKey{key, now}
		k.pos = (k.pos + 1) % recentKeys
	}
	return key
}

// counts classifies answers: a sale is a 200 that is not a replay.
type counts struct {
	Requests int `json:"requests"`
	Sales    int `json:"sales"`
	Replays  int `json:"replays"`
	SoldOut  int `json:"sold_out"`
	Busy     int `json:"busy"` // 423: the lock stayed taken for the whole lock wait
	Errors   int `json:"errors"`
	// Unknown are the errors whose stock write's reply was lost: each may
	// have sold, and keeps its key's marker pending until its TTL.
	Unknown int `json:"outcome_unknown"`
	// Unsettled are the retries of a key whose first request never
	// settled (one of Unknown), answered so: 423 key_in_progress at the
	// retry's deadline, then 409 outcome_unknown once the marker is older
	// than any request.
	Unsettled int `json:"unsettled_retries"`
}

// unanswered are the requests that neither sold nor replayed a sale.
func (c counts) unanswered() int { return c.Requests - c.Sales - c.Replays }

// The shop's answers the soak tells apart (docs/exactly-once.md).
const (
	codeOutcomeUnknown = "outcome_unknown"
	codeKeyInProgress  = "key_in_progress"
	codeMayHaveSold    = "may_have_sold"
)

func (c *counts) add(r *vegeta.Result) {
	c.Requests++
	var body struct{ Error, Message string }
	if r.Code != http.StatusOK {
		_ = json.Unmarshal(r.Body, &body) // an answer that is not the shop's JSON counts by its status
	}
	switch {
	case r.Code == http.StatusOK && r.Headers.Get("Idempotent-Replayed") == "true":
		c.Replays++
	case r.Code == http.StatusOK:
		c.Sales++
	case r.Code == http.StatusConflict && body.Error == codeOutcomeUnknown,
		r.Code == http.StatusLocked && body.Error == codeKeyInProgress:
		c.Unsettled++
	case r.Code == http.StatusConflict:
		c.SoldOut++
	case r.Code == http.StatusLocked:
		c.Busy++
	default:
		c.Errors++
		if body.Error == codeMayHaveSold {
			c.Unknown++
		}
	}
}

// window is the load of one sampling interval.
type window struct {
	counts
	P50MS float64 `json:"p50_ms"`
	P99MS float64 `json:"p99_ms"`

	latencies []time.Duration
}

// loadResult is the whole attack, and per sampling interval.
type loadResult struct {
	Total        counts         `json:"total"`
	Windows      []window       `json:"windows"`
	ErrorSamples map[string]int `json:"error_samples,omitempty"`
	// Failures are the first requests answered other than 200
	// (maxFailures), each with when it was sent and how long it took: what
	// a shop's log is read for.
	Failures []failure `json:"failures,omitempty"`
}

// failure is one request that sold nothing.
type failure struct {
	AtS       float64 `json:"at_s"` // sent, from the load's start
	LatencyMS float64 `json:"latency_ms"`
	Answer    string  `json:"answer"` // status and body, or the client's error
}

const maxFailures = 100

// attack offers rate sales per second of stage's sku for duration through
// url, each with an Idempotency-Key, and buckets the answers into windows
// of interval counted from start.
func attack(ctx context.Context, url string, rate, workers int, duration, interval time.Duration, keys *keySource, start time.Time) *loadResult {
	attacker := vegeta.NewAttacker(
		vegeta.Workers(uint64(min(workers, 8))),
		vegeta.MaxWorkers(uint64(workers)),
		vegeta.Connections(workers),
		vegeta.KeepAlive(true),
		vegeta.Timeout(15*time.Second),
		vegeta.Redirects(vegeta.NoFollow),
		vegeta.MaxBody(4<<10),
	)
	targeter := func(t *vegeta.Target) error {
		t.Method, t.URL = http.MethodPost, url
		t.Header = http.Header{"Idempotency-Key": {keys.pick(time.Now())}}
		return nil
	}
	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		select {
		case <-ctx.Done():
			attacker.Stop()
		case <-stopped:
		}
	}()
	res := &loadResult{ErrorSamples: map[string]int{}}
	pacer := vegeta.Rate{Freq: rate, Per: time.Second}
	for r := range attacker.Attack(targeter, pacer, duration, "soak") {
		res.Total.add(r)
		i := max(0, int(r.Timestamp.Sub(start)/interval))
		for len(res.Windows) <= i {
			res.Windows = append(res.Windows, window{})
		}
		w := &res.Windows[i]
		w.add(r)
		w.latencies = append(w.latencies, r.Latency)
		if r.Code == http.StatusOK {
			continue
		}
		// vegeta's error for an answer is its status line alone: the body
		// says which error it was.
		msg := r.Error
		if r.Code != 0 {
			msg = strconv.Itoa(int(r.Code)) + " " + string(r.Body)
		}
		if r.Code != http.StatusConflict && r.Code != http.StatusLocked {
			if _, seen := res.ErrorSamples[msg]; seen || len(res.ErrorSamples) < 5 {
				res.ErrorSamples[msg]++
			}
		}
		if len(res.Failures) < maxFailures {
			res.Failures = append(res.Failures, failure{
				AtS: r.Timestamp.Sub(start).Seconds(), LatencyMS: float64(r.Latency.Microseconds()) / 1000,
				Answer: msg,
			})
		}
	}
	for i := range res.Windows {
		w := &res.Windows[i]
		slices.Sort(w.latencies)
		w.P50MS, w.P99MS = percentileMS(w.latencies, 0.50), percentileMS(w.latencies, 0.99)
	}
	return res
}

// percentileMS is the q-quantile of sorted, nearest rank, in milliseconds.
func percentileMS(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := min(max(int(q*float64(len(sorted))+0.5)-1, 0), len(sorted)-1)
	return float64(sorted[i].Microseconds()) / 1000
}
