package sleep

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestForWaitsOrStopsWithTheContext(t *testing.T) {
	if err := For(context.Background(), time.Millisecond); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if err := For(ctx, time.Hour); !errors.Is(err, context.Canceled) || time.Since(start) > time.Second {
		t.Fatalf("For on an ended context = %v after %v", err, time.Since(start))
	}
}
