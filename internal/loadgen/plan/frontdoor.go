package plan

import (
	"fmt"
	"slices"
)

// FrontDoor is what stands before a run's stage in every replica (and in
// nginx, for limit-nginx): a rate limiter with its rates per second, and
// the sold-out mark's TTL (0: no mark). The names are
// internal/frontdoor's; the workshop applies it (loadgen.FrontDoors),
// restarting the replicas with it.
type FrontDoor struct {
	Limiter        string   `yaml:"limiter" json:"limiter"`
	Buyer          int      `yaml:"buyer" json:"buyer,omitempty"`
	BuyerBurst     int      `yaml:"buyer_burst" json:"buyer_burst,omitempty"`
	Global         int      `yaml:"global" json:"global,omitempty"`
	GlobalBurst    int      `yaml:"global_burst" json:"global_burst,omitempty"`
	SoldOutMarkTTL Duration `yaml:"soldout_mark_ttl" json:"soldout_mark_ttl,omitempty"`
}

// Limiters are the limiters' names, internal/frontdoor's constants
// (plan imports no Redis client; cmd/workshop's test holds them equal).
var Limiters = []string{"limit-none", "limit-local", "limit-redis", "limit-nginx"}

// LimitNone admits everything; LimitNginx is nginx's limit_req, before
// the replicas; LimitRedis's refusals are Redis round trips.
const (
	LimitNone  = "limit-none"
	LimitNginx = "limit-nginx"
	LimitRedis = "limit-redis"
)

// BuyerAdmits is how many requests of one buyer the per-buyer limit
// admits in d seconds: its burst, then its rate; 0 without one.
func (f FrontDoor) BuyerAdmits(seconds float64) float64 {
	if f.Buyer <= 0 {
		return 0
	}
	return float64(f.BuyerBurst) + float64(f.Buyer)*seconds
}

// Describe is the front door in a few words, e.g. "limit-redis 5/s+5, mark
// 1s": a buyer's rate and burst, then the global one's after "all".
func (f FrontDoor) Describe() string {
	s := f.Limiter
	if s == "" {
		s = LimitNone
	}
	if f.Buyer > 0 {
		s += fmt.Sprintf(" %d/s+%d", f.Buyer, f.BuyerBurst)
	}
	if f.Global > 0 {
		s += fmt.Sprintf(" all %d/s+%d", f.Global, f.GlobalBurst)
	}
	if f.SoldOutMarkTTL > 0 {
		s += ", mark " + f.SoldOutMarkTTL.String()
	}
	return s
}

func (f *FrontDoor) validate() error {
	if f.Limiter == "" {
		f.Limiter = LimitNone
	}
	if f.Buyer > 0 && f.BuyerBurst == 0 {
		f.BuyerBurst = 1
	}
	if f.Global > 0 && f.GlobalBurst == 0 {
		f.GlobalBurst = 1
	}
	switch {
	case !slices.Contains(Limiters, f.Limiter):
		return fmt.Errorf("front_door: limiter %q: want one of %v", f.Limiter, Limiters)
	case f.Buyer < 0 || f.Global < 0 || f.BuyerBurst < 0 || f.GlobalBurst < 0:
		return fmt.Errorf("front_door: rates and bursts must be at least 0")
	case f.SoldOutMarkTTL < 0:
		return fmt.Errorf("front_door: soldout_mark_ttl must be at least 0")
	case f.Limiter != LimitNone && f.Buyer == 0 && f.Global == 0:
		return fmt.Errorf("front_door: %s needs a buyer or a global rate", f.Limiter)
	}
	return nil
}
