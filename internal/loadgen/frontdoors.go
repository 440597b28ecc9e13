package loadgen

import (
	"context"

	"github.com/lockstep/lockstep/internal/loadgen/plan"
)

// FrontDoors puts a run's limiter and sold-out mark before the stages: a
// replica takes them as process settings (cmd/shop's --limiter, --limit-*,
// --soldout-mark-ttl) and nginx as its configuration (limit-nginx), so
// the workshop restarts the replicas, or reloads nginx, with them. Use
// runs before every run, with nil for a run that names none: the set-up's
// own front door then. It returns once every replica is ready again.
type FrontDoors interface {
	Use(ctx context.Context, fd *plan.FrontDoor) error
}
