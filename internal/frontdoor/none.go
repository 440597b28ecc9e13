package frontdoor

import "context"

// noLimit is limit-none: every request goes on to the stage.
type noLimit struct{}

func (noLimit) Allow(context.Context, string) (Decision, error) {
	return Decision{Allowed: true}, nil
}
