// Package spike is the observer of a run with bots (plan.Bots): it tells
// a bot's answers from an honest buyer's by the buyer each request names,
// and counts what the front door did (its record: report.Spike).
package spike

import (
	"bytes"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/attack"
	"github.com/lockstep/lockstep/internal/loadgen/plan"
	"github.com/lockstep/lockstep/internal/loadgen/report"
)

// markAnswer is in the message of a sold-out answered by the sold-out
// mark (internal/httpapi), which cost Redis nothing.
var markAnswer = []byte("the sold-out mark")

// answer is what the observer keeps of one result until the end.
type answer struct {
	sent    time.Time
	bot     bool
	redis   bool
	outcome attack.Outcome
}

// Observer counts a spike's answers; it runs on the attack's goroutine.
type Observer struct {
	limiterInRedis bool
	started        time.Time
	soldOutAt      time.Time
	honest, bots   map[string]struct{}
	answers        []answer
	honestLatency  []time.Duration
	s              report.Spike
}

// New observes an attack behind limiter (a plan.FrontDoor's name; limit-
// redis's refusals cost Redis a round trip, the others' do not).
func New(limiter string) *Observer {
	return &Observer{limiterInRedis: limiter == plan.LimitRedis, honest: map[string]struct{}{}, bots: map[string]struct{}{}}
}

// Observe counts one answer.
func (o *Observer) Observe(r attack.Result) {
	if o.started.IsZero() {
		o.started = r.SoFar.Started
	}
	u, err := url.Parse(r.URL)
	if err != nil {
		return
	}
	buyer := u.Query().Get("user")
	a := answer{sent: r.Timestamp, bot: strings.HasPrefix(buyer, plan.BotPrefix), outcome: r.Outcome, redis: true}
	switch {
	case r.Outcome == attack.RateLimited:
		o.s.RateLimited++
		a.redis = o.limiterInRedis
	case r.Outcome == attack.SoldOut && bytes.Contains(r.Body, markAnswer):
		o.s.MarkAnswers++
		a.redis = false
	}
	if r.Outcome == attack.SoldOut {
		if end := r.End(); o.soldOutAt.IsZero() || end.Before(o.soldOutAt) {
			o.soldOutAt = end
		}
	}
	if a.bot {
		o.bots[buyer] = struct{}{}
		o.s.BotRequests++
		if r.Outcome != attack.RateLimited {
			o.s.BotsAdmitted++
		}
		if r.Outcome == attack.Sale {
			o.s.BotUnits++
		}
	} else {
		o.honest[buyer] = struct{}{}
		o.s.HonestRequests++
		o.honestLatency = append(o.honestLatency, r.Latency)
		if r.Outcome == attack.Sale {
			o.s.HonestUnits++
		}
	}
	o.answers = append(o.answers, a)
}

// Record is the run's figures; call it once the attack ended.
func (o *Observer) Record() *report.Spike {
	s := o.s
	s.HonestBuyers, s.Bots = len(o.honest), len(o.bots)
	for _, a := range o.answers {
		if !a.redis {
			continue
		}
		s.ReachedRedis++
		if !o.soldOutAt.IsZero() && a.sent.After(o.soldOutAt) {
			s.ReachedRedisAfterSoldOut++
		}
	}
	if units := s.HonestUnits + s.BotUnits; units > 0 {
		s.RedisPerUnit = float64(s.ReachedRedis) / float64(units)
	}
	if !o.soldOutAt.IsZero() {
		s.SoldOutMS = report.MS(o.soldOutAt.Sub(o.started))
	}
	slices.Sort(o.honestLatency)
	if n := len(o.honestLatency); n > 0 {
		s.HonestP99MS = report.MS(o.honestLatency[min(n-1, int(0.99*float64(n)+0.5)-1)])
	}
	return &s
}
