package expect

import (
	"fmt"

	"github.com/lockstep/lockstep/internal/loadgen/report"
)

// spikeMakers are the checks of a run with bots; they read its Spike
// record.
func spikeMakers() map[string]maker {
	return map[string]maker{
		"bots-outbuy-headcount":        botsOutbuyHeadcount,
		"bots-admitted-per-limit":      botsAdmittedPerLimit,
		"redis-after-sold-out-at-most": redisAfterSoldOutAtMost,
	}
}

// spikeOf is r's Spike, or why a check cannot judge it.
func spikeOf(r *report.StageRun) (*report.Spike, string) {
	if r.Spike == nil {
		return nil, "no bots in this run (the run's bots: population)"
	}
	return r.Spike, ""
}

// botsOutbuyHeadcount: the bots' share of the units is at least factor
// times their share of the buyers (limit-none: a bot wins units in
// proportion to its requests, not its head).
func botsOutbuyHeadcount(args []string) (checkFunc, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf(`want "bots-outbuy-headcount <factor>x"`)
	}
	factor, err := factorArg(args[0])
	if err != nil {
		return nil, err
	}
	return func(r *report.StageRun, _ []report.StageRun) (bool, string) {
		s, why := spikeOf(r)
		if s == nil {
			return false, why
		}
		units, heads := s.BotUnitShare(), s.BotHeadShare()
		return heads > 0 && units >= factor*heads, fmt.Sprintf("%d bots of %d buyers (%.2f%%) got %d of %d units (%.1f%%)",
			s.Bots, s.Bots+s.HonestBuyers, 100*heads, s.BotUnits, s.BotUnits+s.HonestUnits, 100*units)
	}, nil
}

// botsAdmittedPerLimit: a bot's requests the front door let through are
// within lo–hi times what its per-buyer limit admits over the run (its
// burst, then its rate): about 1x for a limiter shared by every replica,
// about replicas× for one per replica.
func botsAdmittedPerLimit(args []string) (checkFunc, error) {
	if len(args) != 2 {
		return nil, fmt.Errorf(`want "bots-admitted-per-limit <lo>x <hi>x"`)
	}
	lo, err := factorArg(args[0])
	if err != nil {
		return nil, err
	}
	hi, err := factorArg(args[1])
	if err != nil {
		return nil, err
	}
	return func(r *report.StageRun, _ []report.StageRun) (bool, string) {
		s, why := spikeOf(r)
		switch {
		case s == nil:
			return false, why
		case r.FrontDoor == nil || r.FrontDoor.Buyer == 0:
			return false, "the run's front door has no per-buyer limit"
		case s.Bots == 0:
			return false, "no bot sent a request"
		}
		limit := r.FrontDoor.BuyerAdmits(r.ElapsedMS / 1000)
		per := float64(s.BotsAdmitted) / float64(s.Bots)
		ratio := per / limit
		return ratio >= lo && ratio <= hi, fmt.Sprintf("%.1f requests admitted per bot, %.2fx the %.1f a limit of %s admits in %.1f s",
			per, ratio, limit, r.FrontDoor.Describe(), r.ElapsedMS/1000)
	}, nil
}

// redisAfterSoldOutAtMost: at most n requests sent after the first
// sold-out answer cost the stock's Redis a round trip (the sold-out mark:
// each replica learns once).
func redisAfterSoldOutAtMost(args []string) (checkFunc, error) {
	n, err := countArg(args)
	if err != nil {
		return nil, err
	}
	return func(r *report.StageRun, _ []report.StageRun) (bool, string) {
		s, why := spikeOf(r)
		switch {
		case s == nil:
			return false, why
		case s.SoldOutMS == 0:
			return false, "the stock never ran out"
		}
		return int64(s.ReachedRedisAfterSoldOut) <= n, fmt.Sprintf("%d requests sent after the sell-out (at %.0f ms) reached Redis, %d answered by the mark; want at most %d",
			s.ReachedRedisAfterSoldOut, s.SoldOutMS, s.MarkAnswers, n)
	}, nil
}
