// Package timeline is the observer that draws a stage run's sales over
// time: answers counted in fixed buckets, the fault steps' and crash
// steps' marks, and the audit's oversold figure sampled while the load
// runs. Its record is report.Timeline. It imports no store, no Redis
// client and nothing of the runner above it.
package timeline

import (
	"slices"
	"sync"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/attack"
	"github.com/lockstep/lockstep/internal/loadgen/report"
)

// timelineBucket is the resolution of the sales-over-time chart.
const timelineBucket = 100 * time.Millisecond

// Builder counts answers into fixed buckets from the start of a
// stage run. A fault step feeds it from several goroutines.
type Builder struct {
	start time.Time

	mu       sync.Mutex
	sales    []int
	failures []int
	events   []report.Event
	oversold []report.OversoldSample
	// outcomes counts the attacks' answers by outcome, for the live page.
	outcomes [attack.NumOutcomes]int
}

// New starts a timeline at start.
func New(start time.Time) *Builder {
	return &Builder{start: start}
}

func (b *Builder) bucket(at time.Time) int {
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

// Add counts one answer that ended at at.
func (b *Builder) Add(at time.Time, sale bool) {
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
func (b *Builder) Observe(r attack.Result) {
	b.Add(r.End(), r.Outcome == attack.Sale)
	b.mu.Lock()
	b.outcomes[r.Outcome]++
	b.mu.Unlock()
}

// SampleOversold records the audit's oversold figure at a moment.
func (b *Builder) SampleOversold(at time.Time, n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.bucket(at)
	b.oversold = append(b.oversold, report.OversoldSample{AtMS: report.MS(at.Sub(b.start)), Oversold: n})
}

// Mark records an event and extends the timeline to cover it.
func (b *Builder) Mark(at time.Time, label string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.bucket(at)
	b.events = append(b.events, report.Event{AtMS: report.MS(at.Sub(b.start)), Label: label})
}

// Since is at in milliseconds from the start.
func (b *Builder) Since(at time.Time) float64 { return report.MS(at.Sub(b.start)) }

// Build is the record: the buckets, marks and samples so far.
func (b *Builder) Build() report.Timeline {
	b.mu.Lock()
	defer b.mu.Unlock()
	return report.Timeline{BucketMS: int(timelineBucket / time.Millisecond), Sales: b.sales, Failures: b.failures, Events: b.events, Oversold: b.oversold}
}

// Snapshot copies the timeline so far and the answers by outcome, while
// the attacks still add to it.
func (b *Builder) Snapshot() (report.Timeline, [attack.NumOutcomes]int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return report.Timeline{
		BucketMS: int(timelineBucket / time.Millisecond),
		Sales:    slices.Clone(b.sales), Failures: slices.Clone(b.failures),
		Events: slices.Clone(b.events), Oversold: slices.Clone(b.oversold),
	}, b.outcomes
}
