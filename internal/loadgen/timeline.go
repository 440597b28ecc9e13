package loadgen

import (
	"slices"
	"sync"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/attack"
	"github.com/lockstep/lockstep/internal/loadgen/report"
)

// timelineBucket is the resolution of the sales-over-time chart.
const timelineBucket = 100 * time.Millisecond

// timelineBuilder counts answers into fixed buckets from the start of a
// stage run. A fault step feeds it from several goroutines.
type timelineBuilder struct {
	start time.Time

	mu       sync.Mutex
	sales    []int
	failures []int
	events   []report.Event
	oversold []report.OversoldSample
	// outcomes counts the attacks' answers by outcome, for the live page.
	outcomes [attack.NumOutcomes]int
}

func newTimeline(start time.Time) *timelineBuilder {
	return &timelineBuilder{start: start}
}

func (b *timelineBuilder) bucket(at time.Time) int {
	i := int(at.Sub(b.start) / timelineBucket)
	if i < 0 {
		i = 0
	}
	for len(b.sales) <= i {
		b.sales = append(b.sales, 0)
		b.failures = append(b.failures, 0)
	}
	return i
}

func (b *timelineBuilder) add(at time.Time, sale bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	i := b.bucket(at)
	if sale {
		b.sales[i]++
	} else {
		b.failures[i]++
	}
}

// Observe counts one attack answer: on the timeline, and by its outcome.
func (b *timelineBuilder) Observe(r attack.Result) {
	b.add(r.End(), r.Outcome == attack.Sale)
	b.mu.Lock()
	b.outcomes[r.Outcome]++
	b.mu.Unlock()
}

// sampleOversold records the audit's oversold figure at a moment.
func (b *timelineBuilder) sampleOversold(at time.Time, n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.bucket(at)
	b.oversold = append(b.oversold, report.OversoldSample{AtMS: report.MS(at.Sub(b.start)), Oversold: n})
}

// mark records an event and extends the timeline to cover it.
func (b *timelineBuilder) mark(at time.Time, label string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.bucket(at)
	b.events = append(b.events, report.Event{AtMS: report.MS(at.Sub(b.start)), Label: label})
}

func (b *timelineBuilder) since(at time.Time) float64 { return report.MS(at.Sub(b.start)) }

func (b *timelineBuilder) build() report.Timeline {
	b.mu.Lock()
	defer b.mu.Unlock()
	return report.Timeline{BucketMS: int(timelineBucket / time.Millisecond), Sales: b.sales, Failures: b.failures, Events: b.events, Oversold: b.oversold}
}

// snapshot copies the timeline so far and the answers by outcome, while
// the attacks still add to it.
func (b *timelineBuilder) snapshot() (report.Timeline, [attack.NumOutcomes]int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return report.Timeline{
		BucketMS: int(timelineBucket / time.Millisecond),
		Sales:    slices.Clone(b.sales), Failures: slices.Clone(b.failures),
		Events: slices.Clone(b.events), Oversold: slices.Clone(b.oversold),
	}, b.outcomes
}
