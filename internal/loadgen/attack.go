package loadgen

import (
	"context"
	"net/http"
	"slices"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// attackSpec is one vegeta attack on a stage's deduct route.
type attackSpec struct {
	name          string
	url           string
	rate          Rate
	workers       int
	duration      time.Duration
	stopAtSoldOut bool
	timeout       time.Duration
	// onResult, optional, sees every answer (a fault step times them).
	onResult func(*vegeta.Result)
	// also, optional, are more URLs the requests go to in turn with url.
	also []string
}

// outcome is how the loadgen classifies an answer (SPEC: a sale is a 200).
type outcome int

const (
	outcomeSale outcome = iota
	outcomeSoldOut
	outcomeBusy
	outcomeError
)

func classify(code uint16) outcome {
	switch code {
	case http.StatusOK:
		return outcomeSale
	case http.StatusConflict:
		return outcomeSoldOut
	case http.StatusLocked:
		return outcomeBusy
	}
	return outcomeError
}

// tally accumulates the answers of one attack.
type tally struct {
	started      time.Time
	lastAnswer   time.Time
	requests     int
	sales        int
	soldOut      int
	busy         int
	errors       int
	firstSale    time.Time
	latencies    []time.Duration
	replicas     map[string]struct{}
	errorSamples map[string]int
}

const maxErrorSamples = 5

func (t *tally) add(r *vegeta.Result) {
	t.requests++
	end := r.End()
	if end.After(t.lastAnswer) {
		t.lastAnswer = end
	}
	t.latencies = append(t.latencies, r.Latency)
	switch classify(r.Code) {
	case outcomeSale:
		t.sales++
		if t.firstSale.IsZero() || end.Before(t.firstSale) {
			t.firstSale = end
		}
	case outcomeSoldOut:
		t.soldOut++
	case outcomeBusy:
		t.busy++
	case outcomeError:
		t.errors++
		msg := r.Error
		if msg == "" {
			msg = http.StatusText(int(r.Code))
		}
		if _, seen := t.errorSamples[msg]; seen || len(t.errorSamples) < maxErrorSamples {
			t.errorSamples[msg]++
		}
	}
	if name := r.Headers.Get("X-Replica"); name != "" {
		t.replicas[name] = struct{}{}
	}
}

// elapsed is the attack's span: from the first request to the last answer.
func (t *tally) elapsed() time.Duration {
	if t.lastAnswer.Before(t.started) {
		return 0
	}
	return t.lastAnswer.Sub(t.started)
}

// percentile returns the q-quantile (0..1) of the latencies, nearest rank.
func (t *tally) percentile(q float64) time.Duration {
	if len(t.latencies) == 0 {
		return 0
	}
	idx := int(q*float64(len(t.latencies))+0.5) - 1
	return t.latencies[min(max(idx, 0), len(t.latencies)-1)]
}

// attack runs spec with vegeta, feeding every answer to the timeline and to
// onAnswer (for live progress), and returns the tally. It stops early when
// ctx ends or, if asked, at the first sold-out answer; answers in flight are
// still counted.
func attack(ctx context.Context, spec attackSpec, tl *timelineBuilder, onAnswer func(*tally)) *tally {
	workers := uint64(spec.workers)
	opts := []func(*vegeta.Attacker){
		vegeta.MaxWorkers(workers),
		vegeta.Connections(spec.workers),
		vegeta.KeepAlive(true),
		vegeta.Timeout(spec.timeout),
		vegeta.Redirects(vegeta.NoFollow),
		vegeta.MaxBody(4 << 10),
	}
	if spec.rate == MaxRate {
		// At max rate vegeta hands a tick to whichever worker is free, so the
		// worker count is the concurrency and answers set the pace.
		opts = append(opts, vegeta.Workers(workers))
	} else {
		opts = append(opts, vegeta.Workers(min(workers, 8)))
	}
	attacker := vegeta.NewAttacker(opts...)
	targets := []vegeta.Target{{Method: http.MethodPost, URL: spec.url}}
	for _, u := range spec.also {
		targets = append(targets, vegeta.Target{Method: http.MethodPost, URL: u})
	}
	targeter := vegeta.NewStaticTargeter(targets...)

	t := &tally{started: time.Now(), replicas: map[string]struct{}{}, errorSamples: map[string]int{}}
	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		select {
		case <-ctx.Done():
			attacker.Stop()
		case <-stopped:
		}
	}()
	pacer := vegeta.Rate{Freq: int(spec.rate), Per: time.Second}
	for res := range attacker.Attack(targeter, pacer, spec.duration, spec.name) {
		t.add(res)
		tl.answer(res.End(), classify(res.Code))
		if spec.onResult != nil {
			spec.onResult(res)
		}
		if spec.stopAtSoldOut && classify(res.Code) == outcomeSoldOut {
			attacker.Stop()
		}
		if onAnswer != nil {
			onAnswer(t)
		}
	}
	slices.Sort(t.latencies)
	return t
}
