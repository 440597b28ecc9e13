package inventory

import (
	"context"
	"fmt"

	"github.com/lockstep/lockstep/internal/gcra"
)

// Admission is a request's rate limits (the front door's limit-redis,
// internal/frontdoor) for a stage that judges them in its sale's own
// script, saving the limiter's round trip: their keys on the stock's
// Redis and their arguments, as internal/gcra's gcra_judge reads them.
type Admission interface {
	LimitKeys() []string
	LimitArgs() []any
	// Refused is the sale's error for the script's refusal {i,
	// retry_after}: nothing sold, no token spent.
	Refused(refusal []any) error
}

type admissionKey struct{}

// WithAdmission returns a context under which a sale of a stage that
// JudgesAdmission judges a's limits in its script before it sells.
func WithAdmission(ctx context.Context, a Admission) context.Context {
	return context.WithValue(ctx, admissionKey{}, a)
}

func admissionOf(ctx context.Context) (Admission, bool) {
	a, ok := ctx.Value(admissionKey{}).(Admission)
	return a, ok
}

// JudgesAdmission says whether stage's sale judges an Admission in its
// own script (atomic, on one Redis); any other stage's limits must be
// asked before the sale.
func (inv *Inventory) JudgesAdmission(stageID string) bool {
	s, err := inv.stage(stageID)
	if err != nil {
		return false
	}
	_, ok := s.(*atomicStage)
	return ok
}

// atomicDeductAdmittedScript is atomic_deduct.lua after admit.lua.
var atomicDeductAdmittedScript = gcra.Script(scriptSource("admit.lua") + scriptSource("atomic_deduct.lua"))

// atomicDeductAdmitted is atomicDeduct with a's limits judged first, in
// the same script run: the remaining stock, ErrSoldOut, errNoStock, or
// a's refusal.
func (s *store) atomicDeductAdmitted(ctx context.Context, tag string, qty int64, a Admission) (int64, error) {
	k := s.keys(tag)
	keys := append([]string{k.stock(), k.sold()}, a.LimitKeys()...)
	args := append([]any{qty}, a.LimitArgs()...)
	res, err := s.run(ctx, atomicDeductAdmittedScript, keys, args...).Result()
	if err != nil {
		return 0, writeFailed("atomic deduct", err)
	}
	switch v := res.(type) {
	case []any:
		return 0, a.Refused(v)
	case int64:
		return atomicResult(v)
	}
	return 0, fmt.Errorf("%w: atomic deduct answered %v", ErrUnavailable, res)
}
