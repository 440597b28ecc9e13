package lock

// The randomized fault checker. Several Clients — goroutines of this test
// process and of child processes (the test binary run again) — lock, re-enter,
// unlock, cancel and close on a few locks of every kind, through go-redis
// clients built with default options (MaxRetries 3: a request whose
// connection broke is sent again), while a fault injector driven by one seed
// cuts connections after a script ran and before its reply (a release's
// more often), delays requests,
// replies and pub/sub messages, lets lease holders sleep past their lease,
// and wipes (FLUSHALL) or restarts Redis.
//
// Every process records, on CLOCK_MONOTONIC (one clock for every process of
// the machine), each held context's live interval — from the moment the
// acquisition returned to the moment its held context was seen Done, or its
// last Unlock was called if that came first — and each wait. The test then
// asserts what LockContext promises:
//
//   - no two live held contexts of one lock overlap (two readers may),
//     unless Redis was wiped or restarted in between and the earlier one
//     ended within the bound (with ErrLockLost, or an Unlock): a third of
//     the watchdog timeout plus a renewal's round trip for a watchdog hold,
//     its lease for a lease hold;
//   - an Unlock that returned nil released what it claimed: after an inner
//     level the owner's level is still in Redis, after the last one its held
//     context ended with ErrReleased and (FairMutex, FencedMutex, RWMutex) its
//     field is gone;
//   - an Unlock's answer says what it did: a last Unlock of a hold Redis
//     had (live when called, its lease not over, no wipe) does not say
//     ErrNotHeld, and an inner one leaves the owner's levels in Redis;
//   - Redis counts each owner's levels as its Client does (FairMutex,
//     FencedMutex, each RWMutex reader and writer: ckCount), after every
//     acquisition, re-entry, inner Unlock and pause of a live hold — a
//     re-sent request sets the count again, it never counts twice;
//   - a FencedMutex's tokens only grow, across wipes and restarts too;
//   - no waiter waits longer than ckWaitBound while the lock is free (a
//     fair or read-write waiter a fair-waiter timeout more: it may wait
//     behind a queued waiter that died until its place lapses): not
//     held by a live context, nor kept by what the design lets outlive one
//     (a closed Client's hold and queue place, an Unlock whose reply was
//     lost, the sleep of a waiter whose lock was wiped under it).
//
// An end is seen by a goroutine that waits on the held context, so it may be
// seen late: ckTolerance is that lag, and comparisons with such an end
// allow it. A last Unlock's call is recorded before it is made, while the
// held context is still live: that end is exact, and allows nothing.
//
// The seed fixes every worker's operations and the injector's schedule; the
// interleaving is the scheduler's, so a failing seed reproduces the failure
// often, not always. The test prints the seed and the command.
//
// TestLockCheckerFindsDefects (checker_proof_test.go) proves the checker
// can see what it guards: it runs it with defects put into the scripts —
// the release latch removed, the fencing counter starting over with Redis,
// a re-sent inner read release counted twice, a lease cut short — and
// wants each run to fail; TestCheckerOracle feeds the oracle made-up runs.
//
//	go test -race -run '^TestLockChecker$' ./lock/ -checker.seed=N -checker.time=10m
//	make check-lock CHECKER_TIME=10m

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sys/unix"

	"github.com/lockstep/lockstep/internal/childproc"
	"github.com/lockstep/lockstep/internal/faultproxy"
	"github.com/lockstep/lockstep/internal/redistest"
)

var (
	checkerSeed    = flag.Uint64("checker.seed", 0, "the lock checker's seed (env LOCK_CHECKER_SEED; 0: a new one)")
	checkerTime    = flag.Duration("checker.time", 0, "how long the lock checker runs (env LOCK_CHECKER_TIME; default 15s)")
	checkerProcs   = flag.Int("checker.procs", 2, "processes the lock checker's Clients run in (at least 2)")
	checkerClients = flag.Int("checker.clients", 2, "lock Clients per process of the lock checker")
	checkerWorkers = flag.Int("checker.workers", 3, "goroutines per lock Client of the lock checker")
	checkerKinds   = flag.String("checker.kinds", "mutex,fair,fenced,rw", "the lock kinds the lock checker runs, comma separated")
	checkerFault   = flag.String("checker.faults", "all", "the faults the lock checker injects, comma separated: "+strings.Join(ckAllFaults, ","))
)

// ckAllFaults are the checker's faults: replies cut after the script ran
// (and whole connections), replies and pub/sub messages delayed, requests
// delayed, Redis wiped, Redis restarted, Clients closed, holders paused
// past their lease.
var ckAllFaults = []string{"cut", "delay", "late", "wipe", "restart", "close", "pause"}

// ckFaultSet parses -checker.faults.
func ckFaultSet(list string) (map[string]bool, error) {
	set := map[string]bool{}
	if list == "all" {
		list = strings.Join(ckAllFaults, ",")
	}
	for _, f := range strings.Split(list, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		if !slices.Contains(ckAllFaults, f) {
			return nil, fmt.Errorf("-checker.faults: unknown fault %q (known: %s)", f, strings.Join(ckAllFaults, ","))
		}
		set[f] = true
	}
	return set, nil
}

const (
	ckDefaultTime = 15 * time.Second
	ckWatchdog    = 6 * time.Second // the Clients' watchdog timeout, and so a grant's lease
	ckFairTTL     = time.Second     // the Clients' fair-waiter timeout
	ckMaxLease    = 3 * time.Second
	ckMaxDelay    = 500 * time.Millisecond // the longest the proxy holds a chunk back
	// ckLateRenewal is the longest a watchdog renewal is held back: long
	// enough for its hold to be released and the lock taken again.
	ckLateRenewal = time.Second
	// ckTolerance is how late an end may be seen: a goroutine woken by a
	// held context on a loaded two-core machine under -race.
	ckTolerance = 400 * time.Millisecond
	// ckRenewal bounds a renewal's round trip under the injected faults: two
	// delays and go-redis's retries of a cut connection.
	ckRenewal = 2*ckMaxDelay + time.Second
	// ckWaitBound is the longest a waiter may wait while its lock is free: a
	// delayed wake-up message, a fair waiter's place refresh, a few round trips.
	ckWaitBound = 2500 * time.Millisecond
	// ckChildEnv carries a child process's ckSpec.
	ckChildEnv = "LOCK_CHECKER_CHILD"
)

// ckLocks are the checked locks: name and kind.
var ckLocks = [][2]string{
	{"ck-mutex-a", "mutex"}, {"ck-mutex-b", "mutex"}, {"ck-fair", "fair"}, {"ck-fenced", "fenced"}, {"ck-rw", "rw"},
}

// ckSpec is what one process of the checker runs.
type ckSpec struct {
	Addr    string // the fault proxy
	Seed    uint64
	Proc    int
	Clients int
	Workers int   // per Client
	Until   int64 // ckNow() at which no new operation starts
	Out     string
	Faults  map[string]bool
	Locks   [][2]string // name and kind
	// Mutations change the package's scripts (checker_proof_test.go).
	Mutations []ckMutation
}

// ckRecord is one line of a process's record file.
type ckRecord struct {
	Kind  string `json:"k"` // hold, wait, dead, close, bad, count
	Lock  string `json:"l,omitempty"`
	Owner string `json:"o,omitempty"`
	// hold: Start..End live, UnlockAt the last Unlock's call (0: none)
	Start    int64 `json:"s,omitempty"`
	End      int64 `json:"e,omitempty"`
	UnlockAt int64 `json:"u,omitempty"`
	// Called: the acquisition's call; Token: a fenced hold's token.
	Called int64 `json:"b,omitempty"`
	Token  int64 `json:"t,omitempty"`
	// LiveAtUnlock: the held context was live when the last Unlock was called.
	LiveAtUnlock bool   `json:"lu,omitempty"`
	Deadline     int64  `json:"d,omitempty"` // a lease hold's latest lease end
	Watchdog     bool   `json:"w,omitempty"`
	Shared       bool   `json:"r,omitempty"`
	Cause        string `json:"c,omitempty"`
	// UnlockErr is a hold's last Unlock's error: a loss it reports.
	UnlockErr string `json:"ue,omitempty"`
	// Levels: count, the owner's level count Redis had.
	Levels int    `json:"n,omitempty"`
	What   string `json:"x,omitempty"` // bad: what was wrong
}

func ckNow() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) // cannot fail with this clock id
	return ts.Nano()
}

func ckDur(d time.Duration) int64 { return int64(d) }

// ckRecorder appends records to a process's file.
type ckRecorder struct {
	mu  sync.Mutex
	enc *json.Encoder
	w   *bufio.Writer
	f   *os.File
}

func newCkRecorder(path string) (*ckRecorder, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	w := bufio.NewWriter(f)
	return &ckRecorder{enc: json.NewEncoder(w), w: w, f: f}, nil
}

func (r *ckRecorder) add(rec ckRecord) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = r.enc.Encode(rec) // a write error shows as missing records, then at close
}

func (r *ckRecorder) close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return errors.Join(r.w.Flush(), r.f.Close())
}

// ckClient is a lock Client and the go-redis client under it.
type ckClient struct {
	rdb *redis.Client
	c   *Client
}

func newCkClient(addr string) *ckClient {
	// Default options, MaxRetries included, on purpose.
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	return &ckClient{rdb: rdb, c: New(rdb, WithWatchdogTimeout(ckWatchdog), WithFairWaiterTimeout(ckFairTTL))}
}

// close closes as a program does on its way out: the lock Client, then (the
// usual defer order) the go-redis client.
func (cl *ckClient) close() {
	_ = cl.c.Close()
	_ = cl.rdb.Close()
}

// ckHandle is one owner of one checked lock.
type ckHandle struct {
	lock, key, field string
	shared           bool
	// fieldGoes: the owner's field leaves the hash with its last level (not
	// a Mutex: its Client's field stays when a level is passed in-process).
	fieldGoes bool
	// holdField names the field once acquired: a reader's is its hold's token.
	holdField func() string
	// watchdogLevel: a reentrant level without a lease asks for the
	// watchdog timeout (FairMutex, FencedMutex, RWMutex), not the hold's
	// lease (Mutex).
	watchdogLevel bool
	token         func() int64 // a FencedMutex's
	tryLock       func(ctx context.Context, wait, lease time.Duration) (context.Context, bool, error)
	unlock        func(ctx context.Context) error
}

func ckNewHandle(c *Client, lock, kind string, rng *rand.Rand) ckHandle {
	key, _ := lockKeys(lock)
	h := ckHandle{lock: lock, key: key, fieldGoes: true, watchdogLevel: kind != "mutex"}
	switch kind {
	case "mutex":
		m := c.Mutex(lock)
		h.field, h.fieldGoes, h.tryLock, h.unlock = c.id, false, m.TryLockContext, m.Unlock
	case "fair":
		m := c.FairMutex(lock)
		h.field, h.tryLock, h.unlock = m.ops.(*fairOps).owner, m.TryLockContext, m.Unlock
	case "fenced":
		m := c.FencedMutex(lock)
		h.field, h.tryLock, h.unlock, h.token = m.ops.owner, m.TryLockContext, m.Unlock, m.Token
	case "rw":
		rw := c.RWMutex(lock)
		side := rw.write
		if rng.IntN(3) > 0 {
			side, h.shared = rw.read, true
			h.holdField = func() string {
				side.mu.Lock()
				defer side.mu.Unlock()
				if side.hold == nil {
					return ""
				}
				return side.hold.token
			}
		} else {
			h.field = side.ops.(*writeOps).field
		}
		h.tryLock, h.unlock = side.TryLockContext, side.Unlock
	}
	return h
}

// ckProc is one process's part of a run.
type ckProc struct {
	spec    ckSpec
	rec     *ckRecorder
	clients []atomic.Pointer[ckClient]
	handles atomic.Int64
}

// runCkProc runs a process's Clients and workers until spec.Until, then
// closes its Clients.
func runCkProc(ctx context.Context, spec ckSpec) error {
	rec, err := newCkRecorder(spec.Out)
	if err != nil {
		return err
	}
	p := &ckProc{spec: spec, rec: rec, clients: make([]atomic.Pointer[ckClient], spec.Clients)}
	for i := range p.clients {
		p.clients[i].Store(newCkClient(spec.Addr))
	}
	var wg sync.WaitGroup
	for i := range spec.Clients * spec.Workers {
		rng := rand.New(rand.NewPCG(spec.Seed, uint64(spec.Proc)<<32|uint64(i)))
		wg.Go(func() { p.work(ctx, rng, i%spec.Clients) })
	}
	wg.Go(func() { p.closeClients(ctx, rand.New(rand.NewPCG(spec.Seed, uint64(spec.Proc)<<32|1<<31))) })
	wg.Wait()
	for i := range p.clients {
		p.clients[i].Load().close()
	}
	return rec.close()
}

// closeClients closes a random Client now and then, and puts a new one in
// its place: its holders' and waiters' operations end with ErrClosed.
func (p *ckProc) closeClients(ctx context.Context, rng *rand.Rand) {
	for p.spec.Faults["close"] {
		if !ckSleep(ctx, time.Duration(4000+rng.IntN(8000))*time.Millisecond) || ckNow() > p.spec.Until {
			return
		}
		old := p.clients[rng.IntN(len(p.clients))].Swap(newCkClient(p.spec.Addr))
		p.rec.add(ckRecord{Kind: "close", Start: ckNow()})
		old.close()
	}
}

func ckSleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func (p *ckProc) work(ctx context.Context, rng *rand.Rand, client int) {
	for ckNow() < p.spec.Until && ctx.Err() == nil {
		p.cycle(ctx, rng, p.clients[client].Load())
	}
}

// ckLease is a lease hold's lease, or 0 for a watchdog hold.
func ckLease(rng *rand.Rand) time.Duration {
	if rng.IntN(2) == 0 {
		return 0
	}
	return time.Duration(200+rng.IntN(int(ckMaxLease/time.Millisecond)-200)) * time.Millisecond
}

// ckExpected are the errors an operation may end with in normal use.
func ckExpected(err error) bool {
	return err == nil || errors.Is(err, ErrLockBusy) || errors.Is(err, ErrClosed) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

func ckCause(held context.Context) string {
	switch cause := context.Cause(held); {
	case errors.Is(cause, ErrReleased):
		return "released"
	case errors.Is(cause, ErrLockLost):
		return "lost"
	case errors.Is(cause, ErrClosed):
		return "closed"
	case cause == nil:
		return ""
	default:
		return cause.Error()
	}
}

// cycle acquires one lock in a random way and, when it did, holds it for a
// while with random reentrant levels and inner unlocks, then unlocks every
// level.
func (p *ckProc) cycle(ctx context.Context, rng *rand.Rand, cl *ckClient) {
	lk := p.spec.Locks[rng.IntN(len(p.spec.Locks))]
	h := ckNewHandle(cl.c, lk[0], lk[1], rng)
	owner := fmt.Sprintf("p%d-h%d", p.spec.Proc, p.handles.Add(1))
	lease := ckLease(rng)
	var wait time.Duration
	acqCtx, cancel := ctx, context.CancelFunc(func() {})
	switch rng.IntN(4) {
	case 0: // one attempt
	case 1:
		wait = time.Duration(rng.IntN(3000)) * time.Millisecond
	default: // Lock until a random deadline: a context cancellation
		wait = -1
		acqCtx, cancel = context.WithTimeout(ctx, time.Duration(300+rng.IntN(8000))*time.Millisecond)
	}
	start := ckNow()
	held, ok, err := h.tryLock(acqCtx, wait, lease)
	cancel()
	acquired := ckNow()
	if wait != 0 {
		p.rec.add(ckRecord{Kind: "wait", Lock: h.lock, Owner: owner, Start: start, End: acquired, Shared: h.shared, Cause: fmt.Sprint(ok)})
	}
	if !ckExpected(err) { // the attempt may hold the lock in Redis until its TTL
		p.rec.add(ckRecord{Kind: "dead", Lock: h.lock, Start: acquired, End: acquired + ckDur(ckWatchdog), What: err.Error()})
	}
	if !ok {
		return
	}
	if h.holdField != nil {
		h.field = h.holdField()
	}
	count := ckCount{h: h, held: held, owner: owner, called: start, want: 1}
	p.checkCount(ctx, &count, "its acquisition")
	hr := ckRecord{Kind: "hold", Lock: h.lock, Owner: owner, Start: acquired, Called: start, Shared: h.shared, Watchdog: lease == 0,
		What: fmt.Sprintf("lock(%v)", lease)}
	if h.token != nil {
		hr.Token = h.token()
	}
	if lease > 0 {
		p.checkLease(ctx, h, held, owner, start+ckDur(lease))
	}
	log := func(op string) { hr.What += fmt.Sprintf(" +%dms %s", (ckNow()-acquired)/1e6, op) }
	if lease > 0 {
		hr.Deadline = acquired + ckDur(lease)
	}
	done := make(chan struct{})
	go func() { // owned by cycle, which waits for it below
		defer close(done)
		<-held.Done()
		hr.End, hr.Cause = ckNow(), ckCause(held)
	}()

	// A reader goes deeper and changes level more often: a read hold's
	// count is the one a re-sent release has most ways to get wrong (every
	// read hold has its own level keys, and one reader's release looks at
	// every other reader's count).
	levels, maxLevels, steps := 1, 3, rng.IntN(5)
	if h.shared {
		maxLevels, steps = 4, 2+rng.IntN(6)
	}
	for ; steps > 0; steps-- {
		pause := time.Duration(rng.IntN(400)) * time.Millisecond
		if rng.IntN(8) == 0 { // a long critical section: the watchdog renews it
			pause = time.Duration(1000+rng.IntN(2000)) * time.Millisecond
		}
		if lease > 0 && rng.IntN(12) == 0 && p.spec.Faults["pause"] {
			pause = lease + 300*time.Millisecond // a holder paused past its lease
		}
		ckSleep(ctx, pause)
		p.checkCount(ctx, &count, "a pause") // nobody else changes it
		switch {
		case levels < maxLevels && rng.IntN(2) == 0:
			innerLease := ckLease(rng)
			_, ok, err := h.tryLock(ctx, 0, innerLease)
			log(fmt.Sprintf("re-enter(%v)=%v,%v", innerLease, ok, err))
			if ok && err == nil {
				levels++
				if lease > 0 {
					hr.Deadline = max(hr.Deadline, ckNow()+ckDur(h.levelLease(innerLease, lease)))
				}
			}
			count.done(levels, err, levels+1)
			p.checkCount(ctx, &count, fmt.Sprintf("a re-entry (%v, %v)", ok, err))
		case levels > 1:
			log("unlock=" + errString(p.unlockInner(ctx, h, held, owner, hr.Deadline, &count, levels-1)))
			levels--
		}
	}
	for ; levels > 1; levels-- {
		log("unlock=" + errString(p.unlockInner(ctx, h, held, owner, hr.Deadline, &count, levels-1)))
	}
	log("last unlock")
	hr.UnlockAt = ckNow()
	liveBefore := context.Cause(held) == nil
	hr.LiveAtUnlock = liveBefore
	err = h.unlock(ctx)
	unlocked := ckNow()
	if err != nil {
		hr.UnlockErr = err.Error()
	}
	if err != nil && liveBefore { // the lock may stay in Redis until its TTL
		p.rec.add(ckRecord{Kind: "dead", Lock: h.lock, Start: hr.UnlockAt, End: unlocked + ckDur(ckWatchdog), What: err.Error()})
	}
	// The hold was in Redis when this Unlock ran: its held context was live
	// when it was called, and a lease hold's lease, counted in Redis from
	// the acquisition's arrival (after start), had not run out when its
	// reply came. Unless Redis was wiped in between (checked by ckCheck),
	// it released the hold — it must not say it did not.
	if errors.Is(err, ErrNotHeld) && liveBefore && (lease == 0 || unlocked < start+ckDur(lease)) {
		p.rec.add(ckRecord{Kind: "bad", Lock: h.lock, Owner: owner, Start: acquired, End: unlocked,
			What: "the last Unlock of a hold Redis had (live, its lease not over) said: " + err.Error()})
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		p.rec.add(ckRecord{Kind: "bad", Lock: h.lock, Owner: owner, Start: unlocked, What: "held context still live 5s after its last Unlock"})
		<-done
	}
	p.rec.add(hr)
	if err == nil {
		p.checkReleased(ctx, h, held, owner, unlocked)
	}
}

// checkLease checks that Redis keeps a new lease hold at least until
// least, its acquisition's call plus its lease: Redis counts the lease
// from the request's arrival, which is later.
func (p *ckProc) checkLease(ctx context.Context, h ckHandle, held context.Context, owner string, least int64) {
	ttl, err := p.clients[0].Load().rdb.PTTL(ctx, h.key).Result()
	at := ckNow()
	// PTTL counts whole ms; the two clocks may disagree by as much.
	if err == nil && ttl > 0 && ckDur(ttl+2*time.Millisecond) < least-at && context.Cause(held) == nil {
		p.rec.add(ckRecord{Kind: "bad", Lock: h.lock, Owner: owner, Start: at,
			What: fmt.Sprintf("a new lease hold's lock has a TTL of %v, its lease runs %v more at least", ttl, time.Duration(least-at).Round(time.Millisecond))})
	}
}

// levelLease is a reentrant level's lease: its own, or when it asked for
// none the watchdog timeout or the hold's lease.
func (h ckHandle) levelLease(level, hold time.Duration) time.Duration {
	switch {
	case level > 0:
		return level
	case h.watchdogLevel:
		return ckWatchdog
	}
	return hold
}

// unlockInner releases an inner level, leaving left, and checks that the
// owner still holds its levels in Redis while its held context is live —
// exactly left of them, where Redis counts them per owner (count) — and (a
// lease hold, whose lease ends at deadline at the latest) that the lock's
// TTL was not cut below that lease.
func (p *ckProc) unlockInner(ctx context.Context, h ckHandle, held context.Context, owner string, deadline int64, count *ckCount, left int) error {
	err := h.unlock(ctx)
	// Not run, its count is still left+1.
	count.done(left, err, left+1)
	p.checkCount(ctx, count, fmt.Sprintf("an inner Unlock (%v)", err))
	if err != nil {
		return err
	}
	at := ckNow()
	if deadline > 0 {
		// The recorded deadline counts from the reply, Redis's lease from
		// the request's arrival: a reply delay apart at most.
		want := time.Duration(deadline-at) - ckMaxDelay - ckTolerance
		if ttl, err := p.clients[0].Load().rdb.PTTL(ctx, h.key).Result(); err == nil && ttl < want && context.Cause(held) == nil {
			p.rec.add(ckRecord{Kind: "bad", Lock: h.lock, Owner: owner, Start: at,
				What: fmt.Sprintf("an inner Unlock left the lock a TTL of %v while its live hold's lease runs %v more", ttl, time.Duration(deadline-at).Round(time.Millisecond))})
		}
	}
	if _, present, err := p.field(ctx, h); err != nil || present {
		return nil
	}
	// Gone from Redis: fine only if the held context ends (a lease ran out
	// or the lock was wiped, and the hold learns it).
	ckSleep(ctx, ckTolerance)
	if context.Cause(held) == nil {
		p.rec.add(ckRecord{Kind: "bad", Lock: h.lock, Owner: owner, Start: at,
			What: "an inner Unlock returned nil, the owner's levels are gone from Redis and its held context is live"})
	}
	return nil
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}

// checkReleased checks a last Unlock that returned nil.
func (p *ckProc) checkReleased(ctx context.Context, h ckHandle, held context.Context, owner string, at int64) {
	// A Close that came first ends the held context with ErrClosed; the
	// release may still have run.
	if cause := ckCause(held); cause != "released" && cause != "closed" {
		p.rec.add(ckRecord{Kind: "bad", Lock: h.lock, Owner: owner, Start: at,
			What: "the last Unlock returned nil but the held context ended with " + cause})
	}
	if !h.fieldGoes {
		return
	}
	if n, present, err := p.field(ctx, h); err == nil && present {
		p.rec.add(ckRecord{Kind: "bad", Lock: h.lock, Owner: owner, Start: at,
			What: fmt.Sprintf("the last Unlock returned nil but the owner's field is still in Redis (%d)", n)})
	}
}

// field reads the owner's level count in Redis, on a Client of the
// process, through the proxy (with its faults): present is false when
// the hash has no such field.
func (p *ckProc) field(ctx context.Context, h ckHandle) (n int, present bool, err error) {
	cl := p.clients[0].Load()
	n, err = cl.rdb.HGet(ctx, h.key, h.field).Int()
	if errors.Is(err, redis.Nil) {
		return 0, false, nil
	}
	return n, err == nil, err
}

// ckCount is the checker's model of one owner's level count in Redis, for
// the kinds that count each owner's levels in a field of its own (not a
// Mutex: its field is its Client's, whose handles pass it levels): the
// count the Client has, and the counts an operation that ended with an
// error may have left — it ran, or it did not.
type ckCount struct {
	h      ckHandle
	held   context.Context
	owner  string
	called int64 // the acquisition's call
	want   int
	may    []int
}

// done records an operation's end. Without an error Redis counts want:
// every script sets the count the Client sends, so one that ran twice (its
// reply lost, the request re-sent) leaves it too. With an error it may
// count want or unrun, the count had it not run.
func (c *ckCount) done(want int, err error, unrun int) {
	if err == nil {
		c.may = nil
	} else {
		c.may = append(c.may, unrun)
	}
	c.want = want
}

// checkCount wants Redis to count what c says for its owner, while the
// held context is live: once it ended the handle's next acquisition is a
// new hold, and what Redis lost (a wipe, a lease run out) is not this
// check's. A count that differs is a "count" record.
func (p *ckProc) checkCount(ctx context.Context, c *ckCount, after string) {
	if !c.h.fieldGoes || context.Cause(c.held) != nil {
		return
	}
	n, present, err := p.field(ctx, c.h)
	if err != nil || !present || n == c.want || slices.Contains(c.may, n) || context.Cause(c.held) != nil {
		return
	}
	p.rec.add(ckRecord{Kind: "count", Lock: c.h.lock, Owner: c.owner, Start: c.called, End: ckNow(), Levels: n,
		What: fmt.Sprintf("after %s Redis counts %d levels for a live hold whose Client counts %d (or one of %v)", after, n, c.want, c.may)})
}

// ckFaults is the proxy's policy, from the run's seed.
type ckFaults struct {
	on  map[string]bool
	mu  sync.Mutex
	rng *rand.Rand
	// releases are the SHA1s of the unlock scripts, whose replies are cut
	// more often: a release run twice is where the unknown-outcome design
	// is most easily broken (its latch, its level count). A read release,
	// the rarest (two thirds of one lock's holds), the most often: close to
	// half of them, so that a run sees a few inner ones run twice. Not
	// release.lua: a waiter's leave that lost its reply keeps a grant for
	// a lease (doc.go), a wait the checker would report.
	releases            [][]byte
	readRelease         []byte
	cuts, delays, lates atomic.Int64
	// inFlight are the late requests: when each reached the proxy and
	// when it was let through, per lock it names ("late" records).
	inFlight []ckRecord
}

func newCkFaults(seed uint64, on map[string]bool) *ckFaults {
	f := &ckFaults{on: on, rng: rand.New(rand.NewPCG(seed, 0))}
	for _, s := range []*redis.Script{unlockScript, fairUnlockScript, readUnlockScript, writeUnlockScript} {
		f.releases = append(f.releases, []byte(s.Hash()))
	}
	f.readRelease = []byte(readUnlockScript.Hash())
	return f
}

// cutRate is how often, per 1000, a script's reply is cut.
func (f *ckFaults) cutRate(request []byte) int {
	if bytes.Contains(request, f.readRelease) {
		return 450
	}
	for _, h := range f.releases {
		if bytes.Contains(request, h) {
			return 200
		}
	}
	return 30
}

func (f *ckFaults) roll(per1000 int, most time.Duration) (bool, time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rng.IntN(1000) >= per1000 {
		return false, 0
	}
	return true, time.Duration(f.rng.Int64N(int64(most)))
}

func ckScript(chunk []byte) bool {
	return bytes.Contains(chunk, []byte("evalsha")) || bytes.Contains(chunk, []byte("\r\neval\r\n"))
}

func (f *ckFaults) Request(chunk []byte) time.Duration {
	if !ckScript(chunk) || !f.on["late"] {
		return 0
	}
	renewal := bytes.Contains(chunk, []byte(renewScript.Hash())) || bytes.Contains(chunk, []byte(readRenewScript.Hash()))
	if ok, d := f.roll(150, ckLateRenewal); ok && renewal { // a renewal that arrives late
		return f.late(chunk, d)
	}
	if ok, d := f.roll(30, ckMaxDelay); ok { // a request that arrives late
		return f.late(chunk, d)
	}
	return 0
}

// late records a request held back for d.
func (f *ckFaults) late(chunk []byte, d time.Duration) time.Duration {
	f.lates.Add(1)
	now := ckNow()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, l := range ckLocks {
		if bytes.Contains(chunk, []byte(l[0])) {
			f.inFlight = append(f.inFlight, ckRecord{Kind: "late", Lock: l[0], Start: now, End: now + ckDur(d)})
		}
	}
	return d
}

func (f *ckFaults) Reply(chunk, last []byte) (time.Duration, bool) {
	switch {
	case ckScript(last):
		if ok, _ := f.roll(f.cutRate(last), 1); ok && f.on["cut"] { // the script ran; its reply is lost
			f.cuts.Add(1)
			return 0, true
		}
		if ok, d := f.roll(50, ckMaxDelay); ok && f.on["delay"] {
			f.delays.Add(1)
			return d, false
		}
	case bytes.Contains(chunk, []byte("message")): // pub/sub
		if ok, d := f.roll(100, ckMaxDelay); ok && f.on["delay"] {
			f.delays.Add(1)
			return d, false
		}
	}
	return 0, false
}

// ckEvent is a wipe (At == Ready) or a restart of Redis.
type ckEvent struct{ At, Ready int64 }

func ckSettings() (seed uint64, d time.Duration, err error) {
	seed, d = *checkerSeed, *checkerTime
	if v := os.Getenv("LOCK_CHECKER_SEED"); seed == 0 && v != "" {
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			return 0, 0, fmt.Errorf("LOCK_CHECKER_SEED: %w", err)
		}
	}
	if v := os.Getenv("LOCK_CHECKER_TIME"); d == 0 && v != "" {
		if d, err = time.ParseDuration(v); err != nil {
			return 0, 0, fmt.Errorf("LOCK_CHECKER_TIME: %w", err)
		}
	}
	if seed == 0 {
		seed = rand.Uint64()
	}
	if d <= 0 {
		d = ckDefaultTime
	}
	return seed, d, nil
}

func TestLockChecker(t *testing.T) {
	seed, runFor, err := ckSettings()
	if err != nil {
		t.Fatal(err)
	}
	repro := fmt.Sprintf("go test -race -run '^TestLockChecker$' ./lock/ -checker.seed=%d -checker.time=%v -checker.faults=%s -checker.kinds=%s", seed, runFor, *checkerFault, *checkerKinds)
	if violations := runLockChecker(t, seed, runFor, nil); len(violations) > 0 {
		for i, v := range violations {
			if i == 20 {
				t.Errorf("... and %d more", len(violations)-i)
				break
			}
			t.Error(v)
		}
		t.Errorf("lock checker failed with -checker.seed=%d; reproduce: %s", seed, repro)
	}
}

// runLockChecker runs the checker for runFor with seed, the package's
// scripts changed by muts in every process, and returns what it found.
func runLockChecker(t *testing.T, seed uint64, runFor time.Duration, muts []ckMutation) []string {
	t.Helper()
	procs := max(*checkerProcs, 2)
	t.Logf("lock checker: seed %d for %v in %d processes, faults %s", seed, runFor, procs, *checkerFault)
	restore, err := ckMutate(muts)
	if err != nil {
		t.Fatal(err)
	}
	defer restore()

	srv := redistest.Start(t)
	admin := srv.Client(t)
	on, err := ckFaultSet(*checkerFault)
	if err != nil {
		t.Fatal(err)
	}
	faults := newCkFaults(seed, on)
	var locks [][2]string
	for _, l := range ckLocks {
		if slices.Contains(strings.Split(*checkerKinds, ","), l[1]) {
			locks = append(locks, l)
		}
	}
	if len(locks) == 0 {
		t.Fatalf("-checker.kinds %q: none of mutex, fair, fenced, rw", *checkerKinds)
	}
	proxy, err := faultproxy.Start(srv.Addr, faults)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()

	ctx, cancel := context.WithTimeout(t.Context(), runFor+2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	until := ckNow() + ckDur(runFor)
	spec := func(proc int) ckSpec {
		return ckSpec{Addr: proxy.Addr(), Seed: seed, Proc: proc, Clients: *checkerClients, Workers: *checkerWorkers, Until: until, Faults: on, Locks: locks, Mutations: muts,
			Out: filepath.Join(dir, fmt.Sprintf("proc%d.jsonl", proc))}
	}

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var children []<-chan error
	var outputs []*bytes.Buffer
	for proc := 1; proc < procs; proc++ {
		js, _ := json.Marshal(spec(proc))
		cmd := exec.CommandContext(ctx, exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), ckChildEnv+"="+string(js))
		out := &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = out, out
		// Killed with this process, however it ends.
		exited, err := childproc.Start(cmd, syscall.SIGKILL)
		if err != nil {
			t.Fatal(err)
		}
		children, outputs = append(children, exited), append(outputs, out)
	}

	var events []ckEvent
	var wg sync.WaitGroup
	wg.Go(func() { events = ckInject(ctx, t, seed, on, srv, admin, proxy, until) })
	procErr := runCkProc(ctx, spec(0))
	wg.Wait()
	for i, exited := range children {
		if err := <-exited; err != nil {
			t.Errorf("checker process %d: %v\n%s", i+1, err, outputs[i])
		}
	}
	if procErr != nil {
		t.Fatal(procErr)
	}

	var records []ckRecord
	for proc := range procs {
		recs, err := ckRead(spec(proc).Out)
		if err != nil {
			t.Fatal(err)
		}
		records = append(records, recs...)
	}
	faults.mu.Lock()
	records = append(records, faults.inFlight...)
	faults.mu.Unlock()
	violations, stats := ckCheck(records, events)
	t.Logf("lock checker: %s; faults: %d replies cut, %d delayed, %d requests late; %d wipes/restarts",
		stats, faults.cuts.Load(), faults.delays.Load(), faults.lates.Load(), len(events))
	return violations
}

// ckInject is the fault injector's schedule of whole-server faults: every
// one to four seconds a FLUSHALL, a restart, every connection cut, or
// nothing. It returns the wipes and restarts.
func ckInject(ctx context.Context, t *testing.T, seed uint64, on map[string]bool, srv *redistest.Server, admin *redis.Client, proxy *faultproxy.Proxy, until int64) []ckEvent {
	rng := rand.New(rand.NewPCG(seed, 1))
	var events []ckEvent
	for {
		if !ckSleep(ctx, time.Duration(1000+rng.IntN(3000))*time.Millisecond) || ckNow() > until {
			return events
		}
		switch rng.IntN(10) {
		case 0, 1:
			if !on["wipe"] {
				continue
			}
			at := ckNow()
			if err := admin.FlushAll(ctx).Err(); err != nil {
				t.Errorf("FLUSHALL: %v", err)
			}
			events = append(events, ckEvent{At: at, Ready: ckNow()})
		case 2:
			if !on["restart"] {
				continue
			}
			at := ckNow()
			srv.Restart()
			events = append(events, ckEvent{At: at, Ready: ckNow()})
		case 3, 4, 5:
			if on["cut"] {
				proxy.CutAll()
			}
		}
	}
}

func ckRead(path string) ([]ckRecord, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var recs []ckRecord
	for line := range strings.Lines(string(data)) {
		var r ckRecord
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		recs = append(recs, r)
	}
	return recs, nil
}

// ckEnd is when a hold stopped being live, at the latest: its held
// context's end as seen, or its last Unlock's call, which ends it first.
//
// A lease hold that ran out ended at its deadline, by its timer: a loaded
// machine may run the timer, and the goroutine that sees the end, late,
// which says nothing of the library's logic. Its deadline is counted from
// the acquisition's reply, so it is never earlier than the hold's own.
func ckEnd(h ckRecord) int64 {
	end := h.End
	if h.UnlockAt > 0 && h.UnlockAt < end {
		end = h.UnlockAt
	}
	if h.Cause == "lost" && h.Deadline > 0 && h.Deadline < end {
		end = h.Deadline
	}
	return end
}

// ckEarliestEnd is when a hold stopped being live, at the earliest: an end
// seen by a goroutine may be seen ckTolerance late, but a hold still live
// when its last Unlock was called (its held context's cause read right
// before the call) ended at that call or later — and no other owner can
// take the lock before it — so that end is known exactly.
func ckEarliestEnd(h ckRecord) int64 {
	if h.UnlockAt > 0 && h.LiveAtUnlock {
		return h.UnlockAt
	}
	return ckEnd(h) - ckDur(ckTolerance)
}

// ckSpan is a stretch of time, in ns of ckNow.
type ckSpan struct{ from, to int64 }

// ckCheck asserts the checker's three properties on a run's records.
func ckCheck(records []ckRecord, events []ckEvent) (violations []string, stats string) {
	tol := ckDur(ckTolerance)
	byLock := map[string][]ckRecord{}
	waits := map[string][]ckRecord{}
	dead := map[string][]ckSpan{}
	lates := map[string][]ckSpan{}
	var closes []int64
	holds, waited := 0, 0
	origin := int64(0) // times are shown from the first record on
	for _, r := range records {
		if r.Start > 0 && (origin == 0 || r.Start < origin) {
			origin = r.Start
		}
	}
	at := func(ns int64) string { return fmt.Sprintf("%.3fs", float64(ns-origin)/1e9) }
	for _, r := range records {
		switch r.Kind {
		case "hold":
			byLock[r.Lock] = append(byLock[r.Lock], r)
			holds++
		case "wait":
			waits[r.Lock] = append(waits[r.Lock], r)
			waited++
		case "dead":
			dead[r.Lock] = append(dead[r.Lock], ckSpan{r.Start, r.End})
		case "late":
			lates[r.Lock] = append(lates[r.Lock], ckSpan{r.Start, r.End})
		case "close":
			closes = append(closes, r.Start)
		case "count":
			// A wipe takes the owner's field; only a late first run of its
			// acquisition could write it again, with one level.
			if r.Levels == 1 && ckWipedBetween(events, r.Start, r.End) {
				continue
			}
			violations = append(violations, fmt.Sprintf("%s, %s at %s: %s", r.Lock, r.Owner, at(r.End), r.What))
		case "bad":
			if r.End > 0 && ckWipedBetween(events, r.Start-tol, r.End+tol) {
				continue
			}
			if !ckWipedAround(events, r.Start, tol) {
				violations = append(violations, fmt.Sprintf("%s, %s at %s: %s", r.Lock, r.Owner, at(r.Start), r.What))
			}
		}
	}

	// No two live held contexts of one lock overlap.
	for lock, hs := range byLock {
		sort.Slice(hs, func(i, j int) bool { return hs[i].Start < hs[j].Start })
		for i, a := range hs {
			aEnd, earliest := ckEnd(a), ckEarliestEnd(a)
			for _, b := range hs[i+1:] {
				if b.Start >= earliest {
					break
				}
				if a.Shared && b.Shared || ckExcused(a, b, events) {
					continue
				}
				violations = append(violations, fmt.Sprintf(
					"%s: %s held %s–%s (%s, ended %s, last Unlock: %q) and %s acquired at %s: two live held contexts\n\t%s: %s\n\t%s: %s",
					lock, a.Owner, at(a.Start), at(aEnd), ckKind(a), a.Cause, a.UnlockErr, b.Owner, at(b.Start), a.Owner, a.What, b.Owner, b.What))
			}
		}
	}

	// A fenced lock's tokens only grow, across wipes and restarts too: a
	// hold whose acquisition was called after another's returned has the
	// larger token.
	for lock, hs := range byLock {
		for i, a := range hs {
			for _, b := range hs[i+1:] {
				if a.Token != 0 && b.Token != 0 && b.Called > a.Start && b.Token <= a.Token {
					violations = append(violations, fmt.Sprintf("%s: %s acquired at %s with fencing token %d, after %s's at %s with token %d: the token went back",
						lock, b.Owner, at(b.Start), b.Token, a.Owner, at(a.Start), a.Token))
				}
			}
		}
	}

	// No waiter waits longer than ckWaitBound while the lock is free.
	for lock, ws := range waits {
		var busy []ckSpan
		for _, h := range byLock[lock] {
			busy = append(busy, ckSpan{h.Start - tol, ckEnd(h) + tol})
			if h.Cause == "closed" { // kept in Redis until its lease or watchdog timeout
				busy = append(busy, ckSpan{h.End, h.End + ckDur(ckWatchdog) + tol})
			}
			if h.Cause == "lost" { // a request on its way may still reach Redis
				busy = append(busy, ckSpan{h.End, h.End + ckDur(ckMaxDelay) + tol})
			}
		}
		busy = append(busy, dead[lock]...)
		// A wipe or restart also takes the latch (doc.go): a request on its
		// way across it — an acquisition whose caller gave up and left
		// before the wipe — may take the free lock when it lands and keep
		// it, owned by nobody, for a grant's lease.
		for _, e := range events {
			for _, l := range lates[lock] {
				if l.from < e.Ready && l.to > e.At {
					busy = append(busy, ckSpan{max(e.At, l.from), l.to + ckDur(ckWatchdog) + tol})
				}
			}
		}
		for _, c := range closes { // a closed fair waiter's or writer's place lapses
			if lock == "ck-fair" || lock == "ck-rw" {
				busy = append(busy, ckSpan{c, c + ckDur(ckFairTTL+ckMaxDelay) + tol})
			}
		}
		if lock == "ck-rw" { // a waiting writer holds new readers back
			for _, w := range ws {
				if !w.Shared {
					busy = append(busy, ckSpan{w.Start, w.End})
				}
			}
		}
		for _, w := range ws {
			spans := busy
			for _, e := range events {
				if e.At > w.Start { // a waiter asleep on the TTL of a wiped lock
					spans = append(spans, ckSpan{e.At, e.Ready + ckDur(ckWatchdog) + tol})
				}
			}
			bound := ckWaitBound
			if lock == "ck-fair" || lock == "ck-rw" {
				// Behind a queued waiter that died, until its place lapses.
				bound += ckFairTTL
			}
			if gap, from := ckLongestGap(ckSpan{w.Start, w.End}, spans); gap > ckDur(bound) {
				violations = append(violations, fmt.Sprintf(
					"%s: %s waited %s–%s (acquired: %s) and the lock was free for %.3fs from %s",
					lock, w.Owner, at(w.Start), at(w.End), w.Cause, float64(gap)/1e9, at(from)))
			}
		}
	}
	var wipes []string
	for _, e := range events {
		wipes = append(wipes, at(e.At)+"–"+at(e.Ready))
	}
	return violations, fmt.Sprintf("%d holds, %d waits, %d closes; Redis wiped or restarted at %s",
		holds, waited, len(closes), strings.Join(wipes, ", "))
}

func ckKind(h ckRecord) string {
	switch {
	case h.Shared:
		return "read"
	case h.Watchdog:
		return "watchdog"
	}
	return "lease"
}

// ckExcused: a wipe or restart came between a's acquisition and b's, and a
// ended within the bound — a holder cannot learn of a wipe before its next
// renewal, or its lease's end. How it ended does not matter: with
// ErrLockLost, by an Unlock that reported the loss, or by one that passed
// the lock to a handle of its Client, whose own hold then starts after the
// wipe and is checked in turn.
func ckExcused(a, b ckRecord, events []ckEvent) bool {
	tol := ckDur(ckTolerance)
	for _, e := range events {
		if e.At < a.Start-tol || e.At > b.Start+tol {
			continue
		}
		bound := e.Ready + ckDur(ckWatchdog/3+ckRenewal) + tol
		if !a.Watchdog {
			bound = a.Deadline + tol
		}
		if ckEnd(a) <= bound {
			return true
		}
	}
	return false
}

// ckWipedAround reports whether Redis was wiped or restarted near t, which
// takes every owner's levels with it.
func ckWipedAround(events []ckEvent, t, tol int64) bool {
	for _, e := range events {
		if e.At-tol <= t && t <= e.Ready+ckDur(ckWatchdog/3+ckRenewal) {
			return true
		}
	}
	return false
}

// ckWipedBetween reports whether Redis was wiped or restarted between from
// and to.
func ckWipedBetween(events []ckEvent, from, to int64) bool {
	for _, e := range events {
		if e.At <= to && e.Ready >= from {
			return true
		}
	}
	return false
}

// ckLongestGap is the longest stretch of within that no span covers, and
// where it starts.
func ckLongestGap(within ckSpan, spans []ckSpan) (int64, int64) {
	sorted := append([]ckSpan(nil), spans...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].from < sorted[j].from })
	longest, start, cursor := int64(0), within.from, within.from
	for _, s := range sorted {
		if s.to <= cursor {
			continue
		}
		if s.from >= within.to {
			break
		}
		if s.from > cursor && s.from-cursor > longest {
			longest, start = s.from-cursor, cursor
		}
		cursor = max(cursor, s.to)
	}
	if within.to > cursor && within.to-cursor > longest {
		longest, start = within.to-cursor, cursor
	}
	return longest, start
}

// CheckerChild is ckChild for TestMain, which is in package lock_test.
var CheckerChild = ckChild

// ckChild runs a child process's part of a run when the test binary was
// started as one; it reports whether it was.
func ckChild() (bool, error) {
	js, ok := os.LookupEnv(ckChildEnv)
	if !ok {
		return false, nil
	}
	var spec ckSpec
	if err := json.Unmarshal([]byte(js), &spec); err != nil {
		return true, fmt.Errorf("%s: %w", ckChildEnv, err)
	}
	if _, err := ckMutate(spec.Mutations); err != nil { // the process ends with the run
		return true, err
	}
	return true, runCkProc(context.Background(), spec)
}
