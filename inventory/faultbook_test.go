package inventory

import (
	"log/slog"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/redistest"
)

// TestFaultsReadBeforeAChangeDoNotUndoIt: the periodic re-read that began
// before this replica changed a stage's faults reads the old ones; storing
// them after the change would undo it here until the next read.
func TestFaultsReadBeforeAChangeDoNotUndoIt(t *testing.T) {
	srv := redistest.Start(t)
	b := newFaultBook(srv.Client(t), slog.New(slog.DiscardHandler), []string{"watchdog", "atomic"}, time.Hour)
	t.Cleanup(b.close)
	ctx := t.Context()
	if err := b.set(ctx, "atomic", Faults{Work: time.Millisecond}); err != nil {
		t.Fatal(err)
	}

	stale, ok := b.read(ctx, "watchdog", "atomic")
	if !ok {
		t.Fatal("read failed")
	}
	changed := Faults{Work: 5 * time.Millisecond, CrashHoldingLock: true}
	if err := b.set(ctx, "watchdog", changed); err != nil {
		t.Fatal(err)
	}
	b.apply(stale)
	if got := b.get("watchdog"); got != changed {
		t.Fatalf("after a stale read was applied: %+v, want the change %+v", got, changed)
	}

	stale, _ = b.read(ctx, "watchdog")
	if _, err := b.claim(ctx, "watchdog", crashFault); err != nil {
		t.Fatal(err)
	}
	b.apply(stale)
	if b.get("watchdog").CrashHoldingLock {
		t.Fatal("a read from before the claim re-armed the crash fault")
	}

	// A read that began after the last change is applied: it is how
	// changes made through other replicas arrive.
	other := Faults{Slow: time.Second, SlowRatio: 0.5}
	if err := b.rdb.HSet(ctx, faultsKey("atomic"), "slow", "1s", "slow_ratio", "0.5", "work", "0s").Err(); err != nil {
		t.Fatal(err)
	}
	b.reload(ctx, "atomic")
	if got := b.get("atomic"); got != other {
		t.Fatalf("after a fresh read: %+v, want %+v", got, other)
	}
}
