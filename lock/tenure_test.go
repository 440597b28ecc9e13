package lock

import (
	"context"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/redistest"
)

// A local pass keeps the Tenure; a release in Redis ends it.
func TestTenureLastsWhileTheLockStaysInTheClient(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv)
	ctx := ctxTimeout(t, 30*time.Second)
	a, b := c.Mutex("tenure"), c.Mutex("tenure")
	first := lockTenure(t, ctx, a)
	passed := make(chan Tenure, 1)
	go func() { passed <- lockTenure(t, ctx, b) }()
	time.Sleep(100 * time.Millisecond) // b queued behind a
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if second := <-passed; second != first {
		t.Fatal("the lock passed locally, but the Tenure changed")
	}
	if err := b.Unlock(ctx); err != nil { // no waiter: released in Redis
		t.Fatal(err)
	}
	if _, ok := TenureOf(ctx); ok {
		t.Fatal("a context that is not held has a Tenure")
	}
	third := lockTenure(t, ctx, a)
	defer func() { _ = a.Unlock(ctx) }()
	if third == first {
		t.Fatal("the lock was released in Redis, but the Tenure stayed")
	}
}

func lockTenure(t *testing.T, ctx context.Context, m *Mutex) Tenure {
	held, ok, err := m.TryLockContext(ctx, 5*time.Second, 0)
	if err != nil || !ok {
		t.Errorf("lock: %v, %v", ok, err)
		return Tenure{}
	}
	tenure, ok := TenureOf(held)
	if !ok {
		t.Error("a held context has no Tenure")
	}
	return tenure
}
