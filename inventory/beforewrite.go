package inventory

import (
	"context"
	"fmt"
)

// beforeWriteKey carries a sale's beforeWrite function in its context.
type beforeWriteKey struct{}

// WithBeforeWrite returns a context under which a sale calls f right before
// its stock write — the point from which it may have sold — and sells
// nothing when f fails. The shop's idempotency keys make their claim
// durable there; f is request-scoped, hence a context value.
func WithBeforeWrite(ctx context.Context, f func(context.Context) error) context.Context {
	return context.WithValue(ctx, beforeWriteKey{}, f)
}

// beforeWrite runs ctx's beforeWrite function, if any, and checks that the
// buyer is still there: a sale whose request ended sells nothing.
func beforeWrite(ctx context.Context) error {
	if ctx.Err() != nil {
		return heldError(ctx, context.Cause(ctx))
	}
	f, _ := ctx.Value(beforeWriteKey{}).(func(context.Context) error)
	if f == nil {
		return nil
	}
	if err := f(ctx); err != nil {
		return unavailable("before the stock write", fmt.Errorf("nothing sold: %w", err))
	}
	return nil
}

// workThenWrite is the opening of a sale without a lock: the stage's work
// (the fault's work time), then beforeWrite. A sale that fails it sold
// nothing.
func workThenWrite(ctx context.Context, f Faults) error {
	if err := sleep(ctx, f.workTime()); err != nil {
		return heldError(ctx, err)
	}
	return beforeWrite(ctx)
}
