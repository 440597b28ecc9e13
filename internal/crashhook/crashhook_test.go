package crashhook

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/lockstep/lockstep/asyncorders"
)

// Each point's signal arms the hook at that point only, and it fires once;
// after-insert only at an insert of a batch read after the arming.
func TestASignalArmsTheHookAtItsPointOnce(t *testing.T) {
	for _, p := range []asyncorders.FaultPoint{asyncorders.AfterRead, asyncorders.AfterInsert} {
		t.Run(string(p), func(t *testing.T) {
			h, err := New(slog.New(slog.NewTextHandler(io.Discard, nil)), "")
			if err != nil {
				t.Fatal(err)
			}
			kills := 0
			h.kill = func() error { kills++; return nil }
			defer h.Listen(context.Background())()
			sig, err := Signal(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := syscall.Kill(syscall.Getpid(), sig); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(5 * time.Second); h.armedAt() != p; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("not armed at %s after %s", p, sig)
				}
			}
			// An insert of a batch read before the arming: armed
			// after-insert, it waits for a batch read after it.
			if err := h.At(asyncorders.AfterInsert); err != nil || kills != 0 {
				t.Fatalf("at %s before a read: %v, %d kills", asyncorders.AfterInsert, err, kills)
			}
			firesOnceAt(t, h, &kills, p, p)
		})
	}
	// Armed twice is armed once: the read between the two armings counts.
	h, err := New(slog.New(slog.NewTextHandler(io.Discard, nil)), asyncorders.AfterInsert)
	if err != nil {
		t.Fatal(err)
	}
	kills := 0
	h.kill = func() error { kills++; return nil }
	_ = h.At(asyncorders.AfterRead)
	h.arm(asyncorders.AfterInsert)
	if err := h.At(asyncorders.AfterInsert); !errors.Is(err, errKilled) || kills != 1 {
		t.Fatalf("armed twice around a read: %v, %d kills", err, kills)
	}
	if _, err := New(slog.New(slog.NewTextHandler(io.Discard, nil)), "after-ack"); err == nil {
		t.Error("armed at an unknown point")
	}
}

// After-claim and after-void have no signal: armed at start, the hook
// fires the first time the worker reaches the point, read or not (a
// worker's first claim comes before its first read), and only there.
func TestTheHookArmedAtStartFiresAtAPointNoSignalArms(t *testing.T) {
	for _, p := range []asyncorders.FaultPoint{asyncorders.AfterClaim, asyncorders.AfterVoid} {
		t.Run(string(p), func(t *testing.T) {
			if _, err := Signal(p); !errors.Is(err, ErrNoSignal) {
				t.Fatalf("signal of %s: %v; want ErrNoSignal", p, err)
			}
			h, err := New(slog.New(slog.NewTextHandler(io.Discard, nil)), p)
			if err != nil {
				t.Fatal(err)
			}
			kills := 0
			h.kill = func() error { kills++; return nil }
			firesOnceAt(t, h, &kills, p, p, asyncorders.AfterRead) // no read before it
		})
	}
}

// firesOnceAt reaches every point but skip, where h must not fire, then
// p, where it must, once.
func firesOnceAt(t *testing.T, h *Hook, kills *int, p asyncorders.FaultPoint, skip ...asyncorders.FaultPoint) {
	t.Helper()
	for _, other := range asyncorders.FaultPoints() {
		if !slices.Contains(skip, other) {
			if err := h.At(other); err != nil || *kills != 0 {
				t.Fatalf("at %s: %v, %d kills", other, err, *kills)
			}
		}
	}
	if err := h.At(p); !errors.Is(err, errKilled) || *kills != 1 {
		t.Fatalf("at %s: %v, %d kills", p, err, *kills)
	}
	if err := h.At(p); err != nil || *kills != 1 {
		t.Fatalf("at %s again: %v, %d kills; want it disarmed", p, err, *kills)
	}
}

func (h *Hook) armedAt() asyncorders.FaultPoint {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.armed
}
