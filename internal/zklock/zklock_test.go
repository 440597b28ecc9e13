package zklock_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/lockserver/lockservertest"
	"github.com/lockstep/lockstep/internal/zklock"
	"github.com/lockstep/lockstep/lock"
)

func connect(t *testing.T, servers []string, timeout time.Duration) *zklock.Session {
	t.Helper()
	s, err := zklock.Connect(servers, timeout, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// A second session waits while the first holds, gives up when its context
// ends, and gets the lock once the first releases, with a larger czxid;
// a dropped holder's release says it no longer held.
func TestSessionsTakeTurns(t *testing.T) {
	z := lockservertest.ZooKeeper(t, 1)
	a, b := connect(t, z.Servers, 10*time.Second), connect(t, z.Servers, 10*time.Second)
	ctx := t.Context()
	const path = "/zklock-test/turns"
	first, err := a.Acquire(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	firstToken, err := first.Czxid(ctx)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = b.Acquire(short, path)
	cancel()
	if !errors.Is(err, zklock.ErrGaveUp) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second acquisition while held: %v, want ErrGaveUp with the deadline", err)
	}
	got := make(chan *zklock.Hold, 1)
	go func() {
		h, err := b.Acquire(ctx, path)
		if err != nil {
			t.Error(err)
		}
		got <- h
	}()
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if cause := context.Cause(first.Context()); !errors.Is(cause, lock.ErrReleased) {
		t.Fatalf("released hold's cause %v, want ErrReleased", cause)
	}
	second := <-got
	if second == nil {
		t.FailNow()
	}
	secondToken, err := second.Czxid(ctx)
	if err != nil || secondToken <= firstToken {
		t.Fatalf("second czxid %d (%v), first %d: want larger", secondToken, err, firstToken)
	}
	if err := a.Drop(ctx, path); err != nil {
		t.Fatal(err)
	}
	if err := second.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("release after a drop: %v, want ErrNotHeld", err)
	}
}

// A hold's context ends with ErrLockLost when its session is lost.
func TestHoldEndsWithItsSession(t *testing.T) {
	z := lockservertest.ZooKeeper(t, 1)
	s := connect(t, z.Servers, 2*time.Second)
	h, err := s.Acquire(t.Context(), "/zklock-test/lost")
	if err != nil {
		t.Fatal(err)
	}
	z.Kill(0)
	select {
	case <-h.Context().Done():
		if cause := context.Cause(h.Context()); !errors.Is(cause, lock.ErrLockLost) {
			t.Fatalf("cause %v, want ErrLockLost", cause)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("hold still alive 10 s after its server was killed")
	}
}
