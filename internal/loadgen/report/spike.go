package report

import (
	"fmt"
	"slices"
)

// Spike is what a run with bots (plan.Bots) saw of its two kinds of
// buyer and of its front door (internal/loadgen/spike fills it).
type Spike struct {
	// Buyers seen of each kind, their requests, and the units they got.
	HonestBuyers   int `json:"honest_buyers"`
	Bots           int `json:"bots"`
	HonestRequests int `json:"honest_requests"`
	BotRequests    int `json:"bot_requests"`
	HonestUnits    int `json:"honest_units"`
	BotUnits       int `json:"bot_units"`
	// BotsAdmitted are the bots' requests the limiter let through.
	BotsAdmitted int `json:"bots_admitted"`
	// RateLimited are the limiter's refusals (429); MarkAnswers the
	// sold-out mark's (409 from memory).
	RateLimited int `json:"rate_limited"`
	MarkAnswers int `json:"mark_answers"`
	// ReachedRedis are the requests that cost the stock's Redis a round
	// trip: every one but the mark's answers and, unless the limiter is
	// limit-redis (itself a Redis call), the limiter's refusals.
	// AfterSoldOut of them were sent after the first sold-out answer.
	ReachedRedis             int     `json:"reached_redis"`
	ReachedRedisAfterSoldOut int     `json:"reached_redis_after_sold_out"`
	RedisPerUnit             float64 `json:"redis_per_unit"`
	// HonestP99MS is the honest buyers' answers' 99th percentile.
	HonestP99MS float64 `json:"honest_p99_ms"`
	// SoldOutMS is when the first sold-out answer came, from the start;
	// 0 when the stock never ran out.
	SoldOutMS float64 `json:"sold_out_ms"`
}

// BotUnitShare is the bots' share of the units sold.
func (s *Spike) BotUnitShare() float64 {
	if s.HonestUnits+s.BotUnits == 0 {
		return 0
	}
	return float64(s.BotUnits) / float64(s.HonestUnits+s.BotUnits)
}

// BotHeadShare is the bots' share of the buyers.
func (s *Spike) BotHeadShare() float64 {
	if s.HonestBuyers+s.Bots == 0 {
		return 0
	}
	return float64(s.Bots) / float64(s.HonestBuyers+s.Bots)
}

// spiked reports whether a row of rep had bots: the spike's columns are
// shown then only.
func spiked(rep *Report) bool {
	return slices.ContainsFunc(rep.Stages, func(r StageRun) bool { return r.Spike != nil })
}

// spikeCell is a spike column's text, "-" for a row without bots.
func spikeCell(f func(*Spike) string) func(*StageRun) string {
	return func(r *StageRun) string {
		if r.Spike == nil {
			return "-"
		}
		return f(r.Spike)
	}
}

func (*Spike) columns() []resultColumn {
	col := func(head, htmlHead string, f func(*Spike) string) resultColumn {
		return resultColumn{head: head, htmlHead: htmlHead, table: frontDoorTable, text: spikeCell(f), shown: spiked}
	}
	return []resultColumn{
		col("units honest/bots", "units honest / bots", func(s *Spike) string { return fmt.Sprintf("%d/%d", s.HonestUnits, s.BotUnits) }),
		col("redis/unit", "requests reaching Redis per unit", func(s *Spike) string { return fmt.Sprintf("%.1f", s.RedisPerUnit) }),
		col("honest p99", "honest p99 ms", func(s *Spike) string { return fmt.Sprintf("%.1f", s.HonestP99MS) }),
		col("sold out at", "sold out at ms", func(s *Spike) string { return fmt.Sprintf("%.0fms", s.SoldOutMS) }),
		col("limited", "refused by the limiter", func(s *Spike) string { return fmt.Sprint(s.RateLimited) }),
	}
}
