package loadgen

import (
	"context"
	"errors"
	"fmt"
	"github.com/lockstep/lockstep/internal/loadgen/shopapi"
	"time"
)

// errAnsweredFirst: the sale a step waited on answered before it held its
// lock (or stopped).
var errAnsweredFirst = errors.New("the sale answered before it held the lock")

// waitHolding waits until the named replica has a sale inside the critical
// section (track_holders), or its sale answered.
func (st *faultState) waitHolding(ctx context.Context, name string, answered <-chan shopapi.Answer) error {
	return st.waitHoldingWithin(ctx, name, answered, holdTimeout)
}

func (st *faultState) waitHoldingWithin(ctx context.Context, name string, answered <-chan shopapi.Answer, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	key := st.holdersKey()
	return st.poll(ctx, answered, func() bool {
		n, _ := st.r.holders.HGet(ctx, key, name).Int()
		return n > 0
	}, name+" holding the lock")
}

// waitStopped waits until a replica is stopped and returns its name.
func (st *faultState) waitStopped(ctx context.Context, answered <-chan shopapi.Answer) (string, error) {
	var name string
	err := st.poll(ctx, answered, func() bool {
		if stopped := st.r.cfg.Injector.StoppedReplicas(); len(stopped) > 0 {
			name = stopped[0]
			return true
		}
		return false
	}, "a replica stopped before its write")
	if err == nil {
		st.undos = append(st.undos, func() { _ = st.r.cfg.Injector.ContinueReplica(name) })
	}
	return name, err
}

// waitOtherHolder waits a little for a holder other than except to be
// inside its critical section.
func (st *faultState) waitOtherHolder(ctx context.Context, except string) bool {
	key := st.holdersKey()
	ctx, cancel := context.WithTimeout(ctx, secondHolderWait)
	defer cancel()
	return st.poll(ctx, nil, func() bool {
		counts, _ := st.r.holders.HGetAll(ctx, key).Result()
		for name, n := range counts {
			if name != except && n != "0" {
				return true
			}
		}
		return false
	}, "another holder") == nil
}

// poll checks cond until it holds, answered delivers (errAnsweredFirst,
// without taking the answer), or holdTimeout passes.
func (st *faultState) poll(ctx context.Context, answered <-chan shopapi.Answer, cond func() bool, what string) error {
	ctx, cancel := context.WithTimeout(ctx, holdTimeout)
	defer cancel()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for !cond() {
		if answered != nil && len(answered) > 0 {
			return errAnsweredFirst
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-tick.C:
		}
	}
	return nil
}
