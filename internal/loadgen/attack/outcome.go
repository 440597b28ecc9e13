package attack

import (
	"bytes"
	"net/http"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// Outcome is how an answer is classified (SPEC: a sale is a 200).
type Outcome int

const (
	Sale Outcome = iota
	SoldOut
	Busy
	// AlreadyBought: a one-per-user refusal (409 already_bought), a
	// refusal of its own: neither a busy lock nor a sold out that would end
	// the run.
	AlreadyBought
	// RateLimited: a front door's refusal (429 rate_limited), nothing sold.
	RateLimited
	Error // the last: arrays of every outcome are [NumOutcomes]
)

// NumOutcomes sizes an array indexed by Outcome.
const NumOutcomes = Error + 1

// OutcomeOf classifies a result: as Classify does, but a 409 that is
// already_bought is AlreadyBought.
func OutcomeOf(r *vegeta.Result) Outcome {
	if alreadyBought(r) {
		return AlreadyBought
	}
	return Classify(r.Code)
}

// Classify classifies an HTTP status alone.
func Classify(code uint16) Outcome {
	switch code {
	case http.StatusOK:
		return Sale
	case http.StatusConflict:
		return SoldOut
	case http.StatusLocked:
		return Busy
	case http.StatusTooManyRequests:
		return RateLimited
	}
	return Error
}

// alreadyBought tells a one-per-user refusal (409 already_bought) from a
// sold out (409 sold_out) by the answer's error code.
func alreadyBought(r *vegeta.Result) bool {
	return r.Code == http.StatusConflict && bytes.Contains(r.Body, []byte(`"already_bought"`))
}
