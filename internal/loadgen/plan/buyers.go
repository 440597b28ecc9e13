package plan

import "fmt"

// Buyers is the population a run's sales are drawn from: each request names
// one of Users buyers (user-0 … user-N-1), and a Share of the draws are
// eager buyers, the scalpers, who send Requests requests at once.
type Buyers struct {
	Users int     `yaml:"users" json:"users"`
	Eager float64 `yaml:"eager" json:"eager,omitempty"`
	// Requests is how many requests an eager buyer sends at once (default 4).
	Requests int `yaml:"requests" json:"requests,omitempty"`
}

// Limits of a buyer population.
const (
	maxUsers         = 10_000_000
	maxEagerRequests = 64
	// DefaultEagerRequests is an eager buyer's Requests when unset.
	DefaultEagerRequests = 4
)

func (b *Buyers) validate() error {
	switch {
	case b.Users < 1 || b.Users > maxUsers:
		return fmt.Errorf("buyers: users must be within [1, %d], got %d", maxUsers, b.Users)
	case b.Eager < 0 || b.Eager > 1:
		return fmt.Errorf("buyers: eager must be a share within [0, 1], got %v", b.Eager)
	case b.Requests < 0 || b.Requests > maxEagerRequests:
		return fmt.Errorf("buyers: requests must be within [1, %d], got %d", maxEagerRequests, b.Requests)
	}
	return nil
}
