package loadgen

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

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
	defaultEager     = 4
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

// buyerTargeter returns a vegeta targeter of sales to deduct (a URL with
// its query) that each name a buyer: a buyer drawn at random, or, for an
// eager draw, one buyer for the next several targets, which the attack's
// free workers send at once. rng is the targeter's own, under its lock.
func buyerTargeter(deduct string, b Buyers, rng *rand.Rand) vegeta.Targeter {
	var mu sync.Mutex
	var user string
	var repeat int
	burst := b.Requests
	if burst == 0 {
		burst = defaultEager
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

// alreadyBought tells a one-per-user refusal (409 already_bought) from a
// sold out (409 sold_out) by the answer's error code.
func alreadyBought(r *vegeta.Result) bool {
	return r.Code == http.StatusConflict && bytes.Contains(r.Body, []byte(`"already_bought"`))
}
