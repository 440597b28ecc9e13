package lock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/redistest"
)

func TestFencedMutexTokens(t *testing.T) {
	srv := redistest.Start(t)
	a, b := newClient(t, srv), newClient(t, srv)
	ctx := ctxTimeout(t, 10*time.Second)

	first := a.FencedMutex("fenced")
	if first.Token() != 0 {
		t.Fatal("token before acquiring is not 0")
	}
	if ok, err := first.TryLock(ctx, 0, 100*time.Millisecond); !ok || err != nil {
		t.Fatalf("TryLock = %v, %v", ok, err)
	}
	t1 := first.Token()
	if ok, err := first.TryLock(ctx, 0, 100*time.Millisecond); !ok || err != nil {
		t.Fatalf("reentrant TryLock = %v, %v", ok, err)
	}
	if got := first.Token(); got != t1 {
		t.Fatalf("reentrant acquisition changed the token: %d → %d", t1, got)
	}

	// The lease runs out while the first holder still thinks it holds: the
	// next holder's token is larger, so a fenced resource rejects the first.
	second := b.FencedMutex("fenced")
	if ok, err := second.TryLock(ctx, 2*time.Second, 0); !ok || err != nil {
		t.Fatalf("second holder TryLock = %v, %v", ok, err)
	}
	if t2 := second.Token(); t2 <= t1 {
		t.Fatalf("second holder's token %d is not larger than the first's %d", t2, t1)
	}
	if err := first.Unlock(ctx); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("expired holder's Unlock = %v, want ErrNotHeld", err)
	}
	if err := second.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if second.Token() != 0 {
		t.Fatal("token after the last Unlock is not 0")
	}
	if n := srv.Client(t).Exists(context.Background(), "{fenced}").Val(); n != 0 {
		t.Fatal("lock key left after unlock")
	}
}
