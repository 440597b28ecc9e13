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
	"syscall"
	"time"

	"github.com/lockstep/lockstep/internal/sharedcheck"
)

// childEnv carries a child process's spec: with it set, the command (or
// the test binary) runs as one of the parent's processes.
const childEnv = "LOCKSYSTEMS_CHILD"

// The roles of a child process.
const (
	roleContend = "contend" // lock, mark, unlock in goroutines for a while
	roleHold    = "hold"    // when told, take one lock and keep it until told
	roleAcquire = "acquire" // when told, try for one lock within a bound
)

// childSpec is what a child process is told.
type childSpec struct {
	Role      string        `json:"role"`
	System    string        `json:"system"`
	Endpoints endpoints     `json:"endpoints"`
	Lease     time.Duration `json:"lease"`
	Shared    string        `json:"shared"` // the sharedcheck file

	// contend: goroutine g of process Index locks key (Index·G+g) mod Keys.
	Index      int           `json:"index,omitempty"`
	Goroutines int           `json:"goroutines,omitempty"`
	Keys       int           `json:"keys,omitempty"`
	Duration   time.Duration `json:"duration,omitempty"`

	// hold and acquire: the lock, and how long to try for it.
	Key   string        `json:"key,omitempty"`
	Bound time.Duration `json:"bound,omitempty"`
	// acquire: the deadline of each lock request within Bound (and
	// ProbeBound), retried after a failure, as etcd's and ZooKeeper's
	// clients are advised to run through a failover.
	Attempt time.Duration `json:"attempt,omitempty"`
	// acquire: first lock and unlock ProbeKey, a free lock, retrying
	// within ProbeBound, to time how long the system served no one.
	ProbeKey   string        `json:"probe_key,omitempty"`
	ProbeBound time.Duration `json:"probe_bound,omitempty"`
}

// An event is a line a child prints: what happened, and when.
type event struct {
	Name  string    `json:"event"`
	At    time.Time `json:"at"` // the wall clock: the parent compares it with its own
	Err   string    `json:"err,omitempty"`
	Probe *probed   `json:"probe,omitempty"` // the probe's failed attempts
}

// probed is what an acquisition's failed attempts were: those that ended
// at their deadline (the lock held, or no answer), and the others.
type probed struct {
	TimedOut      int           `json:"timed_out"`
	Failed        int           `json:"failed"`         // before their deadline
	Slowest       time.Duration `json:"slowest"`        // the longest failed attempt
	SlowestReason string        `json:"slowest_reason"` // its error
}

// String says what failed, for a cell.
func (p probed) String() string {
	s := fmt.Sprintf("%d ended at their deadline", p.TimedOut)
	if p.Failed > 0 {
		s += fmt.Sprintf(", %d failed before it", p.Failed)
	}
	if p.SlowestReason != "" {
		s += fmt.Sprintf(", the longest %.2f s: %s", p.Slowest.Seconds(), p.SlowestReason)
	}
	return s
}

// The events a child prints.
const (
	evReady       = "ready"        // connected, waiting for "go"
	evHeld        = "held"         // the holder has the lock
	evEntered     = "entered"      // the critical section is marked in the shared check
	evLeft        = "left"         // left it and unlocked (Err: the unlock's error)
	evProbed      = "probed"       // the free lock was taken (Err: never, within the bound)
	evAcquired    = "acquired"     // the lock was taken, and its critical section entered
	evNotAcquired = "not acquired" // not within the bound, every attempt having ended at its deadline: kept out
	evFailed      = "failed"       // not within the bound, and some attempts failed otherwise (Err, Probe: what)
)

// The words the parent sends a child, one a line.
const (
	wordGo    = "go"
	wordEnter = "enter"
	wordLeave = "leave"
)

// runChild is a child process: connect, then play spec's role, reading
// the parent's words from in and writing events to out.
func runChild(ctx context.Context, specJSON string, in io.Reader, out io.Writer) error {
	var spec childSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		return fmt.Errorf("child spec: %w", err)
	}
	sys, err := systemNamed(spec.System)
	if err != nil {
		return err
	}
	check, err := sharedcheck.Open(spec.Shared)
	if err != nil {
		return err
	}
	defer check.Close()
	conn, err := sys.connect(ctx, spec.Endpoints, spec.Lease)
	if err != nil {
		return err
	}
	defer conn.close()
	c := &childIO{words: bufio.NewScanner(in), events: json.NewEncoder(out)}
	switch spec.Role {
	case roleContend:
		return contend(ctx, spec, conn, check, c)
	case roleHold:
		return hold(ctx, spec, conn, check, c)
	case roleAcquire:
		return acquire(ctx, spec, conn, check, c)
	}
	return fmt.Errorf("no role %q", spec.Role)
}

// childIO is a child's side of its pipes.
type childIO struct {
	words  *bufio.Scanner
	events *json.Encoder
}

func (c *childIO) emit(name string, err error) error { return c.emitAt(name, time.Now(), err) }

func (c *childIO) emitAt(name string, at time.Time, err error) error {
	ev := event{Name: name, At: at}
	if err != nil {
		ev.Err = err.Error()
	}
	return c.events.Encode(ev)
}

// await reads words until want; io.EOF when the parent closed the pipe.
func (c *childIO) await(want string) error {
	for c.words.Scan() {
		if c.words.Text() == want {
			return nil
		}
	}
	return errors.Join(io.EOF, c.words.Err())
}

// readyForGo says the child is connected and waits for the parent's start.
func (c *childIO) readyForGo() error {
	if err := c.emit(evReady, nil); err != nil {
		return err
	}
	return c.await(wordGo)
}

// childProcess is the parent's handle on a child: its pipes and process.
type childProcess struct {
	cmd    *exec.Cmd
	words  io.WriteCloser
	events *bufio.Scanner
}

// startChild runs this executable as a child with spec; it is killed when
// ctx ends. Its owner calls stop.
func startChild(ctx context.Context, spec childSpec) (*childProcess, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	specJSON, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, self)
	cmd.Env = append(os.Environ(), childEnv+"="+string(specJSON))
	cmd.Stderr = os.Stderr
	words, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	events, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start a %s child: %w", spec.Role, err)
	}
	return &childProcess{cmd: cmd, words: words, events: bufio.NewScanner(events)}, nil
}

func (c *childProcess) send(word string) error {
	_, err := io.WriteString(c.words, word+"\n")
	return err
}

// decode reads the child's next line into v.
func (c *childProcess) decode(v any) error {
	if !c.events.Scan() {
		return fmt.Errorf("child %d said nothing more: %w", c.cmd.Process.Pid, errors.Join(io.ErrUnexpectedEOF, c.events.Err()))
	}
	return json.Unmarshal(c.events.Bytes(), v)
}

// next is the child's next event.
func (c *childProcess) next() (event, error) {
	var ev event
	err := c.decode(&ev)
	return ev, err
}

// expect is the child's next event, which must be want.
func (c *childProcess) expect(want string) (event, error) {
	ev, err := c.next()
	if err == nil && ev.Name != want {
		err = fmt.Errorf("child %d: %q (%s), want %q", c.cmd.Process.Pid, ev.Name, ev.Err, want)
	}
	return ev, err
}

func (c *childProcess) signal(sig syscall.Signal) error { return c.cmd.Process.Signal(sig) }

// kill ends the child with SIGKILL, as a crash would, and reaps it.
func (c *childProcess) kill() {
	_ = c.cmd.Process.Kill()
	_ = c.cmd.Wait()
}

// wait closes the child's stdin, which ends a child that waits for words,
// and reaps it.
func (c *childProcess) wait() error {
	_ = c.words.Close()
	return c.cmd.Wait()
}

// stop kills the child if it still runs: what its owner defers.
func (c *childProcess) stop() {
	if c.cmd.ProcessState == nil {
		_ = c.signal(syscall.SIGCONT) // a stopped child dies all the same; tidier
		c.kill()
	}
}

// startBoth starts a holder and another process side by side, both
// connected and ready once it returns; the caller stops both.
func startBoth(ctx context.Context, holderSpec, otherSpec childSpec) (holder, other *childProcess, err error) {
	holderSpec.Role, otherSpec.Role = roleHold, roleAcquire
	if holder, err = startChild(ctx, holderSpec); err != nil {
		return nil, nil, err
	}
	if other, err = startChild(ctx, otherSpec); err != nil {
		holder.stop()
		return nil, nil, err
	}
	for _, c := range []*childProcess{holder, other} {
		if _, err = c.expect(evReady); err != nil {
			holder.stop()
			other.stop()
			return nil, nil, err
		}
	}
	return holder, other, nil
}

// startLeaseTest starts a holder on spec, whose lease is the one under
// test, and the other process on spec with the steady lease: that one must
// not expire while it waits on a loaded machine.
func startLeaseTest(ctx context.Context, spec childSpec) (holder, other *childProcess, err error) {
	otherSpec := spec
	otherSpec.Lease = steadyLease
	return startBoth(ctx, spec, otherSpec)
}

// take has the holder take its lock.
func take(holder *childProcess) error {
	if err := holder.send(wordGo); err != nil {
		return err
	}
	_, err := holder.expect(evHeld)
	return err
}

// leave ends a child's critical section and waits for it to unlock and exit.
func leave(c *childProcess) error {
	if err := c.send(wordLeave); err != nil {
		return err
	}
	if _, err := c.expect(evLeft); err != nil {
		return err
	}
	return c.wait()
}

// hold connects, says it is ready, on "go" takes spec.Key, says so, and
// keeps it: "enter" marks its critical section in the shared check — as a
// holder that believes it holds, after any pause — and "leave" ends it and
// unlocks.
func hold(ctx context.Context, spec childSpec, conn connection, check *sharedcheck.Check, c *childIO) error {
	l, err := conn.newLocker()
	if err != nil {
		return err
	}
	defer l.close()
	if err := c.readyForGo(); err != nil {
		return err
	}
	lockCtx, cancel := context.WithTimeout(ctx, spec.Bound)
	unlock, err := l.lock(lockCtx, spec.Key)
	cancel()
	if err != nil {
		return fmt.Errorf("hold %s: %w", spec.Key, err)
	}
	if err := c.emit(evHeld, nil); err != nil {
		return err
	}
	if err := c.await(wordEnter); err != nil {
		return err
	}
	return c.inside(ctx, check, evEntered, unlock, spec.Bound)
}

// acquire connects, says it is ready, and on "go" tries for spec.Key
// within spec.Bound (after the probe, if any); once it has the lock it
// marks its critical section until "leave".
func acquire(ctx context.Context, spec childSpec, conn connection, check *sharedcheck.Check, c *childIO) error {
	l, err := conn.newLocker()
	if err != nil {
		return err
	}
	defer l.close()
	if err := c.readyForGo(); err != nil {
		return err
	}
	if spec.ProbeKey != "" {
		unlock, attempts, err := tryFor(ctx, l, spec.ProbeKey, spec.ProbeBound, spec.Attempt)
		ev := event{Name: evProbed, At: time.Now(), Probe: &attempts}
		if err == nil {
			err = unlock(ctx)
		}
		if err != nil {
			ev.Err = err.Error()
		}
		if err := c.events.Encode(ev); err != nil {
			return err
		}
	}
	unlock, attempts, err := tryFor(ctx, l, spec.Key, spec.Bound, spec.Attempt)
	switch {
	case err != nil && attempts.Failed == 0:
		return c.emit(evNotAcquired, err)
	case err != nil:
		return c.events.Encode(event{Name: evFailed, At: time.Now(), Err: err.Error(), Probe: &attempts})
	}
	return c.inside(ctx, check, evAcquired, unlock, spec.Bound)
}

// inside marks the child's critical section in the shared check, says
// so with ev, and on "leave" ends it and unlocks within bound.
func (c *childIO) inside(ctx context.Context, check *sharedcheck.Check, ev string, unlock func(context.Context) error, bound time.Duration) error {
	check.Enter(0)
	if err := c.emit(ev, nil); err != nil {
		return err
	}
	if err := c.await(wordLeave); err != nil {
		return err
	}
	check.Leave(0)
	return c.emit(evLeft, unlockWithin(ctx, unlock, bound))
}

// tryFor locks key with requests of at most each (none: bound), each
// retried 20 ms after it failed, until one succeeds or bound passes, and
// says what the attempts that failed were.
func tryFor(ctx context.Context, l locker, key string, bound, each time.Duration) (func(context.Context) error, probed, error) {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	if each == 0 {
		each = bound
	}
	var p probed
	for {
		start := time.Now()
		attempt, cancelAttempt := context.WithTimeout(ctx, each)
		deadline, _ := attempt.Deadline()
		unlock, err := l.lock(attempt, key)
		// A client that puts the deadline on its socket (go-redis) can
		// fail with an i/o timeout a moment before the context's own
		// timer fires: that attempt too ended at its deadline.
		timedOut := attempt.Err() != nil || time.Until(deadline) < 10*time.Millisecond
		cancelAttempt()
		if err == nil {
			return unlock, p, nil
		}
		if timedOut {
			p.TimedOut++
		} else {
			p.Failed++
		}
		if took := time.Since(start); took > p.Slowest {
			p.Slowest, p.SlowestReason = took, err.Error()
		}
		select {
		case <-ctx.Done():
			return nil, p, fmt.Errorf("no lock within %v: %w", bound, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func unlockWithin(ctx context.Context, unlock func(context.Context) error, bound time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	return unlock(ctx)
}
