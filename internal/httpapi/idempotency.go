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
	"strconv"
	"time"

	"github.com/lockstep/lockstep/internal/outcome"
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
	claimKeyScript       = loadScript("idempotency_claim.lua")
	commitClaimScript    = loadScript("idempotency_commit.lua")
	storeAnswerScript    = loadScript("idempotency_store.lua")
	releasePendingScript = loadScript("idempotency_release.lua")
	beatScript           = loadScript("idempotency_beat.lua")
)

const (
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

// errOutcomeUnknown: the key's first request started long enough ago to
// have finished, and its outcome was never recorded.
var errOutcomeUnknown = errors.New("the first request with this Idempotency-Key never recorded its outcome " +
	"(its replica stopped, or Redis failed during the sale): it may have sold; check the audit, and use a new key to buy again")

// settlement is what becomes of an idempotency key once its request ran.
type settlement int

const (
	// release: provably nothing sold (busy, sold out, a failure before the
	// stock write): the key is freed, and a retry with it runs anew.
	release settlement = iota
	// keep: the sale happened; its answer is what every retry gets.
	keep
	// unknown: the stock write was sent and its reply lost; the key stays
	// claimed, and retries learn that its outcome is unknown.
	unknown
)

// answer is a response as the idempotency store keeps it.
type answer struct {
	Status  int             `json:"status"`
	Body    json.RawMessage `json:"body"`
	Request string          `json:"request"` // what was asked, to refuse a key reused for another request
	settle  settlement
	// retryAfter is a rate limit's Retry-After: a refusal, never stored.
	retryAfter time.Duration
}

// idempotency makes a deduct with an Idempotency-Key sell at most once per
// stage and key across all replicas. The first request claims the key with
// a pending marker, a lease of pendingTTL that its owner renews (beat)
// while it runs and settles, however long that takes: no fixed guess of a
// request's longest run. Right before its stock write the sale makes the
// marker last as long as an answer (a claim it no longer holds stops the
// sale): from then on the write may have run. Then it settles the key:
// the answer of a sale replaces the marker, and a request that provably
// sold nothing deletes it, so the buyer may retry with the same key (when
// Redis refuses that, the deletion is retried in the background until it
// is done: releaser). A request that finds the marker polls until there
// is an answer or the key is free again. A marker not renewed for a lease
// belongs to a request that reached its write and whose outcome was lost
// (its replica died, its answer could not be stored): the key answers
// errOutcomeUnknown for its lifetime rather than risk a second sale —
// except on the stages whose keyed sales name their order by the key,
// where running the sale again finishes it (or finds it voided and sells
// under the next id) and cannot sell twice: there the next request takes
// the key over.
type idempotency struct {
	rdb        redis.UniversalClient
	log        *slog.Logger
	ttl        time.Duration
	pendingTTL time.Duration
	releases   *releaser
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
// resumes: the stage's keyed sales finish the sale an earlier request with
// the key started (inventory.ResumesKeyedSales), so a key whose owner
// stopped for a lease is taken over and run again rather than answered
// errOutcomeUnknown.
func (idem *idempotency) do(ctx context.Context, stage, key, request string, resumes bool, run func(context.Context) answer) (a answer, replayed bool, err error) {
	rkey := idem.redisKey(stage, key)
	var takeover int64
	if resumes {
		takeover = idem.pendingTTL.Milliseconds()
	}
	poll := pollMin
	deadline, bounded := ctx.Deadline()
	budget := time.Until(deadline)
	for waited := false; ; waited = true {
		id := rand.Text()
		res, err := claimKeyScript.Run(ctx, idem.rdb, []string{rkey}, id, idem.pendingTTL.Milliseconds(), takeover).StringSlice()
		if err != nil || len(res) != 2 {
			if outcome.MayHaveRunErr(err) {
				idem.unclaim(ctx, rkey, id)
			}
			return answer{}, false, fmt.Errorf("idempotency: claim key: %w: %w", inventory.ErrUnavailable, err)
		}
		switch res[0] {
		case "claimed":
			// A key won after waiting for another request's marker (a
			// takeover, most often) is run only with half the request's
			// time left at least: a sale started near its deadline loses
			// its reply to it, and that unknown outcome costs the key its
			// order id (the resolver voids it). Freed again, the key is
			// the buyer's next retry's, with its whole time.
			if waited && bounded && time.Until(deadline) < budget/2 {
				idem.unclaim(ctx, rkey, id)
				return answer{}, false, errPending
			}
			return idem.run(ctx, rkey, "pending:"+id+":", request, run), false, nil
		case "answer":
			if err := json.Unmarshal([]byte(res[1]), &a); err != nil {
				return answer{}, false, fmt.Errorf("idempotency: stored answer: %w", err)
			}
			if a.Request != request {
				return answer{}, false, errKeyReused
			}
			return a, true, nil
		}
		if age, err := strconv.ParseInt(res[1], 10, 64); err == nil && time.Duration(age)*time.Millisecond >= idem.pendingTTL {
			return answer{}, false, errOutcomeUnknown
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

// unclaimTimeout bounds the deletion of a claim whose reply was lost.
const unclaimTimeout = time.Second

// unclaim deletes the pending marker that a claim whose reply was lost may
// have written (marker id): the request ran nothing, and without this its
// key would stay pending for pendingTTL, each retry polling it until its
// own deadline to be answered 423. It runs even when the request's
// context ended, since a claim cut short by the deadline may have run.
// The release runs once, and what it may find:
//   - the claim never ran, or this release runs twice: no marker of ours,
//     nothing deleted;
//   - its reply is lost too, or the claim arrives after it: the marker
//     lapses with pendingTTL, as it did without this;
//   - it arrives late, after a retry claimed the key: that retry's marker
//     has another id, and is left alone.
func (idem *idempotency) unclaim(ctx context.Context, rkey, id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unclaimTimeout)
	defer cancel()
	if err := releasePendingScript.Run(ctx, idem.rdb, []string{rkey}, "pending:"+id+":").Err(); err != nil {
		idem.log.Warn("idempotency: delete the marker of a claim whose reply was lost (it lapses with its TTL)", "err", err)
	}
}

// settleAttempts bounds the tries to settle a key; settleBackoff spaces them.
const (
	settleAttempts = 3
	settleBackoff  = 50 * time.Millisecond
)

// run executes the request under our marker (the beginning of its value,
// 'pending:<id>:') and settles the key, renewing the marker until then.
func (idem *idempotency) run(ctx context.Context, rkey, marker, request string, run func(context.Context) answer) answer {
	stopBeat := idem.beat(ctx, rkey, marker)
	defer stopBeat()
	// A marker kept after the write outlives both the answer it may become
	// and any request that could find it pending.
	durable := max(idem.ttl, 2*idem.pendingTTL).Milliseconds()
	a := run(inventory.WithBeforeWrite(ctx, func(ctx context.Context) error {
		ours, err := commitClaimScript.Run(ctx, idem.rdb, []string{rkey}, marker, durable).Int()
		switch {
		case err != nil:
			return fmt.Errorf("idempotency: keep the claim: %w", err)
		case ours == 0:
			return errors.New("idempotency: the claim expired before the sale")
		}
		return nil
	}))
	a.Request = request
	// Settle even when the client went away: the answer is what a retry gets.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleAttempts*time.Second)
	defer cancel()
	var script *redis.Script
	var args []any
	switch a.settle {
	case unknown:
		return a // the marker stays: see errOutcomeUnknown
	case release:
		script, args = releasePendingScript, []any{marker}
	case keep:
		stored, err := json.Marshal(a)
		if err != nil {
			idem.log.Error("idempotency: encode answer", "err", err)
			return a
		}
		script, args = storeAnswerScript, []any{marker, stored, idem.ttl.Milliseconds()}
	}
	var err error
	for attempt := range settleAttempts {
		if err = script.Run(ctx, idem.rdb, []string{rkey}, args...).Err(); err == nil {
			return a
		}
		if sleepErr := sleepFor(ctx, settleBackoff<<attempt); sleepErr != nil {
			break
		}
	}
	if a.settle == release {
		// Nothing sold: the marker, durable since before the write, must
		// not refuse the key for a day. Deleted once Redis answers.
		idem.releases.add(rkey, marker)
		idem.log.Warn("idempotency: free a key that sold nothing (retried in the background)", "status", a.Status, "err", err)
		return a
	}
	// The marker stays: a retry is told the outcome is unknown (a sale that
	// could not be recorded), never sold again.
	idem.log.Error("idempotency: settle key", "status", a.Status, "err", err)
	return a
}

// beat renews our marker every quarter lease until the returned stop is
// called (which waits for it): a request that finds the marker knows its
// owner still runs, however long its stage takes after the write (lock
// releases, undo, settle), and a marker whose owner stopped is a lease
// old. A beat that fails leaves the marker to the next one.
func (idem *idempotency) beat(ctx context.Context, rkey, marker string) (stop func()) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	every := idem.pendingTTL / 4
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			beatCtx, cancelBeat := context.WithTimeout(ctx, every)
			ours, err := beatScript.Run(beatCtx, idem.rdb, []string{rkey}, marker, idem.pendingTTL.Milliseconds()).Int()
			cancelBeat()
			if err == nil && ours == 0 {
				return // settled, or no longer ours
			}
		}
	}()
	return func() { cancel(); <-done }
}

// sleepFor waits d or until ctx is done.
func sleepFor(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
