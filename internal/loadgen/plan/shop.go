package plan

// Shop is what the shop's code decides that a scenario is checked against
// and a run follows. Whoever runs a scenario gives it (internal/shoprules
// fills it from the stores' packages), so that neither plan nor the
// runner imports them. Its zero value checks nothing and has no async
// stage.
type Shop struct {
	// Async reports whether a stage is async: its sales are queued for
	// order workers. nil: no stage is.
	Async func(stage string) bool
	// MaxStock and MaxSegments are the largest stock and segment count
	// the shop takes; 0: not checked.
	MaxStock, MaxSegments int
	// Faults applies the shop's own rules to a run's fault knobs; nil:
	// not checked.
	Faults func(Faults) error
}

// IsAsync reports whether stage is async in this shop.
func (s Shop) IsAsync(stage string) bool { return s.Async != nil && s.Async(stage) }
