package loadgen

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/plan"
	"github.com/lockstep/lockstep/internal/loadgen/report"
	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// attackSpec is one vegeta attack on a stage's deduct route.
type attackSpec struct {
	name          string
	url           string
	rate          plan.Rate
	workers       int
	duration      time.Duration
	stopAtSoldOut bool
	timeout       time.Duration
	// onResult, optional, sees every answer (a fault step times them).
	onResult func(*vegeta.Result)
	// also, optional, are more URLs the requests go to in turn with url.
	also []string
	// buyers, optional, names a buyer in each request (buyers.go).
	buyers *plan.Buyers
}

// outcome is how the loadgen classifies an answer (SPEC: a sale is a 200).
type outcome int

const (
	outcomeSale outcome = iota
	outcomeSoldOut
	outcomeBusy
	// outcomeAlreadyBought: a one-per-user refusal (409 already_bought), a
	// refusal of its own: neither a busy lock nor a sold out that would end
	// the run.
	outcomeAlreadyBought
	outcomeError // the last: arrays of every outcome are [outcomeError + 1]
)

// outcomeOf classifies a result: as classify does, but a 409 that is
// already_bought is outcomeAlreadyBought.
func outcomeOf(r *vegeta.Result) outcome {
	if alreadyBought(r) {
		return outcomeAlreadyBought
	}
	return classify(r.Code)
}

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
	started    time.Time
	lastAnswer time.Time
	requests   int
	sales      int
	soldOut    int
	busy       int
	// alreadyBought are the one-per-user refusals (409 already_bought).
	alreadyBought int
	errors        int
	firstSale     time.Time
	// latencies of every answer and of the sales alone. At a fixed rate
	// they run from each request's intended send time (its slot in the
	// pacer's schedule), so a stalled server's backlog counts the wait it
	// caused (coordinated omission); service keeps vegeta's own, from when
	// a worker sent it, for comparison.
	latencies, saleLatencies, service []time.Duration
	// interval is the pacer's spacing at a fixed rate; 0 at max rate.
	interval     time.Duration
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
	latency := r.Latency
	t.latencies = append(t.latencies, latency)
	switch outcomeOf(r) {
	case outcomeSale:
		t.sales++
		t.saleLatencies = append(t.saleLatencies, latency)
		if t.firstSale.IsZero() || end.Before(t.firstSale) {
			t.firstSale = end
		}
	case outcomeSoldOut:
		t.soldOut++
	case outcomeBusy:
		t.busy++
	case outcomeAlreadyBought:
		t.alreadyBought++
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

// onSchedule moves a fixed-rate result's start back to the time the pacer's
// schedule gave it (its sequence number's slot), when a busy worker sent it
// later, so its latency counts the wait (coordinated omission); its end
// stays; vegeta's own latency is kept in service. At max rate nothing moves.
func (t *tally) onSchedule(r *vegeta.Result) {
	if t.interval == 0 {
		return
	}
	t.service = append(t.service, r.Latency)
	if intended := t.started.Add(time.Duration(r.Seq) * t.interval); intended.Before(r.Timestamp) {
		r.Latency += r.Timestamp.Sub(intended)
		r.Timestamp = intended
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
func (t *tally) percentile(q float64) time.Duration { return quantile(t.latencies, q) }

// quantile is the q-quantile (0..1) of sorted, nearest rank; 0 when empty.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	idx := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(idx, 0), len(sorted)-1)]
}

// sort orders the latencies for quantile.
func (t *tally) sort() {
	slices.Sort(t.latencies)
	slices.Sort(t.saleLatencies)
	slices.Sort(t.service)
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
	if spec.rate == plan.MaxRate {
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
	if spec.buyers != nil {
		targeter = buyerTargeter(spec.url, *spec.buyers, rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())))
	}

	t := &tally{started: time.Now(), replicas: map[string]struct{}{}, errorSamples: map[string]int{}}
	if spec.rate != plan.MaxRate && spec.rate > 0 {
		t.interval = time.Second / time.Duration(spec.rate)
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
	pacer := vegeta.Rate{Freq: int(spec.rate), Per: time.Second}
	for res := range attacker.Attack(targeter, pacer, spec.duration, spec.name) {
		t.onSchedule(res)
		t.add(res)
		tl.answer(res.End(), outcomeOf(res))
		if spec.onResult != nil {
			spec.onResult(res)
		}
		if spec.stopAtSoldOut && outcomeOf(res) == outcomeSoldOut {
			attacker.Stop()
		}
		if onAnswer != nil {
			onAnswer(t)
		}
	}
	t.sort()
	return t
}

// answers is the tally's record: its counts, its error samples and rates.
func (t *tally) answers() report.Answers {
	a := report.Answers{Requests: t.requests, Sales: t.sales, SoldOut: t.soldOut, Busy: t.busy, AlreadyBought: t.alreadyBought, Errors: t.errors}
	for msg, n := range t.errorSamples {
		a.ErrorSamples = append(a.ErrorSamples, fmt.Sprintf("%d× %s", n, msg))
	}
	slices.Sort(a.ErrorSamples)
	elapsed := t.elapsed()
	a.ElapsedMS = report.MS(elapsed)
	if elapsed > 0 {
		a.SalesPerSec = float64(t.sales) / elapsed.Seconds()
		a.RequestsPerSec = float64(t.requests) / elapsed.Seconds()
	}
	return a
}

// latency is the tally's latency record (see report.Latency).
func (t *tally) latency() report.Latency {
	l := report.Latency{P50MS: report.MS(t.percentile(0.50)), P90MS: report.MS(t.percentile(0.90)), P99MS: report.MS(t.percentile(0.99)), MaxMS: report.MS(t.percentile(1)),
		SaleP50MS: report.MS(quantile(t.saleLatencies, 0.50)), SaleP99MS: report.MS(quantile(t.saleLatencies, 0.99))}
	if len(t.service) > 0 {
		p50, p99 := report.MS(quantile(t.service, 0.50)), report.MS(quantile(t.service, 0.99))
		l.ServiceP50MS, l.ServiceP99MS = &p50, &p99
	}
	return l
}
