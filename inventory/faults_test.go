package inventory

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestFaultsJSON(t *testing.T) {
	var f Faults
	body := `{"work":"2ms","work_max":"5ms","slow_ratio":0.01,"slow":"300ms","lock_ttl":"200ms","crash_holding_lock":true}`
	if err := json.Unmarshal([]byte(body), &f); err != nil {
		t.Fatal(err)
	}
	want := Faults{Work: 2 * time.Millisecond, WorkMax: 5 * time.Millisecond, SlowRatio: 0.01,
		Slow: 300 * time.Millisecond, LockTTL: 200 * time.Millisecond, CrashHoldingLock: true}
	if f != want {
		t.Fatalf("parsed %+v, want %+v", f, want)
	}
	out, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	var back Faults
	if err := json.Unmarshal(out, &back); err != nil || back != f {
		t.Fatalf("round trip %s = %+v, %v", out, back, err)
	}
	if err := json.Unmarshal([]byte(`{}`), &back); err != nil || back != (Faults{}) {
		t.Fatalf("empty body = %+v, %v", back, err)
	}
	scenario := `{"pause_before_write":true,"track_holders":true,"wait_replicas":1,"wait_timeout":"150ms","fence":true}`
	want = Faults{PauseBeforeWrite: true, TrackHolders: true, WaitReplicas: 1, WaitTimeout: 150 * time.Millisecond, Fence: true}
	if err := json.Unmarshal([]byte(scenario), &f); err != nil || f != want {
		t.Fatalf("scenario knobs %s = %+v, %v; want %+v", scenario, f, err, want)
	}
	if out, err = json.Marshal(f); err != nil || json.Unmarshal(out, &back) != nil || back != f {
		t.Fatalf("round trip %s = %+v, %v", out, back, err)
	}
}

func TestFaultsRejected(t *testing.T) {
	for _, body := range []string{
		`{"work":"soon"}`, `{"work":"-1ms"}`, `{"work":"2h"}`, `{"work":"5ms","work_max":"1ms"}`,
		`{"slow_ratio":-0.1}`, `{"slow_ratio":1.01}`, `{"lock_ttl":"500us"}`, `{"wrok":"1ms"}`, `{"work":5}`,
		`{"wait_replicas":1}`, `{"wait_timeout":"1s"}`, `{"wait_replicas":-1,"wait_timeout":"1s"}`,
		`{"wait_replicas":17,"wait_timeout":"1s"}`, `{"wait_replicas":1,"wait_timeout":"2m"}`, `{"track_holders":"yes"}`,
	} {
		var f Faults
		err := json.Unmarshal([]byte(body), &f)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", body, err)
		}
	}
}

// The fence knob needs a lock that hands out tokens; elsewhere it would
// silently do nothing.
func TestFenceOnlyWhereTheLockHandsOutTokens(t *testing.T) {
	for _, tc := range []struct {
		id string
		s  stage
		ok bool
	}{
		{"etcd", &guardedStage{guard: etcdGuard{}}, true},
		{"zookeeper", &guardedStage{guard: zkGuard{}}, true},
		{"watchdog", &guardedStage{guard: watchdogGuard{}}, false},
		{"mysql", &guardedStage{guard: mysqlGuard{}}, false},
		{"fenced", &fencedStage{}, false},
	} {
		err := unsupportedFaults(tc.id, tc.s, Faults{Fence: true})
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInvalid)) {
			t.Errorf("fence on %s: %v", tc.id, err)
		}
	}
}

func TestWorkTimeDraws(t *testing.T) {
	fixed := Faults{Work: 3 * time.Millisecond}
	ranged := Faults{Work: time.Millisecond, WorkMax: 2 * time.Millisecond}
	slow := Faults{Work: time.Millisecond, SlowRatio: 1, Slow: time.Second}
	for range 1000 {
		if d := fixed.workTime(); d != 3*time.Millisecond {
			t.Fatalf("fixed work drew %v", d)
		}
		if d := ranged.workTime(); d < time.Millisecond || d > 2*time.Millisecond {
			t.Fatalf("ranged work drew %v", d)
		}
		if d := slow.workTime(); d != time.Second {
			t.Fatalf("slow ratio 1 drew %v", d)
		}
	}
	if got := (Faults{}).lockTTL(10 * time.Second); got != 10*time.Second {
		t.Errorf("default lease = %v", got)
	}
	if got := (Faults{LockTTL: 50 * time.Millisecond}).lockTTL(10 * time.Second); got != 50*time.Millisecond {
		t.Errorf("overridden lease = %v", got)
	}
}

func TestFaultsHashRoundTrip(t *testing.T) {
	h := map[string]string{"work": "1ms", "work_max": "0s", "slow_ratio": "0.25", "slow": "40ms", "lock_ttl": "0s", "crash_holding_lock": "true",
		"pause_before_write": "true", "track_holders": "true", "wait_replicas": "2", "wait_timeout": "80ms"}
	f, err := parseFaultsHash(h)
	want := Faults{Work: time.Millisecond, SlowRatio: 0.25, Slow: 40 * time.Millisecond, CrashHoldingLock: true,
		PauseBeforeWrite: true, TrackHolders: true, WaitReplicas: 2, WaitTimeout: 80 * time.Millisecond}
	if err != nil || f != want {
		t.Fatalf("parsed %+v, %v; want %+v", f, err, want)
	}
	if _, err := parseFaultsHash(map[string]string{"wait_replicas": "two"}); err == nil {
		t.Error("a wait_replicas that is no number was accepted")
	}
	if f, err := parseFaultsHash(nil); err != nil || f != (Faults{}) {
		t.Fatalf("no hash = %+v, %v", f, err)
	}
}

func TestValidateSKUAndQty(t *testing.T) {
	for _, sku := range []string{"sku-1", "A.b_C-9", "x", strings.Repeat("z", 64)} {
		if err := ValidateSKU(sku); err != nil {
			t.Errorf("ValidateSKU(%q) = %v", sku, err)
		}
	}
	for _, sku := range []string{"", "{sku}", "a:b", "a b", "é", "a\x00", "\xff", strings.Repeat("z", 65), string(make([]byte, 65))} {
		if err := ValidateSKU(sku); !errors.Is(err, ErrInvalid) {
			t.Errorf("ValidateSKU(%q) = %v, want ErrInvalid", sku, err)
		}
	}
	for qty, ok := range map[int64]bool{0: false, 1: true, 100: true, 101: false, -1: false} {
		if err := ValidateQty(qty); (err == nil) != ok {
			t.Errorf("ValidateQty(%d) = %v", qty, err)
		}
	}
}
