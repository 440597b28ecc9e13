package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// report is everything one run measured; -json writes it as is.
type report struct {
	Started        time.Time `json:"started"`
	RedisVersion   string    `json:"redis_version"`
	RedisCPUs      string    `json:"redis_cpus,omitempty"`
	BenchCPUs      string    `json:"bench_cpus"`
	GOMAXPROCS     int       `json:"gomaxprocs"`
	Goroutines     int       `json:"goroutines"`
	Duration       string    `json:"contended_duration"`
	UncontendedFor string    `json:"uncontended_duration"`
	Lease          string    `json:"lease"`
	Command        string    `json:"command"`
	Rounds         []round   `json:"rounds"`
	// MedianRatios are the rounds' ratios' medians, when there are several.
	MedianRatios *ratios `json:"median_ratios,omitempty"`
	// Shapes are the multi-process runs (-procs), in place of Rounds.
	Shapes []shapeReport `json:"multi_process,omitempty"`
}

// shapeReport is the rounds of one multi-process shape.
type shapeReport struct {
	Shape        shape   `json:"shape"`
	Rounds       []round `json:"rounds"`
	MedianRatios *ratios `json:"median_ratios,omitempty"`
}

// round is one pass over the contenders; results are in the order of the
// -contenders list whatever order they ran in.
type round struct {
	RunOrder []string `json:"run_order"`
	Results  []result `json:"results"`
	Ratios   *ratios  `json:"ratios,omitempty"`
}

type result struct {
	Name  string `json:"name"`
	About string `json:"about"`
	Peer  bool   `json:"peer"`
	// Error is why a phase failed; the phases before it have figures.
	Error       string              `json:"error,omitempty"`
	Contended   *contendedFigures   `json:"contended,omitempty"`
	Uncontended *uncontendedFigures `json:"uncontended,omitempty"`
}

// Durations are in microseconds.
type contendedFigures struct {
	Acquisitions int64   `json:"acquisitions"`
	Seconds      float64 `json:"seconds"`
	AcqPerSec    float64 `json:"acquisitions_per_second"`
	WaitP50      float64 `json:"wait_p50_us"`
	WaitP99      float64 `json:"wait_p99_us"`
	// WaitMax is the longest wait, finished or not.
	WaitMax float64 `json:"wait_max_us"`
	// WaitPerAcq is all the time goroutines spent in Lock, finished or not,
	// per acquisition. Unlike the quantiles it cannot be flattered by one
	// goroutine re-acquiring at once while the others starve.
	WaitPerAcq float64 `json:"wait_per_acquisition_us"`
	// Waits still open when the run ended have no end, so they are not in
	// the quantiles; a lock that lets one goroutine barge again and again
	// leaves the others here, waiting the whole run.
	UnfinishedWaits       int     `json:"unfinished_waits"`
	LongestUnfinishedWait float64 `json:"longest_unfinished_wait_us"`
	// Fairness is Jain's index of acquisitions per goroutine: 1 = equal
	// shares, 1/goroutines = one goroutine took them all.
	Fairness float64 `json:"fairness"`
	// In a multi-process run: the processes, their acquisitions, and Jain's
	// index of those (1 = every process got the same share).
	Processes       int     `json:"processes,omitempty"`
	PerProcess      []int64 `json:"acquisitions_per_process,omitempty"`
	ProcessFairness float64 `json:"process_fairness,omitempty"`
	MinPerGoroutine int64   `json:"min_acquisitions_per_goroutine"`
	MaxPerGoroutine int64   `json:"max_acquisitions_per_goroutine"`
	Overlaps        int64   `json:"overlaps"`
	Counter         int64   `json:"counter"`
	// CmdsPerAcq: Δtotal_commands_processed minus the one INFO and the
	// INCRs, per acquisition; includes commands run inside Lua scripts.
	CmdsPerAcq float64 `json:"server_commands_per_acquisition"`
	// ReqsPerAcq: commands the contender's client wrote, per acquisition.
	ReqsPerAcq float64        `json:"client_requests_per_acquisition"`
	Commands   []commandShare `json:"server_commands_by_name"`
}

type uncontendedFigures struct {
	Ops          int            `json:"ops"`
	OpsPerSec    float64        `json:"ops_per_second"`
	Mean         float64        `json:"mean_us"`
	P50          float64        `json:"p50_us"`
	P99          float64        `json:"p99_us"`
	BaselineOps  int            `json:"baseline_ops"`
	BaselineMean float64        `json:"baseline_mean_us"`
	BaselineP50  float64        `json:"baseline_p50_us"`
	BaselineP99  float64        `json:"baseline_p99_us"`
	VsBaseline   float64        `json:"mean_vs_baseline"`
	CmdsPerOp    float64        `json:"server_commands_per_op"`
	ReqsPerOp    float64        `json:"client_requests_per_op"`
	Commands     []commandShare `json:"server_commands_by_name"`
}

// ratios are the targets for lockstep's default configuration
// against the best peer configuration of the same run.
type ratios struct {
	BestPeer string `json:"best_peer"`
	// AcqPerSec: lockstep ÷ best peer; target ≥ 2.
	AcqPerSec float64 `json:"acquisitions_per_second"`
	// WaitP99: lockstep ÷ best peer; target ≤ 0.5.
	WaitP99 float64 `json:"wait_p99"`
	// WaitPerAcq and WaitMax: lockstep ÷ best peer. The quantiles of a peer
	// that lets the unlocking goroutine re-acquire at once describe that one
	// goroutine; these two also count the others' waiting.
	WaitPerAcq float64 `json:"wait_per_acquisition"`
	WaitMax    float64 `json:"wait_max"`
	// BestPeerFairness is the best peer's Jain index (lockstep's is in its
	// result).
	BestPeerFairness float64 `json:"best_peer_fairness"`
	// CmdsPerAcq: lockstep's own; target ≤ 4 (≤ 2 across processes).
	CmdsPerAcq float64 `json:"server_commands_per_acquisition"`
	// ProcessFairness: lockstep's Jain index over its processes'
	// acquisitions, in a multi-process run; target ≥ 0.9.
	ProcessFairness float64 `json:"process_fairness,omitempty"`
	// Uncontended: lockstep mean Lock+Unlock ÷ mean of two EVALSHA round
	// trips measured alternately with it; target ≤ 1.3. UncontendedP50 is
	// the same for the medians, which other load on the machine moves less.
	Uncontended    float64 `json:"uncontended_vs_two_evalsha"`
	UncontendedP50 float64 `json:"uncontended_p50_vs_two_evalsha"`
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func summarizeContended(run *contendedRun) *contendedFigures {
	slices.Sort(run.waits)
	f := &contendedFigures{
		Acquisitions:    run.acquisitions,
		Seconds:         run.elapsed.Seconds(),
		AcqPerSec:       float64(run.acquisitions) / run.elapsed.Seconds(),
		WaitP50:         us(quantile(run.waits, 0.50)),
		WaitP99:         us(quantile(run.waits, 0.99)),
		WaitMax:         us(quantile(run.waits, 1)),
		UnfinishedWaits: len(run.cutWaits),
		Fairness:        jainIndex(run.perGoroutine),
		MinPerGoroutine: slices.Min(run.perGoroutine),
		MaxPerGoroutine: slices.Max(run.perGoroutine),
		Overlaps:        run.overlaps,
		Counter:         run.counter,
	}
	if len(run.cutWaits) > 0 {
		f.LongestUnfinishedWait = us(slices.Max(run.cutWaits))
		f.WaitMax = max(f.WaitMax, f.LongestUnfinishedWait)
	}
	if run.acquisitions > 0 {
		f.WaitPerAcq = us(sum(run.waits)+sum(run.cutWaits)) / float64(run.acquisitions)
		f.CmdsPerAcq = float64(run.commands.lockCommands(0)) / float64(run.acquisitions)
		f.ReqsPerAcq = float64(run.requests) / float64(run.acquisitions)
		f.Commands = run.commands.breakdown(run.acquisitions, 0)
	}
	return f
}

func summarizeUncontended(run *uncontendedRun) *uncontendedFigures {
	slices.Sort(run.ops)
	slices.Sort(run.baseline)
	ops := int64(len(run.ops))
	baselineEvalSHAs := 2 * int64(len(run.baseline))
	f := &uncontendedFigures{
		Ops:          len(run.ops),
		OpsPerSec:    float64(ops) / run.elapsed.Seconds(),
		Mean:         us(mean(run.ops)),
		P50:          us(quantile(run.ops, 0.50)),
		P99:          us(quantile(run.ops, 0.99)),
		BaselineOps:  len(run.baseline),
		BaselineMean: us(mean(run.baseline)),
		BaselineP50:  us(quantile(run.baseline, 0.50)),
		BaselineP99:  us(quantile(run.baseline, 0.99)),
		CmdsPerOp:    float64(run.commands.lockCommands(baselineEvalSHAs)) / float64(ops),
		ReqsPerOp:    float64(run.requests) / float64(ops),
		Commands:     run.commands.breakdown(ops, baselineEvalSHAs),
	}
	f.VsBaseline = f.Mean / f.BaselineMean
	return f
}

// computeRatios compares the "lockstep" row with the peer of highest
// acquisitions/s; nil when either has no contended figures.
func computeRatios(results []result) *ratios {
	var own, best *result
	for i := range results {
		r := &results[i]
		switch {
		case r.Contended == nil:
		case r.Name == lockstepDefault:
			own = r
		case r.Peer && (best == nil || r.Contended.AcqPerSec > best.Contended.AcqPerSec):
			best = r
		}
	}
	if own == nil || best == nil {
		return nil
	}
	rt := &ratios{
		BestPeer:         best.Name,
		BestPeerFairness: best.Contended.Fairness,
		AcqPerSec:        own.Contended.AcqPerSec / best.Contended.AcqPerSec,
		WaitP99:          own.Contended.WaitP99 / best.Contended.WaitP99,
		WaitPerAcq:       own.Contended.WaitPerAcq / best.Contended.WaitPerAcq,
		WaitMax:          own.Contended.WaitMax / best.Contended.WaitMax,
		CmdsPerAcq:       own.Contended.CmdsPerAcq,
		ProcessFairness:  own.Contended.ProcessFairness,
	}
	if u := own.Uncontended; u != nil {
		rt.Uncontended, rt.UncontendedP50 = u.VsBaseline, u.P50/u.BaselineP50
	}
	return rt
}

// failures lists the contenders that failed a phase, broke mutual exclusion
// or lost an INCR.
func failures(results []result) []string {
	var bad []string
	for _, r := range results {
		if r.Error != "" {
			bad = append(bad, fmt.Sprintf("%s failed: %s", r.Name, r.Error))
		}
		if c := r.Contended; c != nil && (c.Overlaps != 0 || c.Counter != c.Acquisitions) {
			bad = append(bad, fmt.Sprintf("%s violated mutual exclusion: %d overlaps, counter %d for %d acquisitions",
				r.Name, c.Overlaps, c.Counter, c.Acquisitions))
		}
	}
	return bad
}

func (rep *report) print(w io.Writer) {
	fmt.Fprintf(w, "redis %s (cpus %s), bench cpus %s, GOMAXPROCS %d; contended: %d goroutines, one key, lock → INCR → unlock for %s; uncontended: 1 goroutine for %s\n",
		rep.RedisVersion, orAny(rep.RedisCPUs), rep.BenchCPUs, rep.GOMAXPROCS, rep.Goroutines, rep.Duration, rep.UncontendedFor)
	for i, rd := range rep.Rounds {
		if len(rep.Rounds) > 1 {
			fmt.Fprintf(w, "\nround %d of %d (ran %s)", i+1, len(rep.Rounds), strings.Join(rd.RunOrder, ", "))
		}
		fmt.Fprintln(w)
		rd.print(w)
	}
	fmt.Fprintln(w, "\ncmds/acq: Δ INFO total_commands_processed − 1 INFO − the INCRs, ÷ acquisitions (counts redis.call inside scripts); reqs/acq: commands the contender's client wrote ÷ acquisitions")
	fmt.Fprintln(w, "wait quantiles: completed acquisitions only; wait max and wait/acq (all time spent in Lock ÷ acquisitions) include the waits still open at the end; fairness: Jain's index of acquisitions per goroutine (1 = equal shares)")
	fmt.Fprintln(w, "uncontended baseline: two EVALSHA round trips of `return 1`, timed in blocks alternating with each contender's")
	if rt := rep.MedianRatios; rt != nil {
		fmt.Fprintf(w, "\nmedians over %d rounds:\n", len(rep.Rounds))
		rt.print(w)
	}
}

func (rep *report) printShapes(w io.Writer) {
	fmt.Fprintf(w, "redis %s (cpus %s), bench cpus %s, GOMAXPROCS %d per process; processes × goroutines, one key, lock → INCR → unlock for %s\n",
		rep.RedisVersion, orAny(rep.RedisCPUs), rep.BenchCPUs, rep.GOMAXPROCS, rep.Duration)
	for _, sr := range rep.Shapes {
		for i, rd := range sr.Rounds {
			fmt.Fprintf(w, "\n%d processes × %d goroutines", sr.Shape.Procs, sr.Shape.Goroutines)
			if len(sr.Rounds) > 1 {
				fmt.Fprintf(w, ", round %d of %d (ran %s)", i+1, len(sr.Rounds), strings.Join(rd.RunOrder, ", "))
			}
			fmt.Fprintln(w)
			rd.printProcs(w)
		}
		if rt := sr.MedianRatios; rt != nil {
			fmt.Fprintf(w, "\n%d×%d, medians over %d rounds:\n", sr.Shape.Procs, sr.Shape.Goroutines, len(sr.Rounds))
			rt.print(w)
		}
	}
	fmt.Fprintln(w, "\nfair procs: Jain's index of acquisitions per process; fair gor: per goroutine (1 = equal shares); overlaps: entries that found another critical section under way in any process (a shared memory counter)")
	fmt.Fprintln(w, "cmds/acq: Δ INFO total_commands_processed − 1 INFO − the INCRs, ÷ acquisitions; reqs/acq: commands the contender's clients wrote ÷ acquisitions")
}

func (rd *round) printProcs(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "contender\tacq/s\twait p50\twait p99\twait max\twait/acq\tfair procs\tfair gor\tcmds/acq\treqs/acq\toverlaps\tcounter ok\t")
	for _, r := range rd.Results {
		cells := []string{r.Name}
		if c := r.Contended; c != nil {
			cells = append(cells, fmt.Sprintf("%.0f", c.AcqPerSec), fmtUs(c.WaitP50), fmtUs(c.WaitP99), fmtUs(c.WaitMax),
				fmtUs(c.WaitPerAcq), fmt.Sprintf("%.2f", c.ProcessFairness), fmt.Sprintf("%.2f", c.Fairness),
				fmt.Sprintf("%.2f", c.CmdsPerAcq), fmt.Sprintf("%.2f", c.ReqsPerAcq), fmt.Sprint(c.Overlaps), fmt.Sprint(c.Counter == c.Acquisitions))
		} else {
			cells = append(cells, slices.Repeat([]string{"-"}, 11)...)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	tw.Flush()
	rd.printTail(w)
}

func (rd *round) print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "contender\tacq/s\twait p50\twait p99\twait max\twait/acq\tfairness\tcmds/acq\treqs/acq\toverlaps\tcounter ok\tuncont mean\tp50\tp99\tops/s\t÷ 2×EVALSHA\t")
	for _, r := range rd.Results {
		cells := []string{r.Name}
		if c := r.Contended; c != nil {
			cells = append(cells, fmt.Sprintf("%.0f", c.AcqPerSec), fmtUs(c.WaitP50), fmtUs(c.WaitP99), fmtUs(c.WaitMax),
				fmtUs(c.WaitPerAcq), fmt.Sprintf("%.2f", c.Fairness), fmt.Sprintf("%.2f", c.CmdsPerAcq),
				fmt.Sprintf("%.2f", c.ReqsPerAcq), fmt.Sprint(c.Overlaps), fmt.Sprint(c.Counter == c.Acquisitions))
		} else {
			cells = append(cells, slices.Repeat([]string{"-"}, 10)...)
		}
		if u := r.Uncontended; u != nil {
			cells = append(cells, fmtUs(u.Mean), fmtUs(u.P50), fmtUs(u.P99), fmt.Sprintf("%.0f", u.OpsPerSec), fmt.Sprintf("%.2f", u.VsBaseline))
		} else {
			cells = append(cells, slices.Repeat([]string{"-"}, 5)...)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	tw.Flush()
	rd.printTail(w)
}

// printTail prints the commands by name, the failures and the ratios.
func (rd *round) printTail(w io.Writer) {
	fmt.Fprintln(w, "\nserver commands per contended acquisition, by name:")
	for _, r := range rd.Results {
		if r.Contended != nil {
			fmt.Fprintf(w, "  %-22s %s\n", r.Name, fmtShares(r.Contended.Commands))
		}
	}
	for _, r := range rd.Results {
		if r.Error != "" {
			fmt.Fprintf(w, "FAILED %s: %s\n", r.Name, r.Error)
		}
	}
	if rd.Ratios != nil {
		fmt.Fprintln(w)
		rd.Ratios.print(w)
	}
}

func (rt *ratios) print(w io.Writer) {
	fmt.Fprintf(w, "lockstep vs best peer (%s, fairness %.2f): acq/s ×%.2f (target ≥ 2), p99 wait ×%.2f (target ≤ 0.5), wait/acq ×%.2f, wait max ×%.2f\n",
		rt.BestPeer, rt.BestPeerFairness, rt.AcqPerSec, rt.WaitP99, rt.WaitPerAcq, rt.WaitMax)
	fmt.Fprintf(w, "lockstep cmds/acq %.2f", rt.CmdsPerAcq)
	if rt.ProcessFairness > 0 {
		fmt.Fprintf(w, " (target ≤ 2), fairness between processes %.2f (target ≥ 0.9)", rt.ProcessFairness)
	} else {
		fmt.Fprint(w, " (target ≤ 4)")
	}
	if rt.Uncontended > 0 {
		fmt.Fprintf(w, "; uncontended Lock+Unlock ÷ 2×EVALSHA: mean %.2f, p50 %.2f (target ≤ 1.3)", rt.Uncontended, rt.UncontendedP50)
	}
	fmt.Fprintln(w)
}

// medianRatios takes each ratio's median over the rounds that have it; nil
// with fewer than two.
func medianRatios(rounds []round) *ratios {
	var all []*ratios
	for _, rd := range rounds {
		if rd.Ratios != nil {
			all = append(all, rd.Ratios)
		}
	}
	if len(all) < 2 {
		return nil
	}
	med := func(field func(*ratios) float64) float64 {
		var vals []float64
		for _, rt := range all {
			if v := field(rt); v > 0 {
				vals = append(vals, v)
			}
		}
		return median(vals)
	}
	var peers []string
	for _, rt := range all {
		if !slices.Contains(peers, rt.BestPeer) {
			peers = append(peers, rt.BestPeer)
		}
	}
	return &ratios{
		BestPeer:         strings.Join(peers, " / "),
		BestPeerFairness: med(func(rt *ratios) float64 { return rt.BestPeerFairness }),
		AcqPerSec:        med(func(rt *ratios) float64 { return rt.AcqPerSec }),
		WaitP99:          med(func(rt *ratios) float64 { return rt.WaitP99 }),
		WaitPerAcq:       med(func(rt *ratios) float64 { return rt.WaitPerAcq }),
		WaitMax:          med(func(rt *ratios) float64 { return rt.WaitMax }),
		CmdsPerAcq:       med(func(rt *ratios) float64 { return rt.CmdsPerAcq }),
		ProcessFairness:  med(func(rt *ratios) float64 { return rt.ProcessFairness }),
		Uncontended:      med(func(rt *ratios) float64 { return rt.Uncontended }),
		UncontendedP50:   med(func(rt *ratios) float64 { return rt.UncontendedP50 }),
	}
}

// median of vals (the mean of the middle two for an even count); 0 for none.
func median(vals []float64) float64 {
	if len(vals) == 0 {
		return 0
	}
	slices.Sort(vals)
	mid := len(vals) / 2
	if len(vals)%2 == 0 {
		return (vals[mid-1] + vals[mid]) / 2
	}
	return vals[mid]
}

func orAny(cpus string) string {
	if cpus == "" {
		return "any"
	}
	return cpus
}

func fmtUs(v float64) string {
	switch {
	case v >= 10_000:
		return fmt.Sprintf("%.1fms", v/1000)
	case v >= 1000:
		return fmt.Sprintf("%.2fms", v/1000)
	default:
		return fmt.Sprintf("%.0fµs", v)
	}
}

func fmtShares(shares []commandShare) string {
	parts := make([]string, len(shares))
	for i, s := range shares {
		parts[i] = fmt.Sprintf("%s %.2f", s.Command, s.PerOp)
	}
	return strings.Join(parts, ", ")
}

func writeJSON(path string, rep *report) error {
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}
