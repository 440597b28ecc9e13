package fault

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
func (st *Step) waitHolding(ctx context.Context, name string, answered <-chan shopapi.Answer) error {
	return st.waitHoldingWithin(ctx, name, answered, holdTimeout)
}

func (st *Step) waitHoldingWithin(ctx context.Context, name string, answered <-chan shopapi.Answer, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	return st.poll(ctx, answered, func() bool {
		counts, _ := st.holders(ctx)
		return counts[name] > 0
	}, name+" holding the lock")
}

// waitStopped waits until a replica is stopped and returns its name.
func (st *Step) waitStopped(ctx context.Context, answered <-chan shopapi.Answer) (string, error) {
	var name string
	err := st.poll(ctx, answered, func() bool {
		if stopped := st.env.Injector.StoppedReplicas(); len(stopped) > 0 {
			name = stopped[0]
			return true
		}
		return false
	}, "a replica stopped before its write")
	if err == nil {
		st.undos = append(st.undos, func() { _ = st.env.Injector.ContinueReplica(name) })
	}
	return name, err
}

// waitOtherHolder waits a little for a holder other than except to be
// inside its critical section.
func (st *Step) waitOtherHolder(ctx context.Context, except string) bool {
	ctx, cancel := context.WithTimeout(ctx, secondHolderWait)
	defer cancel()
	return st.poll(ctx, nil, func() bool {
		counts, _ := st.holders(ctx)
		for name, n := range counts {
			if name != except && n != 0 {
				return true
			}
		}
		return false
	}, "another holder") == nil
}

// poll checks cond until it holds, answered delivers (errAnsweredFirst,
// without taking the answer), or holdTimeout passes.
func (st *Step) poll(ctx context.Context, answered <-chan shopapi.Answer, cond func() bool, what string) error {
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
