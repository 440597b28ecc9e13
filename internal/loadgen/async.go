package loadgen

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/lockstep/lockstep/asyncorders"
)

// Bounds of the wait for an async stage's workers after the load.
const (
	drainBound = 60 * time.Second
	// drainStill: pending that has not moved for this long will not move
	// (async-wrong-ack's entries are never acknowledged).
	drainStill = 3 * time.Second
	drainPoll  = 100 * time.Millisecond
)

// drainAsync waits, after an async stage's load, until the order workers
// delivered every entry and the pending list is empty or stopped moving,
// and the sweepers gave back every cancelled order's units, and returns
// the audit then: the invariant (initial = remaining + units ordered,
// nothing pending, nothing returning) is judged after draining.
func (r *runner) drainAsync(ctx context.Context, base, stage, sku string, a Audit) (Audit, time.Duration, error) {
	if a.Stream == nil {
		return a, 0, nil
	}
	start := time.Now()
	lastPending, still := a.Stream.Pending, time.Now()
	for time.Since(start) < drainBound {
		s := a.Stream
		if s.Undelivered == 0 && (s.Pending == 0 || time.Since(still) >= drainStill) && returning(a) == 0 {
			break
		}
		if s.Pending != lastPending {
			lastPending, still = s.Pending, time.Now()
		}
		select {
		case <-ctx.Done():
			return a, time.Since(start), ctx.Err()
		case <-time.After(drainPoll):
		}
		next, err := r.auditPatiently(ctx, base, stage, sku)
		if err != nil {
			return a, time.Since(start), fmt.Errorf("audit while draining: %w", err)
		}
		a = next
	}
	return a, time.Since(start), nil
}

// asyncChecks are the expectations of the async stages, read from the
// audit's stream after draining.
var asyncChecks = map[string]checkFunc{
	"drained":       streamCheck(func(a Audit) bool { return a.Stream.Drained() && returning(a) == 0 }),
	"pending-grows": streamCheck(func(a Audit) bool { return a.Stream.Undelivered == 0 && a.Stream.Pending > 0 }),
	// A worker-kill or duplicate-delivery step: while the dead worker was
	// down, the others claimed its entries and wrote their orders — or did
	// not.
	"claimed-while-down": workerKillCheck(func(w *WorkerKillReport) bool { return w.PendingWhileDown == 0 && w.UndersoldWhileDown == 0 }),
	"missing-while-down": workerKillCheck(func(w *WorkerKillReport) bool { return w.PendingWhileDown > 0 && w.UndersoldWhileDown > 0 }),
}

// rowsWhenKilled: of the entries the dead worker held, exactly n had their
// order row (worker-kill: 0; duplicate-delivery: 1, the entry delivered
// again with its row written).
func rowsWhenKilled(args []string) (checkFunc, error) {
	n, err := countArg(args)
	if err != nil {
		return nil, err
	}
	return workerKillCheck(func(w *WorkerKillReport) bool { return w.RowsAtKill == n }), nil
}

func workerKillCheck(f func(w *WorkerKillReport) bool) checkFunc {
	return func(r *StageRun, _ []StageRun) (bool, string) {
		if r.Fault == nil || r.Fault.WorkerKill == nil {
			return false, "no worker-kill or duplicate-delivery step ran"
		}
		w := r.Fault.WorkerKill
		if w.PendingAtKill == 0 {
			return false, w.Worker + " held no entry when it died, so nothing was shown"
		}
		return f(w), fmt.Sprintf("%s died %s holding %d entries, %d with their order row; %.1fs later, still down: %d pending, %d units sold without an order",
			w.Worker, w.At, w.PendingAtKill, w.RowsAtKill, w.DownMS/1000, w.PendingWhileDown, w.UndersoldWhileDown)
	}
}

// returning are the units of orders a sweeper cancelled that are not back
// on sale yet.
func returning(a Audit) int64 {
	if a.Orders == nil {
		return 0
	}
	return a.Orders.Returning
}

func streamCheck(f func(a Audit) bool) checkFunc {
	return func(r *StageRun, _ []StageRun) (bool, string) {
		if r.Audit.Stream == nil {
			return false, "the audit has no stream: not an async stage"
		}
		s := r.Audit.Stream
		return f(r.Audit), fmt.Sprintf("after draining %.1fs: %d undelivered, %d pending (oldest %.1fs), %d dead letters, %d cancelled units not yet back on sale",
			r.DrainMS/1000, s.Undelivered, s.Pending, s.OldestPending.Seconds(), s.DeadLetters, returning(r.Audit))
	}
}

// writeStreamTable prints, when the scenario ran async stages, each one's
// stream after draining: what is left, the dead letters, and the lag from
// the sale's answer to its order row.
func (rep *Report) writeStreamTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := false
	for i := range rep.Stages {
		r := &rep.Stages[i]
		s := r.Audit.Stream
		if s == nil {
			continue
		}
		if !header {
			if _, err := fmt.Fprintln(w, "\nOrder streams (after draining):"); err != nil {
				return err
			}
			fmt.Fprintln(tw, "stage\tworkers in the load\tdrain s\torders/s in the drain\tlength\tundelivered\tpending\toldest pending s\tdead letters\tlag p50 ms\tlag p99 ms\t")
			header = true
		}
		workers := "running"
		if r.WorkersHeld {
			workers = "held"
		}
		fmt.Fprintf(tw, "%s\t%s\t%.1f\t%.0f\t%d\t%d\t%d\t%.1f\t%d\t%.1f\t%.1f\t\n", r.label(), workers, r.DrainMS/1000, r.DrainOrdersPerSec, s.Length, s.Undelivered, s.Pending,
			s.OldestPending.Seconds(), s.DeadLetters, float64(s.LagP50.Microseconds())/1000, float64(s.LagP99.Microseconds())/1000)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write stream table: %w", err)
	}
	return nil
}

// StreamView is an async stage's order stream in the units the report and
// the live page show.
type StreamView struct {
	Length         int64   `json:"length"`
	Undelivered    int64   `json:"undelivered"`
	Pending        int64   `json:"pending"`
	OldestPendingS float64 `json:"oldest_pending_s"`
	DeadLetters    int64   `json:"dead_letters"`
	LagP50MS       float64 `json:"lag_p50_ms"`
	LagP99MS       float64 `json:"lag_p99_ms"`
	// Samples is how many audits a most-seen view took its figures from.
	Samples int `json:"samples,omitempty"`
}

// streamView is s as the pages show it; nil for a stage without a stream.
func streamView(s *asyncorders.Stats) *StreamView {
	if s == nil {
		return nil
	}
	return &StreamView{Length: s.Length, Undelivered: s.Undelivered, Pending: s.Pending, OldestPendingS: s.OldestPending.Seconds(),
		DeadLetters: s.DeadLetters, LagP50MS: msOf(s.LagP50), LagP99MS: msOf(s.LagP99)}
}

func msOf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// most keeps, figure by figure, the most of v and s: what an async stage's
// stream reached while its load ran (read from the audits polled then).
func (v *StreamView) most(s *asyncorders.Stats) {
	if v == nil || s == nil {
		return
	}
	now := streamView(s)
	v.Length, v.Undelivered, v.Pending = max(v.Length, now.Length), max(v.Undelivered, now.Undelivered), max(v.Pending, now.Pending)
	v.OldestPendingS, v.DeadLetters = max(v.OldestPendingS, now.OldestPendingS), max(v.DeadLetters, now.DeadLetters)
	v.LagP50MS, v.LagP99MS = max(v.LagP50MS, now.LagP50MS), max(v.LagP99MS, now.LagP99MS)
	v.Samples++
}

// streamPeak is where a run of stage keeps its stream's most-seen figures
// while it runs; nil for a stage without a stream.
func streamPeak(stage string) *StreamView {
	if _, ok := asyncorders.ModeOf(stage); ok {
		return &StreamView{}
	}
	return nil
}

// StreamRow is a line of an order stream table: a stage, when its stream
// was read, and the figures then.
type StreamRow struct {
	Label, When string
	*StreamView
}

var streamTemplate = template.Must(template.New("streams").Parse(`<table class="streams" data-streams>
<thead><tr><th>stage</th><th class="left">read</th><th>length</th><th>undelivered</th><th>pending</th><th>oldest pending s</th><th>dead letters</th><th>lag p50 ms</th><th>lag p99 ms</th></tr></thead>
<tbody>{{range .}}<tr data-stream="{{.Label}}"><td>{{.Label}}</td><td class="left">{{.When}}</td><td>{{.Length}}</td><td>{{.Undelivered}}</td><td>{{.Pending}}</td><td>{{printf "%.1f" .OldestPendingS}}</td><td>{{.DeadLetters}}</td><td>{{printf "%.1f" .LagP50MS}}</td><td>{{printf "%.1f" .LagP99MS}}</td></tr>
{{end}}</tbody></table>`))

// StreamHTML is the table of rows' order streams; "" without any.
func StreamHTML(rows []StreamRow) (template.HTML, error) {
	if len(rows) == 0 {
		return "", nil
	}
	var b strings.Builder
	if err := streamTemplate.Execute(&b, rows); err != nil {
		return "", fmt.Errorf("render the stream table: %w", err)
	}
	return template.HTML(b.String()), nil //nolint:gosec // rendered by html/template
}

// StreamNow is the live page's line of a running async stage's stream at
// the latest audit; none for another stage.
func StreamNow(label string, v *StreamView) []StreamRow {
	if v == nil {
		return nil
	}
	return []StreamRow{{Label: label, When: "now", StreamView: v}}
}

// StreamRows are an async stage run's stream lines: the most it reached
// while the load ran, and after the workers drained it (how long, their
// orders/s then, and whether they were held through the load); none for
// another stage.
func (r *StageRun) StreamRows() []StreamRow {
	after := streamView(r.Audit.Stream)
	if after == nil {
		return nil
	}
	var rows []StreamRow
	if v := r.StreamWhileRunning; v != nil && v.Samples > 0 {
		rows = append(rows, StreamRow{Label: r.label(), When: fmt.Sprintf("most while running (%d audits)", v.Samples), StreamView: v})
	}
	when := fmt.Sprintf("after draining (%.1f s", r.DrainMS/1000)
	if r.DrainOrdersPerSec > 0 {
		when += fmt.Sprintf(", %.0f orders/s", r.DrainOrdersPerSec)
	}
	if r.WorkersHeld {
		when += "; workers held through the load"
	}
	return append(rows, StreamRow{Label: r.label(), When: when + ")", StreamView: after})
}

// streamTable is report.html's order stream table over every async run.
func (rep *Report) streamTable() (template.HTML, error) {
	var rows []StreamRow
	for i := range rep.Stages {
		rows = append(rows, rep.Stages[i].StreamRows()...)
	}
	return StreamHTML(rows)
}

// isAsync reports whether stage is an async stage, with order workers.
func isAsync(stage string) bool {
	_, ok := asyncorders.ModeOf(stage)
	return ok
}

// holdWorkers stops every order worker (SIGSTOP) until the function it
// returns lets them go on (SIGCONT); that function may run more than once.
// A worker Redis delivers entries to while it is stopped handles them once
// it goes on, as a worker whose batch was slow would.
func (r *runner) holdWorkers(ctx context.Context) (func() error, error) {
	inj := r.cfg.Injector
	var held []string
	letGo := func() error {
		var errs []error
		for _, name := range held {
			errs = append(errs, inj.PauseOrderWorker(context.WithoutCancel(ctx), name, false))
		}
		held = nil
		return errors.Join(errs...)
	}
	for _, name := range inj.OrderWorkers() {
		if err := inj.PauseOrderWorker(ctx, name, true); err != nil {
			return nil, errors.Join(fmt.Errorf("hold order worker %s: %w", name, err), letGo())
		}
		held = append(held, name)
	}
	return letGo, nil
}

// drainRate is the orders written between two audits of an async stage, a
// drain of took apart, per second; 0 for another stage.
func drainRate(before, after Audit, took time.Duration) float64 {
	if before.Stream == nil || before.Orders == nil || after.Orders == nil || took <= 0 {
		return 0
	}
	return float64(after.Orders.Orders-before.Orders.Orders) / took.Seconds()
}
