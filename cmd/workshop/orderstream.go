package main

import (
	"context"
	"fmt"

	"github.com/lockstep/lockstep/asyncorders"
	"github.com/lockstep/lockstep/internal/loadgen/fault"
	"github.com/lockstep/lockstep/internal/redisclient"
)

// OrderStream reads an async stage's stream in the stock's Redis, for the
// fault steps that must not wait on the shop's audit.
func (in *injector) OrderStream(ctx context.Context, stage, sku string) (asyncorders.Stats, error) {
	var s asyncorders.Stats
	err := in.withStream(stage, func(q *asyncorders.Queue) error {
		var err error
		s, err = q.Stats(ctx, sku)
		return err
	})
	return s, err
}

// HeldEntries lists what the named order worker read and did not
// acknowledge (asyncorders.Queue.HeldBy).
func (in *injector) HeldEntries(ctx context.Context, stage, sku, worker string) ([]fault.HeldEntry, error) {
	var out []fault.HeldEntry
	err := in.withStream(stage, func(q *asyncorders.Queue) error {
		held, err := q.HeldBy(ctx, sku, worker)
		for _, h := range held {
			out = append(out, fault.HeldEntry{Entry: h.Entry, OrderID: h.OrderID, Deliveries: h.Deliveries})
		}
		return err
	})
	return out, err
}

// withStream runs f on stage's queue in the order workers' Redis, on a
// client of its own: the steps read the stream a few times a run.
func (in *injector) withStream(stage string, f func(*asyncorders.Queue) error) error {
	if in.workers == nil || in.workers.redisAddr == "" {
		return fmt.Errorf("the order stream: %w", errSetUp)
	}
	rdb := redisclient.New(redisclient.Settings{}, in.workers.redisAddr)
	defer rdb.Close()
	return f(asyncorders.NewQueue(rdb, stage))
}
