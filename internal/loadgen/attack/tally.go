package attack

import (
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/report"
	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// Tally accumulates the answers of one attack (or of results recorded
// elsewhere, added with Add): the counts, the latencies, the replicas seen
// and a few error samples. Its records are report.Answers and
// report.Latency.
type Tally struct {
	Started    time.Time
	lastAnswer time.Time
	Requests   int
	Sales      int
	SoldOut    int
	Busy       int
	// AlreadyBought are the one-per-user refusals (409 already_bought).
	AlreadyBought int
	// RateLimited are a limiter's refusals (429).
	RateLimited int
	Errors      int
	FirstSale   time.Time
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

// NewTally starts a tally of answers sent from started on, paced every
// interval (0 at max rate).
func NewTally(started time.Time, interval time.Duration) *Tally {
	return &Tally{Started: started, interval: interval, replicas: map[string]struct{}{}, errorSamples: map[string]int{}}
}

// Add counts one answer.
func (t *Tally) Add(r *vegeta.Result) {
	t.Requests++
	end := r.End()
	if end.After(t.lastAnswer) {
		t.lastAnswer = end
	}
	latency := r.Latency
	t.latencies = append(t.latencies, latency)
	switch OutcomeOf(r) {
	case Sale:
		t.Sales++
		t.saleLatencies = append(t.saleLatencies, latency)
		if t.FirstSale.IsZero() || end.Before(t.FirstSale) {
			t.FirstSale = end
		}
	case SoldOut:
		t.SoldOut++
	case Busy:
		t.Busy++
	case AlreadyBought:
		t.AlreadyBought++
	case RateLimited:
		t.RateLimited++
	case Error:
		t.Errors++
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
func (t *Tally) onSchedule(r *vegeta.Result) {
	if t.interval == 0 {
		return
	}
	t.service = append(t.service, r.Latency)
	if intended := t.Started.Add(time.Duration(r.Seq) * t.interval); intended.Before(r.Timestamp) {
		r.Latency += r.Timestamp.Sub(intended)
		r.Timestamp = intended
	}
}

// Elapsed is the attack's span: from the first request to the last answer.
func (t *Tally) Elapsed() time.Duration {
	if t.lastAnswer.Before(t.Started) {
		return 0
	}
	return t.lastAnswer.Sub(t.Started)
}

// Replicas is how many replicas answered (their X-Replica header).
func (t *Tally) Replicas() int { return len(t.replicas) }

// quantile is the q-quantile (0..1) of sorted, nearest rank; 0 when empty.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	idx := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(idx, 0), len(sorted)-1)]
}

// Done orders the latencies for the records; call it once every answer
// is in (Run does).
func (t *Tally) Done() {
	slices.Sort(t.latencies)
	slices.Sort(t.saleLatencies)
	slices.Sort(t.service)
}

// Answers is the tally's record: its counts, its error samples and rates.
func (t *Tally) Answers() report.Answers {
	a := report.Answers{Requests: t.Requests, Sales: t.Sales, SoldOut: t.SoldOut, Busy: t.Busy, AlreadyBought: t.AlreadyBought, RateLimited: t.RateLimited, Errors: t.Errors}
	for msg, n := range t.errorSamples {
		a.ErrorSamples = append(a.ErrorSamples, fmt.Sprintf("%d× %s", n, msg))
	}
	slices.Sort(a.ErrorSamples)
	elapsed := t.Elapsed()
	a.ElapsedMS = report.MS(elapsed)
	if elapsed > 0 {
		a.SalesPerSec = float64(t.Sales) / elapsed.Seconds()
		a.RequestsPerSec = float64(t.Requests) / elapsed.Seconds()
	}
	return a
}

// Latency is the tally's latency record (see report.Latency).
func (t *Tally) Latency() report.Latency {
	l := report.Latency{P50MS: report.MS(quantile(t.latencies, 0.50)), P90MS: report.MS(quantile(t.latencies, 0.90)), P99MS: report.MS(quantile(t.latencies, 0.99)), MaxMS: report.MS(quantile(t.latencies, 1)),
		SaleP50MS: report.MS(quantile(t.saleLatencies, 0.50)), SaleP99MS: report.MS(quantile(t.saleLatencies, 0.99))}
	if len(t.service) > 0 {
		p50, p99 := report.MS(quantile(t.service, 0.50)), report.MS(quantile(t.service, 0.99))
		l.ServiceP50MS, l.ServiceP99MS = &p50, &p99
	}
	return l
}
