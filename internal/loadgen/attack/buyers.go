package attack

import (
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync"

	"github.com/lockstep/lockstep/internal/loadgen/plan"
	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// buyerTargeter returns a vegeta targeter of sales to deduct (a URL with
// its query) that each name a buyer: a buyer drawn at random, or, for an
// eager draw, one buyer for the next several targets, which the attack's
// free workers send at once. rng is the targeter's own, under its lock.
func buyerTargeter(deduct string, b plan.Buyers, rng *rand.Rand) vegeta.Targeter {
	var mu sync.Mutex
	var user string
	var repeat int
	burst := b.Requests
	if burst == 0 {
		burst = plan.DefaultEagerRequests
	}
	return func(t *vegeta.Target) error {
		mu.Lock()
		if repeat == 0 {
			user = "user-" + strconv.Itoa(rng.IntN(b.Users))
			repeat = 1
			if rng.Float64() < b.Eager {
				repeat = burst
			}
		}
		repeat--
		name := user
		mu.Unlock()
		t.Method, t.URL, t.Body, t.Header = http.MethodPost, deduct+"&user="+url.QueryEscape(name), nil, nil
		return nil
	}
}

// botTargeter returns a vegeta targeter of sales naming a spike's two
// kinds of buyer (plan.Bots): a bot's, in turn, for a Share of the draws,
// else the next honest buyer's, a fresh one who sends a second request
// right after the first for a Twice of them.
func botTargeter(deduct string, b plan.Bots, rng *rand.Rand) vegeta.Targeter {
	var mu sync.Mutex
	var honest, bot int
	var again bool // the last honest buyer sends another
	return func(t *vegeta.Target) error {
		mu.Lock()
		var name string
		switch {
		case rng.Float64() < b.Share:
			name = plan.BotPrefix + strconv.Itoa(bot%b.Count)
			bot++
		case again:
			name, again = plan.HonestPrefix+strconv.Itoa(honest-1), false
		default:
			name = plan.HonestPrefix + strconv.Itoa(honest)
			honest++
			again = rng.Float64() < b.Twice
		}
		mu.Unlock()
		t.Method, t.URL, t.Body, t.Header = http.MethodPost, deduct+"&user="+url.QueryEscape(name), nil, nil
		return nil
	}
}
