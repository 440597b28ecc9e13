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
