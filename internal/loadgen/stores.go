package loadgen

import (
	"context"

	"github.com/lockstep/lockstep/internal/loadgen/fault"
	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/internal/loadgen/shards"
)

// Stores is what a run reads in the shops' servers, through the set-up
// (internal/storeview implements it on Redis): what the fault steps look
// at, each Cluster master's load, and what the Redis is, for the report.
type Stores interface {
	fault.Stores
	shards.Reader
	Describe(ctx context.Context) report.Component
}
