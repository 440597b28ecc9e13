package lock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// The semaphore checker: workers, two to a Client and go-redis client
// (so a Client's waiters queue, waitqueue.go), take one or two permits at
// once and give them back at random, while replies are lost (go-redis
// re-sends the request) and, on a PermitExpirableSemaphore, holders
// "crash" (never release). It checks, from the workers' own clocks:
//   - never more permits held than set: the holders between an
//     acquisition's return and their release's call whose lease cannot
//     have ended yet (counted from the acquisition's call, or the last
//     UpdateLeaseTime's; a crashed holder's until then) are never more
//     than the permits; a lease found ended before that is reported;
//   - no waiter waits while permits are free beyond semBound: a monitor
//     reads the free permits (for the expirable one, with the permits
//     whose lease ended, read without giving them back) every 10 ms, and a
//     waiter that waited through a run of samples all with as many permits
//     free as it asks for longer than semBound is reported; so is an
//     expired permit that no waiter takes;
//   - at the end, with every lease ended, the permits are as set: none
//     taken or given twice by a re-sent request.

// semBound is how long a free permit may stay free while a waiter waits:
// a round trip of a woken waiter, with room for a loaded test machine.
const semBound = time.Second

// semMaxNeed is the most permits a checker's worker asks for at once.
const semMaxNeed = 2

type semChecker struct {
	permits int
	mu      sync.Mutex
	// holds: permits taken (acquisition returned, release not called)
	// -> the earliest their lease may end (far off on a Semaphore; a
	// crashed holder's is never released).
	holds   map[*semHold]struct{}
	waiting map[int]semWait // worker -> its acquisition under way
	fails   []string
	free    func(context.Context) (int, error) // the monitor's read
}

func (k *semChecker) fail(format string, args ...any) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.fails) < 10 {
		k.fails = append(k.fails, fmt.Sprintf(format, args...))
	}
}

// semHold is n permits held until at least until.
type semHold struct {
	until time.Time
	n     int
}

// semWait is an acquisition of need permits under way since since.
type semWait struct {
	since time.Time
	need  int
}

// wait records that worker began to acquire need permits.
func (k *semChecker) wait(worker, need int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.waiting[worker] = semWait{time.Now(), need}
}

// gaveUp records an acquisition that returned without permits.
func (k *semChecker) gaveUp(worker int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.waiting, worker)
}

// took records an acquisition of n permits that returned, held until
// until at least, and returns its hold for drop.
func (k *semChecker) took(worker, n int, until time.Time) *semHold {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.waiting, worker)
	now := time.Now()
	held := n
	for h := range k.holds {
		if !now.Before(h.until) {
			delete(k.holds, h)
		} else {
			held += h.n
		}
	}
	h := &semHold{until, n}
	k.holds[h] = struct{}{}
	if held > k.permits {
		k.fails = append(k.fails, fmt.Sprintf("%d permits held at once of %d", held, k.permits))
	}
	return h
}

// drop ends a hold as its release is called.
func (k *semChecker) drop(h *semHold) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.holds, h)
}

// leased moves a hold's earliest end, for a lease set at from.
func (k *semChecker) leased(h *semHold, from time.Time, lease time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	h.until = from.Add(lease)
}

// monitor samples the free permits until ctx ends.
func (k *semChecker) monitor(ctx context.Context) {
	// freeSince[need]: start of the current run of samples with need
	// permits free, for the needs of the workers (1 or 2).
	var freeSince [semMaxNeed + 1]time.Time
	for ctx.Err() == nil {
		now := time.Now()
		n, err := k.free(ctx)
		if err != nil {
			if ctx.Err() == nil {
				k.fail("monitor: %v", err)
			}
			return
		}
		for need := 1; need <= semMaxNeed; need++ {
			if n < need {
				freeSince[need] = time.Time{}
			} else if freeSince[need].IsZero() {
				freeSince[need] = now
			}
		}
		k.mu.Lock()
		for w, wt := range k.waiting {
			free := freeSince[wt.need]
			if !free.IsZero() && wt.since.Before(free) && now.Sub(free) > semBound && len(k.fails) < 10 {
				k.fails = append(k.fails, fmt.Sprintf("worker %d waited %v for %d while as many permits were free (%d free now)", w, now.Sub(free), wt.need, n))
				freeSince[wt.need] = time.Time{}
			}
		}
		k.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
}

// semCheckerRun is one run: expirable picks the semaphore.
type semCheckerRun struct {
	expirable bool
	workers   int
	permits   int
	d         time.Duration
	seed      uint64
	// maxWait is the longest a worker waits to acquire (4 s when 0).
	maxWait time.Duration
}

func (r semCheckerRun) check(t *testing.T, srv *redistest.Server) []string {
	ctx, cancel := context.WithTimeout(context.Background(), r.d+time.Minute)
	defer cancel()
	name := "checked-" + t.Name()
	monitorRdb := srv.Client(t)
	mon := newClient(t, srv)
	k := &semChecker{permits: r.permits, holds: make(map[*semHold]struct{}), waiting: make(map[int]semWait)}
	var setup interface {
		TrySetPermits(context.Context, int) (bool, error)
	}
	if r.expirable {
		s := mon.PermitExpirableSemaphore(name)
		setup = s
		k.free = func(ctx context.Context) (int, error) { return rawExpirableFree(ctx, monitorRdb, &s.k) }
	} else {
		s := mon.Semaphore(name)
		setup = s
		k.free = s.AvailablePermits
	}
	if ok, err := setup.TrySetPermits(ctx, r.permits); !ok || err != nil {
		t.Fatalf("TrySetPermits = %v, %v", ok, err)
	}
	const lease = 300 * time.Millisecond
	stop := time.Now().Add(r.d)
	monCtx, stopMon := context.WithCancel(ctx)
	var monDone sync.WaitGroup
	monDone.Add(1)
	go func() { defer monDone.Done(); k.monitor(monCtx) }()
	var wg sync.WaitGroup
	var d *replyDropper
	var c *Client
	for w := range r.workers {
		if w%2 == 0 {
			d = &replyDropper{}
			c = defaultClient(t, srv, d)
			loadCounterScripts(t, srv.Client(t))
		}
		d, c := d, c
		rng := rand.New(rand.NewPCG(r.seed, uint64(w)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				if rng.IntN(4) == 0 { // a lost reply, re-sent by go-redis
					d.arm([]*redis.Script{semAcquireScript, semAddScript, expAcquireScript, expReleaseScript}[rng.IntN(4)], 1)
				}
				wait := time.Duration(rng.Int64N(int64(cmp.Or(r.maxWait, 4*time.Second))))
				hold := time.Duration(rng.IntN(20)) * time.Millisecond
				need := 1 + rng.IntN(semMaxNeed)
				start := time.Now()
				k.wait(w, need)
				if r.expirable {
					r.expirableOp(ctx, k, c.PermitExpirableSemaphore(name), w, need, rng, start, wait, hold, lease)
				} else {
					r.plainOp(ctx, k, c.Semaphore(name), w, need, wait, hold)
				}
			}
		}()
	}
	wg.Wait()
	stopMon()
	monDone.Wait()
	time.Sleep(lease + 100*time.Millisecond) // every crashed lease ends
	var n int
	var err error
	if r.expirable {
		n, err = mon.PermitExpirableSemaphore(name).AvailablePermits(ctx)
	} else {
		n, err = mon.Semaphore(name).AvailablePermits(ctx)
	}
	if err != nil || n != r.permits {
		k.fail("at the end %d permits free (%v), want %d", n, err, r.permits)
	}
	return k.fails
}

func (r semCheckerRun) plainOp(ctx context.Context, k *semChecker, s *Semaphore, w, need int, wait, hold time.Duration) {
	ok, err := s.TryAcquire(ctx, need, wait)
	if err != nil || !ok {
		k.gaveUp(w)
		if err != nil {
			k.fail("worker %d: TryAcquire: %v", w, err)
		}
		return
	}
	h := k.took(w, need, time.Now().Add(forever/2))
	time.Sleep(hold)
	k.drop(h)
	if err := s.Release(ctx, need); err != nil {
		k.fail("worker %d: Release: %v", w, err)
	}
}

func (r semCheckerRun) expirableOp(ctx context.Context, k *semChecker, s *PermitExpirableSemaphore, w, need int, rng *rand.Rand, start time.Time, wait, hold, lease time.Duration) {
	ids, ok, err := s.TryAcquireN(ctx, need, wait, lease)
	if err != nil || !ok {
		k.gaveUp(w)
		if err != nil {
			k.fail("worker %d: TryAcquireN: %v", w, err)
		}
		return
	}
	h := k.took(w, need, start.Add(lease))
	if rng.IntN(4) == 0 { // crashed: never released
		return
	}
	time.Sleep(hold)
	if need == 1 && rng.IntN(2) == 0 {
		from := time.Now()
		ok, err := s.UpdateLeaseTime(ctx, ids[0], lease)
		switch {
		case err != nil:
			k.fail("worker %d: UpdateLeaseTime: %v", w, err)
		case ok:
			k.leased(h, from, lease)
		case from.Before(h.until): // a loaded machine may let a lease end
			k.fail("worker %d: UpdateLeaseTime found no permit %v into its lease of %v", w, from.Sub(start), lease)
		}
	}
	k.drop(h)
	from := time.Now()
	for _, id := range ids {
		if err := s.Release(ctx, id); err != nil && !(errors.Is(err, ErrPermitNotHeld) && !from.Before(h.until)) {
			k.fail("worker %d: Release: %v", w, err)
		}
	}
}

// rawExpirableFree reads the permits free, counting those whose lease
// ended, without giving them back (which would wake the waiters).
func rawExpirableFree(ctx context.Context, rdb *redis.Client, k *counter) (int, error) {
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		return 0, err
	}
	free, err := rdb.Get(ctx, k.key).Int()
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, err
	}
	ended, err := rdb.ZCount(ctx, k.keys[3], "-inf", fmt.Sprint(now.UnixMilli())).Result()
	return free + int(ended), err
}

func TestSemaphoreChecker(t *testing.T) {
	seed, d, err := ckSettings()
	if err != nil {
		t.Fatal(err)
	}
	d = min(d, 6*time.Second)
	srv := redistest.Start(t)
	for _, expirable := range []bool{false, true} {
		t.Run(fmt.Sprintf("expirable=%v", expirable), func(t *testing.T) {
			r := semCheckerRun{expirable: expirable, workers: 6, permits: 2, d: d, seed: seed}
			if fails := r.check(t, srv); len(fails) > 0 {
				t.Fatalf("seed %d (LOCK_CHECKER_SEED):\n%s", seed, strings.Join(fails, "\n"))
			}
		})
	}
}

// TestSemaphoreCheckerFindsDefects plants one defect at a time in a copy
// of a script and wants the checker to report it.
func TestSemaphoreCheckerFindsDefects(t *testing.T) {
	seed, _, err := ckSettings()
	if err != nil {
		t.Fatal(err)
	}
	srv := redistest.Start(t)
	for _, p := range []struct {
		name      string
		script    **redis.Script
		files     []string
		old, new  string
		expirable bool
		// maxWait: longer waits, so that few tries run but the waiters'.
		maxWait time.Duration
	}{
		{"acquire ignores the record (a re-sent request takes twice)", &semAcquireScript, []string{"semaphore_acquire.lua"},
			"if done then\n    return done\nend", "", false, 0},
		{"acquire takes without enough permits", &semAcquireScript, []string{"semaphore_acquire.lua"},
			"if have < n then", "if have < 0 then", false, 0},
		{"a waiter is not told when the first lease ends", &expAcquireScript, []string{"leases.lua", "expirable_acquire.lua"},
			"return {have, nextEnd(now)}", "return {have, -1}", true, 20 * time.Second},
		{"a release says no permit is free (a lost wake-up)", &semAddScript, []string{"semaphore_add.lua"},
			"'u' .. free", "'u0'", false, 10 * time.Second},
	} {
		t.Run(p.name, func(t *testing.T) {
			mutated := plantedScript(t, p.files, p.old, p.new)
			saved := *p.script
			*p.script = mutated
			defer func() { *p.script = saved }()
			r := semCheckerRun{expirable: p.expirable, workers: 6, permits: 2, d: 8 * time.Second, seed: seed, maxWait: p.maxWait}
			fails := r.check(t, srv)
			if len(fails) == 0 {
				t.Fatal("the checker found nothing")
			}
			t.Logf("found: %s", fails[0])
		})
	}
}

// plantedScript is the counter script of files (attempts.lua first) with
// old, which the last file must have, replaced by new.
func plantedScript(t *testing.T, files []string, old, new string) *redis.Script {
	t.Helper()
	var whole strings.Builder
	for _, f := range append([]string{"attempts.lua"}, files...) {
		b, err := scriptFiles.ReadFile("scripts/" + f)
		if err != nil {
			t.Fatal(err)
		}
		whole.Write(b)
		whole.WriteByte('\n')
	}
	if !strings.Contains(whole.String(), old) {
		t.Fatalf("%v have no %q", files, old)
	}
	return redis.NewScript(strings.Replace(whole.String(), old, new, 1))
}
