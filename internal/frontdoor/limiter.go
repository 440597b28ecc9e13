package frontdoor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Sentinel errors New answers with.
var (
	ErrUnknownLimiter = errors.New("frontdoor: unknown limiter")
	// ErrNotInProcess is limit-nginx's: its limit lives in nginx, before
	// the replicas, and a replica cannot enforce it.
	ErrNotInProcess = errors.New("frontdoor: limiter is not in this process (nginx limit_req does it)")
)

// Names of the limiters, as a stage or flag spells them.
const (
	None  = "limit-none"
	Local = "limit-local"
	Redis = "limit-redis"
	Nginx = "limit-nginx"
)

// Rate is Events per Per with bursts of up to Burst; zero Events is no limit.
type Rate struct {
	Events int
	Per    time.Duration
	Burst  int
}

func (r Rate) unlimited() bool { return r.Events <= 0 }

// Limits are a limiter's two rates.
type Limits struct {
	PerBuyer Rate
	Global   Rate
}

// Decision is a limiter's answer for one request.
type Decision struct {
	Allowed bool
	// RetryAfter is when a refused request may be admitted, at least 1 ms.
	RetryAfter time.Duration
	// Scope says which limit refused: "buyer" or "global".
	Scope string
}

// Limiter decides whether a buyer's request may go on to the stage.
type Limiter interface {
	// Allow spends a token of buyer's limit and of the global one, or
	// refuses. An error means the limiter could not decide; the caller
	// refuses the request (fail closed).
	Allow(ctx context.Context, buyer string) (Decision, error)
}

// New is the limiter called name. rdb is used by limit-redis only.
func New(name string, l Limits, rdb redis.UniversalClient) (Limiter, error) {
	switch name {
	case None, "":
		return noLimit{}, nil
	case Local:
		return newLocalLimiter(l), nil
	case Redis:
		if rdb == nil {
			return nil, fmt.Errorf("frontdoor: %s needs a Redis client", name)
		}
		return newRedisLimiter(rdb, l), nil
	case Nginx:
		return nil, ErrNotInProcess
	}
	return nil, fmt.Errorf("%w: %q", ErrUnknownLimiter, name)
}

func refused(scope string, after time.Duration) Decision {
	return Decision{RetryAfter: max(after, time.Millisecond), Scope: scope}
}
