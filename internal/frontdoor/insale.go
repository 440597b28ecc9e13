package frontdoor

import "fmt"

// InSale is a limiter whose judgement a sale's own script can make on the
// Redis that keeps the stock, in the sale's one round trip instead of a
// round trip of its own before it: limit-redis on one Redis, for a stage
// whose script takes it (inventory.Inventory.JudgesAdmission).
type InSale interface {
	Limiter
	// Admission is buyer's limits for the sale's script; false when they
	// cannot be judged there (on a Cluster the stock's keys and the
	// limits' live in different slots), and Allow must be asked.
	Admission(buyer string) (Admission, bool)
}

// Admission is a request's limits as a sale's script judges them
// (inventory.Admission): the script is internal/gcra's, and hands
// LimitKeys and LimitArgs to gcra_judge after its own.
type Admission struct {
	keys   []string
	args   []any
	limits []limit // the scope of each key's refusal
}

func (a Admission) LimitKeys() []string { return a.keys }
func (a Admission) LimitArgs() []any    { return a.args }

// Refused is the error of a sale whose script's gcra_judge refused it
// with refusal ({i, retry_after}): a *Refusal.
func (a Admission) Refused(refusal []any) error {
	d, err := decodeRefusal(a.limits, refusal)
	if err != nil {
		return err
	}
	return &Refusal{Decision: d}
}

// Refusal is a sale refused by a limit its own script judged: nothing
// sold, no token spent.
type Refusal struct{ Decision Decision }

func (r *Refusal) Error() string {
	return fmt.Sprintf("frontdoor: the %s rate limit refused this request; nothing was sold", r.Decision.Scope)
}
