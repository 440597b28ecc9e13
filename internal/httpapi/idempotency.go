package httpapi

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/lockstep/lockstep/inventory"
	"github.com/redis/go-redis/v9"
)

//go:embed scripts/*.lua
var scriptFiles embed.FS

// Scripts are the Lua scripts the package runs, for tools that name the
// script an EVALSHA runs (the workshop's traces of a sale's commands).
func Scripts() fs.FS { return scriptFiles }

func loadScript(name string) *redis.Script {
	src, err := scriptFiles.ReadFile("scripts/" + name)
	if err != nil {
		panic(fmt.Sprintf("httpapi: embedded script %s: %v", name, err)) // a build defect, caught by every test
	}
	return redis.NewScript(string(src))
}

var (
	storeAnswerScript    = loadScript("idempotency_store.lua")
	releasePendingScript = loadScript("idempotency_release.lua")
)

const (
	pendingPrefix = "pending:"
	// pollMin and pollMax bound the pause between looks at a pending key.
	pollMin = 2 * time.Millisecond
	pollMax = 50 * time.Millisecond
	// maxIdempotencyKey bounds the header's length.
	maxIdempotencyKey = 255
)

// errPending: the request with this key is still running elsewhere and did
// not finish within this request's deadline.
var errPending = errors.New("a request with this Idempotency-Key is still in progress")

// errKeyReused: the key was first used for a different request.
var errKeyReused = errors.New("this Idempotency-Key was used for a different request")

// answer is a response as the idempotency store keeps it.
type answer struct {
	Status  int             `json:"status"`
	Body    json.RawMessage `json:"body"`
	Request string          `json:"request"` // what was asked, to refuse a key reused for another request
}

// idempotency makes a deduct with an Idempotency-Key run at most once per
// stage and key across all replicas. The first request puts a pending
// marker (SET NX, expiring after the longest a request can run), runs, and
// replaces the marker with its answer (kept for ttl). A request that finds
// the marker polls until the answer is there, then returns it. An answer
// that sold nothing and says "try again" (lock busy) is not kept: its
// marker is deleted so a retry runs anew.
type idempotency struct {
	rdb        redis.UniversalClient
	log        *slog.Logger
	ttl        time.Duration
	pendingTTL time.Duration
}

func validIdempotencyKey(k string) bool {
	if len(k) == 0 || len(k) > maxIdempotencyKey {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// redisKey hashes the client's key so any printable key makes a short key
// name, and tags it so the key is one Cluster slot on its own.
func (idem *idempotency) redisKey(stage, key string) string {
	sum := sha256.Sum256([]byte(key))
	return "lockstep:" + stage + ":idempotency:{" + hex.EncodeToString(sum[:16]) + "}"
}

// do returns the answer of the request with key: run's, or the stored one
// of an earlier run (replayed true). request describes what is asked.
func (idem *idempotency) do(ctx context.Context, stage, key, request string, run func() answer) (a answer, replayed bool, err error) {
	rkey := idem.redisKey(stage, key)
	marker := pendingPrefix + rand.Text()
	poll := pollMin
	for {
		took, err := idem.rdb.SetNX(ctx, rkey, marker, idem.pendingTTL).Result()
		if err != nil {
			return answer{}, false, fmt.Errorf("idempotency: claim key: %w: %w", inventory.ErrUnavailable, err)
		}
		if took {
			return idem.run(ctx, rkey, marker, request, run), false, nil
		}
		stored, err := idem.rdb.Get(ctx, rkey).Result()
		switch {
		case errors.Is(err, redis.Nil):
			continue // released or expired meanwhile: claim it
		case err != nil:
			return answer{}, false, fmt.Errorf("idempotency: read key: %w: %w", inventory.ErrUnavailable, err)
		case !strings.HasPrefix(stored, pendingPrefix):
			if err := json.Unmarshal([]byte(stored), &a); err != nil {
				return answer{}, false, fmt.Errorf("idempotency: stored answer: %w", err)
			}
			if a.Request != request {
				return answer{}, false, errKeyReused
			}
			return a, true, nil
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return answer{}, false, errPending
		case <-t.C:
		}
		poll = min(2*poll, pollMax)
	}
}

// run executes the request under our marker and settles the key.
func (idem *idempotency) run(ctx context.Context, rkey, marker, request string, run func() answer) answer {
	a := run()
	a.Request = request
	// Settle even when the client went away: the answer is what a retry gets.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	if a.Status == http.StatusLocked {
		if err := releasePendingScript.Run(ctx, idem.rdb, []string{rkey}, marker).Err(); err != nil {
			idem.log.Warn("idempotency: release key", "err", err)
		}
		return a
	}
	stored, err := json.Marshal(a)
	if err == nil {
		err = storeAnswerScript.Run(ctx, idem.rdb, []string{rkey}, marker, stored, idem.ttl.Milliseconds()).Err()
	}
	if err != nil {
		// The marker expires after pendingTTL and a retry runs again: Redis
		// was unreachable, so the sale most likely did not happen either.
		idem.log.Warn("idempotency: store answer", "err", err)
	}
	return a
}
