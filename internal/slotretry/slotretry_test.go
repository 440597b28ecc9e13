package slotretry

import (
	"context"
	"errors"
	"testing"
	"time"
)

type proto string

func (e proto) Error() string { return string(e) }
func (proto) RedisError()     {}

func TestRetriesOnlyWhatAMovingSlotRefuses(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		err   error
		tries int
	}{
		{proto("TRYAGAIN Multiple keys request during rehashing of slot"), 3},
		{proto("MOVED 4114 127.0.0.1:7001"), 3},
		{proto("ASK 4114 127.0.0.1:7001"), 3},
		{proto("CLUSTERDOWN The cluster is down"), 3},
		{proto("ERR wrong number of arguments"), 1},
		{errors.New("dial tcp: connection refused"), 1},
		{nil, 1},
	} {
		n := 0
		err := DoErr(ctx, func() error {
			n++
			if n < 3 {
				return tc.err
			}
			return nil
		})
		if n != tc.tries || (tc.tries == 3 && err != nil) {
			t.Errorf("%v: %d tries, %v; want %d", tc.err, n, err, tc.tries)
		}
	}
}

func TestStopsWhenTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := DoErr(ctx, func() error { return proto("TRYAGAIN") })
	if !Refused(err) || time.Since(start) > time.Second {
		t.Fatalf("%v after %v", err, time.Since(start))
	}
}

// Every Redis call of a sale passes its error through Refused, nearly
// always nil: go-redis's HasErrorPrefix allocates its errors.As target even
// then, four times per call (four allocations per sale in the shop's
// profile).
func TestRefusedAllocatesNothingForNoError(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { _ = Refused(nil) }); n != 0 {
		t.Errorf("Refused(nil) allocates %.0f times, want 0", n)
	}
}
