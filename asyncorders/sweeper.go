package asyncorders

import (
	"context"
	"log/slog"
	"time"

	"github.com/lockstep/lockstep/orders"
)

// sweepBatch bounds the orders one pass cancels or gives back.
const sweepBatch = 200

// Sweeper cancels the orders of one async stage left unpaid past their
// deadline and puts their units back on sale, once: the cancel is a
// compare-and-set in the order database (orders.Payments), so a payment
// racing it either wins or finds the order cancelled; the units go back
// under the order id's mark (compensate.lua), so a sweeper killed between
// the two, or two sweepers, return them once.
type Sweeper struct {
	q        *Queue
	payments *orders.Payments
	every    time.Duration
	log      *slog.Logger
	// betweenCancelAndReturn, set by tests only, runs after a pass's
	// cancels, before it gives their units back; an error ends the pass
	// there, as a sweeper killed right then.
	betweenCancelAndReturn func() error
}

// NewSweeper sweeps q's stage every every.
func NewSweeper(q *Queue, payments *orders.Payments, every time.Duration, log *slog.Logger) *Sweeper {
	return &Sweeper{q: q, payments: payments, every: every, log: log.With("stage", q.stage, "role", "sweeper")}
}

// Run sweeps until ctx ends.
func (s *Sweeper) Run(ctx context.Context) error {
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		if err := s.Sweep(ctx, time.Now()); err != nil && ctx.Err() == nil {
			s.log.Warn("sweep", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Sweep is one pass at now: cancel what expired, then give back the units
// of every cancelled order not yet recorded as given back.
func (s *Sweeper) Sweep(ctx context.Context, now time.Time) error {
	cancelled, err := s.payments.CancelExpired(ctx, s.q.stage, now, sweepBatch)
	if len(cancelled) > 0 {
		s.log.Info("cancelled unpaid orders", "orders", len(cancelled))
	}
	if err != nil {
		return err
	}
	if s.betweenCancelAndReturn != nil {
		if err := s.betweenCancelAndReturn(); err != nil {
			return err
		}
	}
	due, err := s.payments.Unreturned(ctx, s.q.stage, sweepBatch)
	if err != nil {
		return err
	}
	for _, o := range due {
		// o.Round is the order table's round when the order was cancelled
		// (orders.Payments reads it in the cancel's transaction): a reset
		// since has replaced the stock its units were in, and compensate.lua
		// gives nothing back then.
		c := compensation{mark: o.ID, reason: "payment timeout", qty: o.Qty, freeBuyer: o.User, round: o.Round, fenced: true}
		if _, err := s.q.compensate(ctx, o.SKU, c); err != nil {
			return err
		}
		if err := s.payments.MarkReturned(ctx, o.ID); err != nil {
			return err
		}
	}
	return nil
}
