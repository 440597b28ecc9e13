package attack

import (
	"context"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/plan"
	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// Spec is one vegeta attack on a stage's deduct route.
type Spec struct {
	Name          string
	URL           string
	Rate          plan.Rate
	Workers       int
	Duration      time.Duration
	StopAtSoldOut bool
	Timeout       time.Duration
	// Also, optional, are more URLs the requests go to in turn with URL.
	Also []string
	// Buyers, optional, names a buyer in each request (buyers.go).
	Buyers *plan.Buyers
	// Bots, optional, names a bot or an honest buyer in each (buyers.go).
	Bots *plan.Bots
}

// Result is one answer as observers see it: vegeta's result (its start
// moved to its slot in a fixed-rate schedule), its outcome, and the
// attack's tally so far, this answer included. Observers run on the
// attack's goroutine, one after the other: they must not keep SoFar, and
// must copy the vegeta result to keep it.
type Result struct {
	*vegeta.Result
	Outcome Outcome
	SoFar   *Tally
}

// Observer consumes an attack's results (a timeline, the progress line, a
// fault step's recorder, the payers of a payment step).
type Observer interface {
	Observe(Result)
}

// ObserverFunc is an Observer made of a function.
type ObserverFunc func(Result)

// Observe calls f.
func (f ObserverFunc) Observe(r Result) { f(r) }

// Run runs spec with vegeta, hands every answer to the tally and then to
// each observer in turn, and returns the tally. It stops early when ctx
// ends or, if asked, at the first sold-out answer; answers in flight are
// still counted.
func Run(ctx context.Context, spec Spec, observers ...Observer) *Tally {
	workers := uint64(spec.Workers)
	opts := []func(*vegeta.Attacker){
		vegeta.MaxWorkers(workers),
		vegeta.Connections(spec.Workers),
		vegeta.KeepAlive(true),
		vegeta.Timeout(spec.Timeout),
		vegeta.Redirects(vegeta.NoFollow),
		vegeta.MaxBody(4 << 10),
	}
	if spec.Rate == plan.MaxRate {
		// At max rate vegeta hands a tick to whichever worker is free, so the
		// worker count is the concurrency and answers set the pace.
		opts = append(opts, vegeta.Workers(workers))
	} else {
		opts = append(opts, vegeta.Workers(min(workers, 8)))
	}
	attacker := vegeta.NewAttacker(opts...)
	targets := []vegeta.Target{{Method: http.MethodPost, URL: spec.URL}}
	for _, u := range spec.Also {
		targets = append(targets, vegeta.Target{Method: http.MethodPost, URL: u})
	}
	targeter := vegeta.NewStaticTargeter(targets...)
	if spec.Buyers != nil {
		targeter = buyerTargeter(spec.URL, *spec.Buyers, rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())))
	}
	if spec.Bots != nil {
		targeter = botTargeter(spec.URL, *spec.Bots, rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())))
	}

	var interval time.Duration
	if spec.Rate != plan.MaxRate && spec.Rate > 0 {
		interval = time.Second / time.Duration(spec.Rate)
	}
	t := NewTally(time.Now(), interval)
	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		select {
		case <-ctx.Done():
			attacker.Stop()
		case <-stopped:
		}
	}()
	pacer := vegeta.Rate{Freq: int(spec.Rate), Per: time.Second}
	for res := range attacker.Attack(targeter, pacer, spec.Duration, spec.Name) {
		t.onSchedule(res)
		t.Add(res)
		r := Result{Result: res, Outcome: OutcomeOf(res), SoFar: t}
		for _, o := range observers {
			o.Observe(r)
		}
		if spec.StopAtSoldOut && r.Outcome == SoldOut {
			attacker.Stop()
		}
	}
	t.Done()
	return t
}
