package shop_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/redistest"
)

const clients = 50

// sellOut resets stage to stock units, runs clients against the replicas
// until every client was told sold out (or limit passes), and returns the
// audit and the answers.
func sellOut(t *testing.T, r *replicas, stage string, stock int64, limit time.Duration) (auditResult, *tally) {
	t.Helper()
	r.reset(stage, stock, 0)
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	answers := r.hammer(ctx, stage, clients, 2*time.Millisecond)
	if len(answers.other) > 0 {
		t.Errorf("%s: unexpected answers: %v", stage, answers.other)
	}
	return r.audit(stage), answers
}

func TestNaiveOversellsEvenOnOneReplica(t *testing.T) {
	r := startReplicas(t, redistest.Start(t), 1)
	r.setFaults("naive", `{"work":"5ms"}`)
	a, answers := sellOut(t, r, "naive", 20, 5*time.Second)
	t.Logf("naive, 1 replica: %+v, 200s=%d", a.Audit, answers.get(http.StatusOK))
	if a.Oversold == 0 || a.Consistent {
		t.Fatalf("naive did not oversell: %+v", a)
	}
	if int64(answers.get(http.StatusOK)) != a.Sold {
		t.Fatalf("%d sales answered 200 but the audit counts %d", answers.get(http.StatusOK), a.Sold)
	}
}

func TestSynchronizedHoldsOnOneReplicaOnly(t *testing.T) {
	srv := redistest.Start(t)
	one := startReplicas(t, srv, 1)
	three := startReplicas(t, srv, 3)
	one.setFaults("synchronized", `{"work":"3ms"}`)
	three.setFaults("synchronized", `{"work":"3ms"}`)

	a, _ := sellOut(t, one, "synchronized", 30, 5*time.Second)
	t.Logf("synchronized, 1 replica: %+v", a.Audit)
	if a.Oversold != 0 || !a.Consistent || a.Sold != 30 || a.Stock != 0 {
		t.Fatalf("synchronized on one replica: %+v, want exactly 30 sold and consistent", a)
	}
	a, _ = sellOut(t, three, "synchronized", 30, 5*time.Second)
	t.Logf("synchronized, 3 replicas: %+v", a.Audit)
	if a.Oversold == 0 || a.Consistent {
		t.Fatalf("synchronized on three replicas did not oversell: %+v", a)
	}
}

func TestCorrectStagesNeverOversell(t *testing.T) {
	r := startReplicas(t, redistest.Start(t), 3)
	for _, tc := range []struct {
		stage string
		stock int64
	}{
		{"watchdog", 150},
		{"segmented", 400},
		{"atomic", 400},
	} {
		r.setFaults(tc.stage, `{"work":"1ms","work_max":"2ms"}`)
		a, answers := sellOut(t, r, tc.stage, tc.stock, 10*time.Second)
		t.Logf("%s, 3 replicas: %+v, answers %v", tc.stage, a.Audit, answers.status)
		if a.Oversold != 0 || !a.Consistent || a.Stock != 0 || a.Sold != tc.stock {
			t.Errorf("%s: %+v, want all %d sold, none oversold, consistent", tc.stage, a, tc.stock)
		}
		if got := answers.get(http.StatusOK); int64(got) != tc.stock {
			t.Errorf("%s: %d answers 200 for %d units", tc.stage, got, tc.stock)
		}
		if answers.get(http.StatusConflict) != clients {
			t.Errorf("%s: %d clients told sold out, want all %d", tc.stage, answers.get(http.StatusConflict), clients)
		}
	}
}

// TestWorkOutlastingTheTTL: with work (80ms) longer than the lock's TTL
// (50ms), setnx-expire deletes other owners' locks, while uuid-lua never does
// but still lets two holders in, which the audit shows as lost updates.
func TestWorkOutlastingTheTTL(t *testing.T) {
	r := startReplicas(t, redistest.Start(t), 3)
	for _, stage := range []string{"setnx-expire", "uuid-lua"} {
		r.setFaults(stage, `{"work":"80ms","lock_ttl":"50ms"}`)
		a, _ := sellOut(t, r, stage, 1000, 1500*time.Millisecond)
		t.Logf("%s: %+v", stage, a.Audit)
		if a.Consistent {
			t.Errorf("%s: consistent although two holders overlapped: %+v", stage, a)
		}
		switch stage {
		case "setnx-expire":
			if a.ForeignUnlocks == 0 {
				t.Errorf("setnx-expire: no foreign unlock: %+v", a)
			}
		case "uuid-lua":
			if a.ForeignUnlocks != 0 {
				t.Errorf("uuid-lua deleted %d foreign locks", a.ForeignUnlocks)
			}
		}
	}
}

// TestSegmentedSkipsABusySegment: a sale does not queue behind a slow sale
// holding the segment it picked (here on another replica) while another
// segment is free. Every round, the second sale picks either segment at
// random; waiting on the busy one would sell from it too.
func TestSegmentedSkipsABusySegment(t *testing.T) {
	srv := redistest.Start(t)
	r := startReplicas(t, srv, 2)
	rdb := srv.Client(t)
	locked := func() bool {
		n, _ := rdb.Exists(t.Context(), segmentKey(0, 2, "lock"), segmentKey(1, 2, "lock")).Result()
		return n > 0
	}
	r.setFaults("segmented", `{"work":"300ms"}`)
	for round := range 4 {
		r.reset("segmented", 10, 2)
		slow := async(r, 0, "segmented")
		waitUntil(t, locked)
		second := r.deduct(1, "segmented", "")
		first := <-slow
		if first.status != http.StatusOK || second.status != http.StatusOK {
			t.Fatalf("round %d: %d %s, %d %s", round, first.status, first.body, second.status, second.body)
		}
		if first.field("segment") == second.field("segment") {
			t.Fatalf("round %d: both sales sold from segment %v: the second waited for the busy one", round, first.field("segment"))
		}
	}
}

// TestSegmentedWalksToTheLastUnits: a sale whose random segment is empty
// walks to one that can serve it, or takes from several when none can
// alone; sold out comes only when all of them cannot; a reset to fewer
// segments drops the others.
func TestSegmentedWalksToTheLastUnits(t *testing.T) {
	r := startReplicas(t, redistest.Start(t), 1)
	r.reset("segmented", 5, 4) // shares 2, 1, 1, 1
	if a := r.audit("segmented"); len(a.Segments) != 4 || a.Segments[0].Stock != 2 || a.Segments[3].Stock != 1 {
		t.Fatalf("segments after reset: %+v", a.Segments)
	}
	if res := r.deduct(0, "segmented", "?qty=2"); res.status != http.StatusOK || res.field("segment") != 0.0 {
		t.Fatalf("qty 2 must come from the one segment holding 2: %d %s", res.status, res.body)
	}
	if res := r.deduct(0, "segmented", "?qty=2"); res.status != http.StatusOK || len(res.field("segments").([]any)) != 2 {
		t.Fatalf("qty 2 with 1 unit per segment left = %d %s, want a sale from two segments", res.status, res.body)
	}
	if res := r.deduct(0, "segmented", "?qty=2"); res.status != http.StatusConflict {
		t.Fatalf("qty 2 with 1 unit left = %d %s, want sold out", res.status, res.body)
	}
	if res := r.deduct(0, "segmented", ""); res.status != http.StatusOK {
		t.Fatalf("the last unit = %d %s", res.status, res.body)
	}
	if res := r.deduct(0, "segmented", ""); res.status != http.StatusConflict {
		t.Fatalf("deduct with every segment empty = %d %s", res.status, res.body)
	}
	if a := r.audit("segmented"); a.Sold != 5 || a.Stock != 0 || !a.Consistent {
		t.Fatalf("audit: %+v", a.Audit)
	}
	r.reset("segmented", 9, 2)
	rdb := r.redis.Client(t)
	if n := rdb.Exists(t.Context(), segmentKey(3, 4, "stock")).Val(); n != 0 {
		t.Errorf("segment 3 kept its keys after a reset to 2 segments")
	}
	if a := r.audit("segmented"); len(a.Segments) != 2 || a.Initial != 9 || a.Stock != 9 || a.Sold != 0 {
		t.Errorf("audit after reset to 2 segments: %+v", a.Audit)
	}
}
