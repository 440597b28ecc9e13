package plan

// Shop is what the shop's code decides that a scenario is checked against
// and a run follows. Whoever runs a scenario gives it (scenarios.Shop
// fills it from the stores' packages), so that neither plan nor the
// runner imports them.
type Shop struct {
	// Async reports whether a stage is async: its sales are queued for
	// order workers. nil: no stage is.
	Async func(stage string) bool
}

// IsAsync reports whether stage is async in this shop.
func (s Shop) IsAsync(stage string) bool { return s.Async != nil && s.Async(stage) }
