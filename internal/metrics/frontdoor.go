package metrics

import "github.com/prometheus/client_golang/prometheus"

// MarkState is what the sold-out mark (internal/frontdoor) shows.
type MarkState interface {
	Size() int
	Listening() bool
}

// FrontDoor is the front door's instruments: the limiter's refusals and
// the sold-out mark's answers and state, per replica (each replica is its
// own scrape target). A nil *FrontDoor records nothing.
type FrontDoor struct {
	refused *prometheus.CounterVec
	marked  *prometheus.CounterVec
}

// noMark is the state of a replica without the sold-out mark.
type noMark struct{}

func (noMark) Size() int       { return 0 }
func (noMark) Listening() bool { return false }

// refusalScopes are the values of the refusals' scope label.
var refusalScopes = []string{"buyer", "global", "unavailable"}

// NewFrontDoor registers the instruments on reg; mark may be nil (no mark:
// 0 marks, not listening). Every stage's counters start at 0, so a replica
// without a limiter or a mark exports its zeros: the dashboard's front-door
// row has data in every stack, and a 0 there is the truth.
func NewFrontDoor(reg prometheus.Registerer, mark MarkState, stages []string) *FrontDoor {
	f := &FrontDoor{
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockstep_frontdoor_refused_total", Help: "Deduct requests the rate limiter refused (429), by the limit that refused (buyer, global), or could not decide (503: unavailable).",
		}, []string{"stage", "scope"}),
		marked: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockstep_soldout_mark_answers_total", Help: "Deduct requests answered sold_out from the sold-out mark, with no Redis round trip.",
		}, []string{"stage"}),
	}
	reg.MustRegister(f.refused, f.marked)
	for _, stage := range stages {
		for _, scope := range refusalScopes {
			f.refused.WithLabelValues(stage, scope)
		}
		f.marked.WithLabelValues(stage)
	}
	if mark == nil {
		mark = noMark{}
	}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "lockstep_soldout_marks", Help: "SKUs this replica holds marked sold out (0 without the mark).",
		}, func() float64 { return float64(mark.Size()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "lockstep_soldout_mark_listening", Help: "1 when the sold-out mark is subscribed to the stock-back channel (it marks nothing otherwise; 0 without the mark).",
		}, func() float64 {
			if mark.Listening() {
				return 1
			}
			return 0
		}),
	)
	return f
}

// Refused records a request the limiter refused.
func (f *FrontDoor) Refused(stage, scope string) {
	if f != nil {
		f.refused.WithLabelValues(stage, scope).Inc()
	}
}

// Marked records a request answered from the sold-out mark.
func (f *FrontDoor) Marked(stage string) {
	if f != nil {
		f.marked.WithLabelValues(stage).Inc()
	}
}
