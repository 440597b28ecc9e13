package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// childEnv names the environment variable that makes this command one
// contending process of a multi-process run; it holds the childSpec as JSON.
const childEnv = "PEERS_CHILD"

// childSpec is what a contending process is told by its parent.
type childSpec struct {
	Contender   string        `json:"contender"`
	Addr        string        `json:"addr"`
	Version     string        `json:"version"`
	Lease       time.Duration `json:"lease"`
	FastBackoff time.Duration `json:"fast_backoff"`
	Key         string        `json:"key"`
	Goroutines  int           `json:"goroutines"`
	Warmup      time.Duration `json:"warmup"`
	StallLimit  time.Duration `json:"stall_limit"`
	// SharedCheck is the file of the sharedSlot every process maps.
	SharedCheck string `json:"shared_check"`
}

// childResult is what a contending process reports, as one JSON line on
// its stdout. Times are Unix nanoseconds, durations nanoseconds.
type childResult struct {
	Start        int64   `json:"start"`
	End          int64   `json:"end"`
	Waits        []int64 `json:"waits"`
	CutWaits     []int64 `json:"cut_waits"`
	PerGoroutine []int64 `json:"per_goroutine"`
	Requests     int64   `json:"requests"`
	Error        string  `json:"error,omitempty"`
}

// childReady is the line a child writes once connected and warmed up; the
// parent answers with the run's deadline (Unix nanoseconds), so that every
// process starts and stops together.
const childReady = "ready"

// runChild is the whole life of a contending process: it warms up, says it
// is ready, waits for the deadline on stdin, runs lock → INCR → unlock with
// its goroutines until then, and reports.
func runChild(ctx context.Context, specJSON string, in io.Reader, out io.Writer) error {
	var spec childSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		return fmt.Errorf("%s: %w", childEnv, err)
	}
	res, err := childRun(ctx, spec, bufio.NewReader(in), out)
	if err != nil {
		res = &childResult{Error: err.Error()}
	}
	if encErr := json.NewEncoder(out).Encode(res); encErr != nil {
		return errors.Join(err, encErr)
	}
	return err
}

func childRun(ctx context.Context, spec childSpec, in *bufio.Reader, out io.Writer) (res *childResult, err error) {
	c, ok := findContender(spec.Contender, spec.FastBackoff)
	if !ok {
		return nil, fmt.Errorf("unknown contender %q", spec.Contender)
	}
	check, err := openSharedCheck(spec.SharedCheck)
	if err != nil {
		return nil, err
	}
	defer check.Close()
	b, err := newBench(ctx, spec.Addr)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	b.stallLimit = spec.StallLimit
	t := target{addr: spec.Addr, version: spec.Version, lease: spec.Lease, requests: &requestCounter{}}
	s, err := c.open(t)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, closeWithin(s, b.stallLimit)) }()

	if spec.Warmup > 0 {
		if _, err := b.loop(ctx, lockersFor(s, spec.Key+":warmup", spec.Goroutines), &inProcessCheck{}, spec.Key+":warmup:counter", time.Now().Add(spec.Warmup)); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	lockers := lockersFor(s, spec.Key, spec.Goroutines)
	if _, err := fmt.Fprintln(out, childReady); err != nil {
		return nil, err
	}
	line, err := in.ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("read deadline: %w", err)
	}
	deadline, err := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("deadline %q: %w", line, err)
	}
	requestsBefore := t.requests.Load()
	run, err := b.loop(ctx, lockers, check, spec.Key+":counter", time.Unix(0, deadline))
	if err != nil {
		return nil, err
	}
	return &childResult{
		Start:        run.start.UnixNano(),
		End:          run.end.UnixNano(),
		Waits:        nanos(run.waits),
		CutWaits:     nanos(run.cutWaits),
		PerGoroutine: run.perGoroutine,
		Requests:     t.requests.Load() - requestsBefore,
	}, nil
}

func lockersFor(s session, key string, n int) []locker {
	lockers := make([]locker, n)
	for i := range lockers {
		lockers[i] = s.Locker(key)
	}
	return lockers
}

func nanos(ds []time.Duration) []int64 {
	out := make([]int64, len(ds))
	for i, d := range ds {
		out[i] = int64(d)
	}
	return out
}

func durations(ns []int64) []time.Duration {
	out := make([]time.Duration, len(ns))
	for i, n := range ns {
		out[i] = time.Duration(n)
	}
	return out
}

// findContender looks a contender up by its exact name, among all and the
// bench's own self-check.
func findContender(name string, fastBackoff time.Duration) (contender, bool) {
	all := append(allContenders(fastBackoff), noLock)
	if i := indexOf(all, name); i >= 0 {
		return all[i], true
	}
	return contender{}, false
}
