// Package slotretry retries what a Redis Cluster refuses while a slot
// moves between masters, or has no master for a moment: TRYAGAIN (a
// multi-key command or script whose keys are split between the two nodes
// for a moment), MOVED or ASK that go-redis stopped following (it follows
// three, and its TRYAGAIN retries count among them), and CLUSTERDOWN (a
// failover under way). Redis answers each of them without running the
// command, so running it again cannot apply it twice.
package slotretry

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// Backoff between attempts, doubling from first up to most.
const (
	first = 5 * time.Millisecond
	most  = 200 * time.Millisecond
)

// Refused reports an error a moving slot answers before running anything,
// or CLUSTERDOWN, which a node answers while its slot has no master (a
// failover under way), again without running the command.
func Refused(err error) bool {
	if err == nil {
		// Most calls: go-redis's HasErrorPrefix would allocate its
		// errors.As target four times to say no.
		return false
	}
	return redis.HasErrorPrefix(err, "TRYAGAIN") || redis.HasErrorPrefix(err, "MOVED") || redis.HasErrorPrefix(err, "ASK") ||
		redis.HasErrorPrefix(err, "CLUSTERDOWN")
}

// Do runs op until its error is not Refused or ctx is done, and returns
// its last command.
func Do[C redis.Cmder](ctx context.Context, op func() C) C {
	var cmd C
	_ = DoErr(ctx, func() error {
		cmd = op()
		return cmd.Err()
	})
	return cmd
}

// DoErr runs op until its error is not Refused or ctx is done, and returns
// its last error (a transaction's, say).
func DoErr(ctx context.Context, op func() error) error {
	backoff := first
	for {
		err := op()
		if !Refused(err) {
			return err
		}
		timer := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			timer.Stop()
			return err
		case <-timer.C:
		}
		backoff = min(2*backoff, most)
	}
}
