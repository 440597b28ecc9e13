package main

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"
)

// socketDeadlineLocker fails the way go-redis does when the deadline it put
// on its socket fires a moment before the context's own timer.
type socketDeadlineLocker struct{ early time.Duration }

func (l socketDeadlineLocker) lock(ctx context.Context, _ string) (func(context.Context) error, error) {
	deadline, _ := ctx.Deadline()
	time.Sleep(time.Until(deadline) - l.early)
	return nil, os.ErrDeadlineExceeded
}

func (socketDeadlineLocker) close() {}

// An attempt whose socket timed out at its deadline was kept out, not a
// failure of another kind (a loaded CI run reported "1 failed before it").
func TestAnAttemptEndingAtItsDeadlineTimedOut(t *testing.T) {
	_, p, err := tryFor(context.Background(), socketDeadlineLocker{early: time.Millisecond}, "k", 250*time.Millisecond, 100*time.Millisecond)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("tryFor = %v, want the last attempt's timeout", err)
	}
	if p.Failed != 0 || p.TimedOut == 0 {
		t.Fatalf("attempts %+v: want every one timed out", p)
	}
}
