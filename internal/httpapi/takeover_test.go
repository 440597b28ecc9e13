package httpapi

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/redistest"
)

// A request that waited for a dead request's marker and could take the
// key over only near its own deadline does not run the sale then (its
// reply would be lost to the deadline, and the key's order id with it):
// it frees the key, answers that the key is in progress, and the buyer's
// next retry runs the sale with its whole time.
func TestATakeoverNearTheDeadlineLeavesTheSaleToTheNextRetry(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	idem := &idempotency{rdb: rdb, log: log, ttl: time.Minute, pendingTTL: 300 * time.Millisecond, releases: newReleaser(rdb, log)}
	t.Cleanup(idem.releases.close)
	rkey := idem.redisKey("one-per-user-lua", "k")
	// The dead request's marker: claimed, never renewed.
	if res, err := claimKeyScript.Run(context.Background(), rdb, []string{rkey}, "dead", idem.pendingTTL.Milliseconds(), 0).StringSlice(); err != nil || res[0] != "claimed" {
		t.Fatalf("the dead request's claim = %v, %v", res, err)
	}
	ran := 0
	run := func(ctx context.Context) answer {
		ran++
		return answer{Status: 200, Request: "r"}
	}
	// The marker is a lease old 300 ms from now: with 400 ms to live, the
	// request could take the key over with 100 ms left.
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	if _, _, err := idem.do(ctx, "one-per-user-lua", "k", "r", true, run); !errors.Is(err, errPending) || ran != 0 {
		t.Fatalf("a takeover with a quarter of the request's time left: %v, the sale run %d times; want errPending and no sale", err, ran)
	}
	next, cancelNext := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancelNext()
	if a, replayed, err := idem.do(next, "one-per-user-lua", "k", "r", true, run); err != nil || replayed || a.Status != 200 || ran != 1 {
		t.Fatalf("the next retry = %+v, replayed %v, %v, the sale run %d times; want it run once now", a, replayed, err, ran)
	}
}
