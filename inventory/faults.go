package inventory

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// maxFaultDuration bounds every duration knob: a workshop fault, not a way
// to park requests forever.
const maxFaultDuration = time.Minute

// Faults are the knobs that make a stage's defect show. They are global:
// stored in Redis and followed by every replica, so a PUT through a load
// balancer reaches all of them.
type Faults struct {
	// Work is the business work between reading and writing the stock; with
	// WorkMax > Work each sale draws uniformly from [Work, WorkMax].
	Work, WorkMax time.Duration
	// SlowRatio of the sales take Slow instead.
	SlowRatio float64
	Slow      time.Duration
	// LockTTL overrides the stage's lock lease: the TTL of setnx-expire and
	// uuid-lua, the watchdog timeout of watchdog, segmented and redlock.
	// Zero keeps the article default.
	LockTTL time.Duration
	// CrashHoldingLock makes the next replica that acquires the stage's lock
	// exit at once, like kill -9; the fault disarms itself when claimed. On
	// the order stages the replica exits where a crash costs most: after
	// the stock deduction, before the order insert.
	CrashHoldingLock bool
	// PauseBeforeWrite makes the next replica that reaches the stock write
	// stop itself (SIGSTOP) just before it, after every check its lock makes:
	// a stop-the-world pause at the worst moment. Someone else must send
	// SIGCONT (the workshop does). It disarms itself when claimed.
	PauseBeforeWrite bool
	// TrackHolders counts the sales inside their critical section, per SKU
	// and replica, and keeps the largest number seen at once for the audit
	// (max_holders). It costs two scripts per sale, so it is off by default.
	TrackHolders bool
	// WaitReplicas makes the watchdog lock WAIT after each acquisition until
	// that many replicas have it, for at most WaitTimeout, and give it up
	// otherwise (lock.WithWaitReplicas); 0 leaves replication asynchronous.
	WaitReplicas int
	WaitTimeout  time.Duration
	// Fence makes the stock read and write of the etcd and zookeeper stages
	// check the lock's fencing token (the key's create revision, the node's
	// czxid) as fenced checks its own: a holder whose lease or session ran
	// out cannot write back what it read. Off, the lock alone guards the
	// stock, as most deploy it.
	Fence bool
}

// maxWaitReplicas bounds the wait_replicas knob.
const maxWaitReplicas = 16

// faultsJSON is the wire form of Faults (and of its Redis hash): durations
// as Go duration strings.
type faultsJSON struct {
	Work             string  `json:"work"`
	WorkMax          string  `json:"work_max"`
	SlowRatio        float64 `json:"slow_ratio"`
	Slow             string  `json:"slow"`
	LockTTL          string  `json:"lock_ttl"`
	CrashHoldingLock bool    `json:"crash_holding_lock"`
	PauseBeforeWrite bool    `json:"pause_before_write"`
	TrackHolders     bool    `json:"track_holders"`
	WaitReplicas     int     `json:"wait_replicas"`
	WaitTimeout      string  `json:"wait_timeout"`
	Fence            bool    `json:"fence"`
}

// MarshalJSON writes the SPEC's faults body.
func (f Faults) MarshalJSON() ([]byte, error) {
	return json.Marshal(faultsJSON{
		Work:             f.Work.String(),
		WorkMax:          f.WorkMax.String(),
		SlowRatio:        f.SlowRatio,
		Slow:             f.Slow.String(),
		LockTTL:          f.LockTTL.String(),
		CrashHoldingLock: f.CrashHoldingLock,
		PauseBeforeWrite: f.PauseBeforeWrite,
		TrackHolders:     f.TrackHolders,
		WaitReplicas:     f.WaitReplicas,
		WaitTimeout:      f.WaitTimeout.String(),
		Fence:            f.Fence,
	})
}

// UnmarshalJSON reads the SPEC's faults body strictly (an unknown field is
// an error, so a typo cannot silently mean "no fault"); absent fields are
// zero, and the result is validated.
func (f *Faults) UnmarshalJSON(b []byte) error {
	var w faultsJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return fmt.Errorf("%w: faults: %w", ErrInvalid, err)
	}
	parsed, err := w.faults()
	if err != nil {
		return err
	}
	*f = parsed
	return nil
}

func (w faultsJSON) faults() (Faults, error) {
	var f Faults
	for _, d := range []struct {
		name string
		in   string
		out  *time.Duration
	}{
		{"work", w.Work, &f.Work},
		{"work_max", w.WorkMax, &f.WorkMax},
		{"slow", w.Slow, &f.Slow},
		{"lock_ttl", w.LockTTL, &f.LockTTL},
		{"wait_timeout", w.WaitTimeout, &f.WaitTimeout},
	} {
		if d.in == "" {
			continue
		}
		v, err := time.ParseDuration(d.in)
		if err != nil {
			return Faults{}, fmt.Errorf("%w: %s: %w", ErrInvalid, d.name, err)
		}
		*d.out = v
	}
	f.SlowRatio, f.CrashHoldingLock = w.SlowRatio, w.CrashHoldingLock
	f.PauseBeforeWrite, f.TrackHolders, f.WaitReplicas = w.PauseBeforeWrite, w.TrackHolders, w.WaitReplicas
	f.Fence = w.Fence
	return f, f.Validate()
}

// Validate reports knobs out of range.
func (f Faults) Validate() error {
	for name, d := range map[string]time.Duration{"work": f.Work, "work_max": f.WorkMax, "slow": f.Slow, "lock_ttl": f.LockTTL, "wait_timeout": f.WaitTimeout} {
		if d < 0 || d > maxFaultDuration {
			return fmt.Errorf("%w: %s must be within [0, %v], got %v", ErrInvalid, name, maxFaultDuration, d)
		}
	}
	switch {
	case f.WorkMax != 0 && f.WorkMax < f.Work:
		return fmt.Errorf("%w: work_max %v is below work %v", ErrInvalid, f.WorkMax, f.Work)
	case !(f.SlowRatio >= 0 && f.SlowRatio <= 1): // also rejects NaN
		return fmt.Errorf("%w: slow_ratio must be within [0, 1], got %v", ErrInvalid, f.SlowRatio)
	case f.LockTTL != 0 && f.LockTTL < time.Millisecond:
		return fmt.Errorf("%w: lock_ttl must be at least 1ms, got %v", ErrInvalid, f.LockTTL)
	case f.WaitReplicas < 0 || f.WaitReplicas > maxWaitReplicas:
		return fmt.Errorf("%w: wait_replicas must be within [0, %d], got %d", ErrInvalid, maxWaitReplicas, f.WaitReplicas)
	// WAIT with a zero timeout blocks forever: the timeout comes with the count.
	case (f.WaitReplicas > 0) != (f.WaitTimeout >= time.Millisecond):
		return fmt.Errorf("%w: wait_replicas and a wait_timeout of at least 1ms go together, got %d and %v", ErrInvalid, f.WaitReplicas, f.WaitTimeout)
	}
	return nil
}

// workTime draws the business work of one sale.
func (f Faults) workTime() time.Duration {
	if f.SlowRatio > 0 && rand.Float64() < f.SlowRatio {
		return f.Slow
	}
	if f.WorkMax > f.Work {
		return f.Work + rand.N(f.WorkMax-f.Work+1)
	}
	return f.Work
}

// lockTTL is the lease to use: the override, else the stage's default.
func (f Faults) lockTTL(def time.Duration) time.Duration {
	if f.LockTTL > 0 {
		return f.LockTTL
	}
	return def
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// faultsChannel announces that a stage's faults changed; the message is the
// stage id.
const faultsChannel = "lockstep:faults"

// faultBook keeps every stage's faults in Redis (a hash per stage) and a
// copy in process that sales read without a round trip. It follows changes
// made through other replicas by pub/sub, and re-reads everything
// periodically in case a message was missed (or Redis lost its data).
type faultBook struct {
	rdb     redis.UniversalClient
	log     *slog.Logger
	current map[string]*atomic.Pointer[Faults] // keys fixed at construction

	// writes orders what is stored in current: a reload whose read began
	// before this replica changed a stage (set, claim) must not store what
	// it read over the newer copy. writeGen counts those changes per stage.
	writes   sync.Mutex
	writeGen map[string]uint64

	stop context.CancelFunc
	done sync.WaitGroup
}

func newFaultBook(rdb redis.UniversalClient, log *slog.Logger, stages []string, refresh time.Duration) *faultBook {
	b := &faultBook{rdb: rdb, log: log, current: make(map[string]*atomic.Pointer[Faults], len(stages)), writeGen: map[string]uint64{}}
	for _, id := range stages {
		b.current[id] = new(atomic.Pointer[Faults])
		b.current[id].Store(&Faults{})
	}
	ctx, stop := context.WithCancel(context.Background())
	b.stop = stop
	b.done.Go(func() { b.follow(ctx, refresh) })
	return b
}

func faultsKey(stage string) string { return "lockstep:" + stage + ":faults" }

func (b *faultBook) get(stage string) Faults { return *b.current[stage].Load() }

// set stores f for stage in Redis, announces it, and applies it here.
func (b *faultBook) set(ctx context.Context, stage string, f Faults) error {
	key := faultsKey(stage)
	fields := map[string]any{
		"work":               f.Work.String(),
		"work_max":           f.WorkMax.String(),
		"slow_ratio":         strconv.FormatFloat(f.SlowRatio, 'g', -1, 64),
		"slow":               f.Slow.String(),
		"lock_ttl":           f.LockTTL.String(),
		"crash_holding_lock": strconv.FormatBool(f.CrashHoldingLock),
		"pause_before_write": strconv.FormatBool(f.PauseBeforeWrite),
		"track_holders":      strconv.FormatBool(f.TrackHolders),
		"wait_replicas":      strconv.Itoa(f.WaitReplicas),
		"wait_timeout":       f.WaitTimeout.String(),
		"fence":              strconv.FormatBool(f.Fence),
	}
	// Stored and announced in one transaction: one round trip, and no
	// stored change that the other replicas are not told of.
	if _, err := b.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, key)
		p.HSet(ctx, key, fields)
		p.Publish(ctx, faultsChannel, stage)
		return nil
	}); err != nil {
		return unavailable("store faults", err)
	}
	b.write(stage, f)
	return nil
}

// Faults that fire once, on the one replica that claims them.
const (
	crashFault = "crash_holding_lock"
	pauseFault = "pause_before_write"
)

// claim disarms one of stage's fire-once faults in Redis; true for the one
// replica that disarmed it.
func (b *faultBook) claim(ctx context.Context, stage, fault string) (bool, error) {
	n, err := claimFaultScript.Run(ctx, b.rdb, []string{faultsKey(stage)}, fault).Int()
	if err != nil {
		return false, unavailable("claim "+fault+" fault", err)
	}
	b.writes.Lock()
	defer b.writes.Unlock()
	f := b.get(stage)
	switch fault {
	case crashFault:
		f.CrashHoldingLock = false
	case pauseFault:
		f.PauseBeforeWrite = false
	}
	b.writeGen[stage]++
	b.current[stage].Store(&f)
	return n == 1, nil
}

// write applies a change this replica made to stage in Redis.
func (b *faultBook) write(stage string, f Faults) {
	b.writes.Lock()
	defer b.writes.Unlock()
	b.writeGen[stage]++
	b.current[stage].Store(&f)
}

// follow keeps the copies current until ctx is cancelled.
func (b *faultBook) follow(ctx context.Context, refresh time.Duration) {
	sub := b.rdb.Subscribe(ctx, faultsChannel)
	defer sub.Close()
	messages := sub.Channel()
	tick := time.NewTicker(refresh)
	defer tick.Stop()
	b.reload(ctx, b.stageIDs()...)
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-messages:
			if _, known := b.current[m.Payload]; known {
				b.reload(ctx, m.Payload)
			}
		case <-tick.C:
			b.reload(ctx, b.stageIDs()...)
		}
	}
}

func (b *faultBook) stageIDs() []string {
	ids := make([]string, 0, len(b.current))
	for id := range b.current {
		ids = append(ids, id)
	}
	return ids
}

// reload reads the stages' faults from Redis and applies what it read.
func (b *faultBook) reload(ctx context.Context, stages ...string) {
	if snap, ok := b.read(ctx, stages...); ok {
		b.apply(snap)
	}
}

// faultsSnapshot is what one read found, per stage.
type faultsSnapshot map[string]faultsRead

// faultsRead is one stage's faults as read, and the number of this
// replica's own changes to them made before the read began.
type faultsRead struct {
	faults Faults
	gen    uint64
}

// read reads the stages' faults from Redis; a stage without a hash has no
// faults.
func (b *faultBook) read(ctx context.Context, stages ...string) (faultsSnapshot, bool) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	b.writes.Lock()
	gens := make(map[string]uint64, len(stages))
	for _, id := range stages {
		gens[id] = b.writeGen[id]
	}
	b.writes.Unlock()
	cmds := make([]*redis.MapStringStringCmd, len(stages))
	_, err := b.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range stages {
			cmds[i] = p.HGetAll(ctx, faultsKey(id))
		}
		return nil
	})
	if err != nil {
		if ctx.Err() == nil {
			b.log.Debug("faults: reload failed", "err", err)
		}
		return nil, false
	}
	snap := make(faultsSnapshot, len(stages))
	for i, id := range stages {
		f, err := parseFaultsHash(cmds[i].Val())
		if err != nil {
			b.log.Warn("faults: ignoring a bad faults hash", "stage", id, "err", err)
			continue
		}
		snap[id] = faultsRead{f, gens[id]}
	}
	return snap, true
}

// apply stores what a read found, except for stages this replica changed
// since the read began: their copy is newer, and the change's announcement
// brings another read.
func (b *faultBook) apply(snap faultsSnapshot) {
	b.writes.Lock()
	defer b.writes.Unlock()
	for id, s := range snap {
		if b.writeGen[id] == s.gen {
			b.current[id].Store(&s.faults)
		}
	}
}

func parseFaultsHash(h map[string]string) (Faults, error) {
	w := faultsJSON{Work: h["work"], WorkMax: h["work_max"], Slow: h["slow"], LockTTL: h["lock_ttl"], WaitTimeout: h["wait_timeout"]}
	if r := h["slow_ratio"]; r != "" {
		v, err := strconv.ParseFloat(r, 64)
		if err != nil {
			return Faults{}, fmt.Errorf("slow_ratio %q: %w", r, err)
		}
		w.SlowRatio = v
	}
	if n := h["wait_replicas"]; n != "" {
		v, err := strconv.Atoi(n)
		if err != nil {
			return Faults{}, fmt.Errorf("wait_replicas %q: %w", n, err)
		}
		w.WaitReplicas = v
	}
	w.CrashHoldingLock = h[crashFault] == "true"
	w.PauseBeforeWrite = h[pauseFault] == "true"
	w.TrackHolders = h["track_holders"] == "true"
	w.Fence = h["fence"] == "true"
	return w.faults()
}

func (b *faultBook) close() {
	b.stop()
	b.done.Wait()
}
