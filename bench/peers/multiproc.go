package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// shape is how a multi-process run's contenders are spread: procs processes
// of goroutines goroutines each, all on one key.
type shape struct {
	Procs      int `json:"procs"`
	Goroutines int `json:"goroutines"`
}

func (s shape) String() string { return fmt.Sprintf("%dx%d", s.Procs, s.Goroutines) }

// parseShapes reads -procs: a comma-separated list of NxG (N processes of G
// goroutines) or N alone (N processes of defaultGoroutines).
func parseShapes(list string, defaultGoroutines int) ([]shape, error) {
	var shapes []shape
	for item := range strings.SplitSeq(list, ",") {
		item = strings.TrimSpace(item)
		procs, goroutines, hasG := strings.Cut(item, "x")
		sh := shape{Goroutines: defaultGoroutines}
		var err error
		if sh.Procs, err = strconv.Atoi(procs); err != nil || sh.Procs < 1 {
			return nil, fmt.Errorf("-procs %q: want N or NxG with N, G ≥ 1", item)
		}
		if hasG {
			if sh.Goroutines, err = strconv.Atoi(goroutines); err != nil || sh.Goroutines < 1 {
				return nil, fmt.Errorf("-procs %q: want N or NxG with N, G ≥ 1", item)
			}
		}
		shapes = append(shapes, sh)
	}
	return shapes, nil
}

// child is one running contending process.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string // its stdout, line by line; closed at EOF
}

// startupLimit bounds how long children may take to start, connect and
// warm up beyond the warm-up itself.
const startupLimit = 30 * time.Second

// measureProcs runs one contender as sh.Procs processes of this command
// (each a childSpec), contending for one key from one deadline to the next,
// and gathers their figures. The parent reads INFO before and after and the
// shared overlap check; the children only lock, INCR and unlock.
func (b *bench) measureProcs(ctx context.Context, c contender, t target, cfg config, sh shape) result {
	r := result{Name: c.name, About: c.about, Peer: c.peer}
	run, err := b.runProcs(ctx, c, t, cfg, sh)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	r.Contended = summarizeContended(run)
	r.Contended.Processes = len(run.perProcess)
	r.Contended.PerProcess = run.perProcess
	r.Contended.ProcessFairness = jainIndex(run.perProcess)
	return r
}

func (b *bench) runProcs(ctx context.Context, c contender, t target, cfg config, sh shape) (_ *contendedRun, err error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("own executable: %w", err)
	}
	dir, err := os.MkdirTemp("", "lockstep-peers-check-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	spec := childSpec{
		Contender: c.name, Addr: t.addr, Version: t.version, Lease: t.lease, FastBackoff: cfg.fastBackoff,
		Key: fmt.Sprintf("peers:%s:%s", c.name, sh), Goroutines: sh.Goroutines, Warmup: cfg.warmup,
		StallLimit: b.stallLimit, SharedCheck: filepath.Join(dir, "check"),
	}
	check, err := createSharedCheck(spec.SharedCheck)
	if err != nil {
		return nil, err
	}
	defer check.Close()
	counterKey := spec.Key + ":counter"
	if err := b.work.Del(ctx, counterKey).Err(); err != nil {
		return nil, fmt.Errorf("reset counter: %w", err)
	}
	specJSON, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}

	children := make([]*child, 0, sh.Procs)
	defer func() {
		for _, ch := range children {
			err = errors.Join(err, ch.stop())
		}
	}()
	for range sh.Procs {
		ch, err := startChild(ctx, exe, string(specJSON))
		if err != nil {
			return nil, err
		}
		children = append(children, ch)
	}
	for i, ch := range children {
		line, err := ch.next(cfg.warmup + startupLimit)
		if err != nil || line != childReady {
			return nil, fmt.Errorf("process %d of %d did not get ready: %q %w", i+1, sh.Procs, line, err)
		}
	}
	before, err := b.stats(ctx)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(cfg.duration)
	for _, ch := range children {
		if _, err := fmt.Fprintf(ch.stdin, "%d\n", deadline.UnixNano()); err != nil {
			return nil, fmt.Errorf("send deadline: %w", err)
		}
	}
	run := &contendedRun{}
	var start, end int64
	for i, ch := range children {
		line, err := ch.next(time.Until(deadline) + b.stallLimit + 5*time.Second)
		if err != nil {
			return nil, fmt.Errorf("process %d of %d: %w", i+1, sh.Procs, err)
		}
		var res childResult
		if err := json.Unmarshal([]byte(line), &res); err != nil {
			return nil, fmt.Errorf("process %d of %d: report %q: %w", i+1, sh.Procs, line, err)
		}
		if res.Error != "" {
			return nil, fmt.Errorf("process %d of %d: %s", i+1, sh.Procs, res.Error)
		}
		if start == 0 || res.Start < start {
			start = res.Start
		}
		end = max(end, res.End)
		run.waits = append(run.waits, durations(res.Waits)...)
		run.cutWaits = append(run.cutWaits, durations(res.CutWaits)...)
		run.perGoroutine = append(run.perGoroutine, res.PerGoroutine...)
		run.perProcess = append(run.perProcess, int64(len(res.Waits)))
		run.requests += res.Requests
	}
	run.elapsed = time.Duration(end - start)
	run.acquisitions = int64(len(run.waits))
	run.overlaps = check.overlaps()
	after, err := b.stats(ctx)
	if err != nil {
		return nil, err
	}
	run.commands = after.minus(before)
	if run.counter, err = b.counter(ctx, counterKey); err != nil {
		return nil, err
	}
	return run, nil
}

func startChild(ctx context.Context, exe, spec string) (*child, error) {
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), childEnv+"="+spec)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start contending process: %w", err)
	}
	ch := &child{cmd: cmd, stdin: stdin, lines: make(chan string, 2)}
	go func() { // ends at the child's EOF, at the latest when stop kills it
		defer close(ch.lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<30) // a report carries every wait
		for sc.Scan() {
			ch.lines <- sc.Text()
		}
	}()
	return ch, nil
}

// next is the child's next line, waiting at most limit.
func (ch *child) next(limit time.Duration) (string, error) {
	select {
	case line, ok := <-ch.lines:
		if !ok {
			return "", errors.New("exited without a report (its stderr is above)")
		}
		return line, nil
	case <-time.After(limit):
		return "", fmt.Errorf("stalled: no report %v after it was due", limit)
	}
}

// stop ends the child: at once when it has not finished (a stalled or
// failed run), else by waiting for its exit.
func (ch *child) stop() error {
	_ = ch.stdin.Close()
	exited := make(chan error, 1)
	go func() {
		for range ch.lines { // let a child blocked on its stdout finish
		}
		exited <- ch.cmd.Wait()
	}()
	select {
	case err := <-exited:
		return err
	case <-time.After(5 * time.Second):
		_ = ch.cmd.Process.Kill()
		return fmt.Errorf("contending process %d killed: %w", ch.cmd.Process.Pid, <-exited)
	}
}
