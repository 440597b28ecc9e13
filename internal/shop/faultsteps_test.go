package shop_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/lockstep/lockstep/internal/shop"
	"github.com/lockstep/lockstep/lock"
)

// The fault knobs the workshop's failure scenarios use: track_holders,
// pause_before_write and wait_replicas, in process.

// pauseGate is an injected pause_before_write: the replica that pauses
// reports its name and blocks until the test opens the gate. With
// stopWatchdog it also closes that replica's inventory, so its watchdog
// stops renewing without unlocking: in process, what SIGSTOP does to the
// locks a replica holds.
type pauseGate struct {
	paused chan string
	open   chan struct{}
}

func newPauseGate() *pauseGate {
	return &pauseGate{paused: make(chan string, 4), open: make(chan struct{})}
}

func withPause(g *pauseGate, r **replicas) replicaOption {
	return func(c *shop.Config) {
		name := c.Replica
		c.Pause = func() {
			for i, s := range (*r).shops {
				if fmt.Sprintf("r%d", i) == name {
					_ = s.Inventory.Close()
				}
			}
			g.paused <- name
			<-g.open
		}
	}
}

func withHoldersRedis(addr string) replicaOption {
	return func(c *shop.Config) { c.HoldersRedisAddr = addr }
}

// async sends a sale to replica i and returns where its answer will land.
func async(r *replicas, i int, stage string) <-chan response {
	out := make(chan response, 1)
	go func() { out <- r.deduct(i, stage, "") }()
	return out
}

func (r *replicas) waitPaused(g *pauseGate) string {
	r.t.Helper()
	select {
	case name := <-g.paused:
		return name
	case <-time.After(5 * time.Second):
		r.t.Fatal("no replica paused before its write")
		return ""
	}
}

// TestTrackHoldersCountsTheHoldersOfALostLock: a uuid-lua sale that outlives
// its TTL lets a second holder in, and max_holders says 2; the watchdog
// keeps its lock, and max_holders says 1. The counts live in the holders
// Redis, not next to the stock, and an untracked stage reports none.
func TestTrackHoldersCountsTheHoldersOfALostLock(t *testing.T) {
	stock, holdersSrv := redistest.Start(t), redistest.Start(t)
	r := startReplicas(t, stock, 2, withHoldersRedis(holdersSrv.Addr))
	for _, tc := range []struct {
		stage string
		want  int64
	}{
		{"uuid-lua", 2},
		{"watchdog", 1},
	} {
		t.Run(tc.stage, func(t *testing.T) {
			// A 300ms lease renewed every 100ms: the watchdog loses it only
			// if a renewal is 200ms late, which a loaded machine can do to a
			// shorter lease.
			r.setFaults(tc.stage, `{"work":"1s","lock_ttl":"300ms","track_holders":true}`)
			r.reset(tc.stage, 10, 0)
			first := async(r, 0, tc.stage)
			time.Sleep(400 * time.Millisecond) // past the first sale's TTL
			second := async(r, 1, tc.stage)
			a, b := <-first, <-second
			audit := r.audit(tc.stage)
			t.Logf("%s: answers %d, %d; audit %+v max_holders %s", tc.stage, a.status, b.status, audit.Counts, holdersText(audit.MaxHolders))
			if audit.MaxHolders == nil || *audit.MaxHolders != tc.want {
				t.Fatalf("%s: max_holders %s, want %d", tc.stage, holdersText(audit.MaxHolders), tc.want)
			}
			key := "lockstep:" + tc.stage + ":{sku-1}:max-holders"
			if holdersSrv.Client(t).Exists(t.Context(), key).Val() != 1 || stock.Client(t).Exists(t.Context(), key).Val() != 0 {
				t.Fatalf("%s is not in the holders Redis alone", key)
			}
		})
	}
	r.reset("atomic", 10, 0)
	if a := r.audit("atomic"); a.MaxHolders != nil {
		t.Errorf("untracked atomic reports max_holders %d", *a.MaxHolders)
	}
}

// TestPauseBeforeWriteFreezesTheHolderAtItsWrite: the holder stops after
// every check its lock makes, its lease runs out, a second holder sells, and
// then the first writes its stale read: watchdog goes inconsistent, fenced
// refuses the write. The fault fires once, on one replica.
func TestPauseBeforeWriteFreezesTheHolderAtItsWrite(t *testing.T) {
	srv := redistest.Start(t)
	for _, tc := range []struct {
		stage       string
		firstStatus int
		sold        int64
	}{
		{"watchdog", http.StatusOK, 2},
		{"fenced", http.StatusLocked, 1},
	} {
		t.Run(tc.stage, func(t *testing.T) {
			gate := newPauseGate()
			var r *replicas
			r = startReplicas(t, srv, 2, withPause(gate, &r))
			r.reset(tc.stage, 10, 0)
			r.setFaults(tc.stage, `{"work":"5ms","lock_ttl":"100ms","pause_before_write":true,"track_holders":true}`)
			first := async(r, 0, tc.stage)
			if name := r.waitPaused(gate); name != "r0" {
				t.Fatalf("%s paused, want r0", name)
			}
			time.Sleep(250 * time.Millisecond) // the lease runs out
			if b := r.deduct(1, tc.stage, ""); b.status != http.StatusOK {
				t.Fatalf("second holder: %d %s", b.status, b.body)
			}
			close(gate.open)
			a := <-first
			audit := r.audit(tc.stage)
			t.Logf("%s: first holder %d %s; audit %+v max_holders %s", tc.stage, a.status, a.body, audit.Counts, holdersText(audit.MaxHolders))
			if a.status != tc.firstStatus || audit.Sold != tc.sold || audit.Stock != 9 {
				t.Fatalf("%s: first holder %d (want %d), sold %d (want %d), stock %d (want 9)", tc.stage, a.status, tc.firstStatus, audit.Sold, tc.sold, audit.Stock)
			}
			if audit.MaxHolders == nil || *audit.MaxHolders != 2 {
				t.Fatalf("%s: max_holders %s, want 2", tc.stage, holdersText(audit.MaxHolders))
			}
			select {
			case name := <-gate.paused:
				t.Fatalf("%s paused too: the fault fired twice", name)
			default:
			}
		})
	}
}

// TestFencedRefusesTheHolderBeforeAFailover plays what a failover does to
// the fenced stage when the master dies before replicating a grant: the
// promoted replica has neither the lock, nor the token counter's
// increment, nor the first holder's read of the fence. The token is never
// issued again (it is at least the server's clock in µs, see lock's
// FencedMutex): the second holder's is larger, and the first holder's
// stale write is refused.
func TestFencedRefusesTheHolderBeforeAFailover(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := t.Context()
	gate := newPauseGate()
	var r *replicas
	r = startReplicas(t, srv, 2, withPause(gate, &r))
	r.reset("fenced", 10, 0)
	const lockKey, fenceKey = "lockstep:fenced:{sku-1}:lock", "lockstep:fenced:{sku-1}:fence"
	tokenKey := lock.FencingCounterKey(lockKey)
	r.deduct(1, "fenced", "") // a fence and a token from before
	fenceBefore := rdb.Get(ctx, fenceKey).Val()

	r.setFaults("fenced", `{"work":"5ms","lock_ttl":"10s","pause_before_write":true}`)
	first := async(r, 0, "fenced")
	opened := false
	open := func() {
		if !opened {
			opened = true
			close(gate.open)
		}
	}
	defer open() // a failed check must not leave the first holder paused
	r.waitPaused(gate)
	firstFence := rdb.Get(ctx, fenceKey).Val()
	// The failover: what the dead master had and never replicated is gone.
	rdb.Del(ctx, lockKey)
	rdb.Decr(ctx, tokenKey)
	rdb.Set(ctx, fenceKey, fenceBefore, 0)

	if b := r.deduct(1, "fenced", ""); b.status != http.StatusOK {
		t.Fatalf("second holder: %d %s", b.status, b.body)
	}
	secondFence := rdb.Get(ctx, fenceKey).Val()
	token := func(fence string) int64 {
		n, _ := strconv.ParseInt(strings.SplitN(fence, ":", 2)[0], 10, 64)
		return n
	}
	if token(secondFence) <= token(firstFence) {
		t.Fatalf("fences %q then %q: want the second holder's token larger", firstFence, secondFence)
	}
	open()
	a := <-first
	audit := r.audit("fenced")
	t.Logf("fences %q, %q; first holder %d %s; audit %+v", firstFence, secondFence, a.status, a.body, audit.Audit)
	if a.status != http.StatusLocked || !audit.Consistent || audit.Sold != 2 {
		t.Fatalf("first holder %d (want 423), audit %+v (want 2 sold, consistent)", a.status, audit.Audit)
	}
}

// TestWaitReplicasFault: with wait_replicas the watchdog lock (and the
// fenced stage's) is granted only once a replica has it; without a replica
// no sale goes through and no lock is left behind. Stages whose lock does not
// WAIT refuse the knob.
func TestWaitReplicasFault(t *testing.T) {
	primary := redistest.Start(t, "--repl-diskless-sync-delay", "0")
	// The Redis timeout leaves a loaded machine's replica room to
	// acknowledge below: WAIT must answer within it.
	r := startReplicas(t, primary, 1, withRedisTimeout(5*time.Second))
	waiting := []string{"watchdog", "fenced"}
	for _, stage := range waiting {
		r.setFaults(stage, `{"wait_replicas":1,"wait_timeout":"50ms"}`)
		r.reset(stage, 10, 0)
		res := r.deduct(0, stage, "")
		if res.status != http.StatusServiceUnavailable || !strings.Contains(string(res.body), "replicas") {
			t.Fatalf("%s sale without a replica: %d %s, want 503 naming the replicas", stage, res.status, res.body)
		}
		if n := primary.Client(t).Exists(t.Context(), "lockstep:"+stage+":{sku-1}:lock").Val(); n != 0 {
			t.Fatalf("%s: an unconfirmed lock was left in Redis", stage)
		}
	}

	redistest.Start(t, "--replicaof", "127.0.0.1", strings.TrimPrefix(primary.Addr, "127.0.0.1:"))
	waitUntil(t, func() bool {
		info := primary.Client(t).Info(t.Context(), "replication").Val()
		return strings.Contains(info, "state=online")
	})
	for _, stage := range waiting {
		// WAIT answers as soon as the replica acknowledges; the timeout is
		// only room for a loaded machine, within the Redis timeout above.
		r.setFaults(stage, `{"wait_replicas":1,"wait_timeout":"3s"}`)
		if res := r.deduct(0, stage, ""); res.status != http.StatusOK {
			t.Fatalf("%s sale with a replica: %d %s", stage, res.status, res.body)
		}
	}

	for _, stage := range []string{"atomic", "naive"} {
		res := r.do(0, http.MethodPut, "/api/stages/"+stage+"/faults", `{"wait_replicas":1,"wait_timeout":"50ms"}`, nil)
		if res.status != http.StatusBadRequest {
			t.Errorf("wait_replicas on %s: %d %s, want 400", stage, res.status, res.body)
		}
	}
	// A segmented sale holds one segment's lock, whose holders it counts;
	// the lock-free stages have nothing to count.
	for stage, want := range map[string]int{"atomic": http.StatusBadRequest, "segmented-atomic": http.StatusBadRequest, "segmented": http.StatusOK} {
		res := r.do(0, http.MethodPut, "/api/stages/"+stage+"/faults", `{"track_holders":true}`, nil)
		if res.status != want {
			t.Errorf("track_holders on %s: %d %s, want %d", stage, res.status, res.body, want)
		}
	}
}

func holdersText(n *int64) string {
	if n == nil {
		return "none"
	}
	return fmt.Sprint(*n)
}

func TestSentinelNeedsTheMasterName(t *testing.T) {
	_, err := shop.New(shop.Config{RedisSentinels: []string{"127.0.0.1:1"}})
	if err == nil || !strings.Contains(err.Error(), "master") {
		t.Fatalf("sentinels without a master name: %v", err)
	}
}
