package plan

import "fmt"

// Bots is a spike's population of two kinds: a few scripted buyers
// (bot-0 … bot-N-1) sending Share of all requests between them, in turn,
// and honest buyers sending the rest, each a fresh buyer (honest-0, …)
// who sends one request or, with probability Twice, two back to back.
// At a rate of R requests a second each bot sends Share·R/Count a second;
// an honest buyer's visit lasts about a second, so its rate is 1–2 a
// second, and Share and Count set the bots' multiple of it.
type Bots struct {
	Count int     `yaml:"count" json:"count"`
	Share float64 `yaml:"share" json:"share"`
	Twice float64 `yaml:"twice" json:"twice,omitempty"`
}

// Prefixes of the buyer ids a Bots population names.
const (
	BotPrefix    = "bot-"
	HonestPrefix = "honest-"
)

const maxBots = 10_000

func (b *Bots) validate() error {
	switch {
	case b.Count < 1 || b.Count > maxBots:
		return fmt.Errorf("bots: count must be within [1, %d], got %d", maxBots, b.Count)
	case b.Share <= 0 || b.Share >= 1:
		return fmt.Errorf("bots: share must be within (0, 1), got %v", b.Share)
	case b.Twice < 0 || b.Twice > 1:
		return fmt.Errorf("bots: twice must be a share within [0, 1], got %v", b.Twice)
	}
	return nil
}
