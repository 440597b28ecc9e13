package lock

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The scripts of the counters: a Semaphore's permits and a
// CountDownLatch's count.
var (
	counterSetScript = loadCounterScript("counter_set.lua")
	semAcquireScript = loadCounterScript("semaphore_acquire.lua")
	semAddScript     = loadCounterScript("semaphore_add.lua")
	semCancelScript  = loadCounterScript("semaphore_cancel.lua")
	semDrainScript   = loadCounterScript("semaphore_drain.lua")
	countDownScript  = loadCounterScript("countdown.lua")
)

const (
	// minAttemptWindow: see attemptWindow.
	minAttemptWindow = 30 * time.Second
	// attemptCancelled is an attempt given up (semaphore_cancel.lua).
	attemptCancelled = "X"
	// attemptSetReply is counter_set.lua's "set".
	attemptSetReply = "1"
)

// counter is a number in Redis that attempt-keyed scripts change (see
// doc.go, "Semaphores"): every call that changes it has an attempt id,
// and its reply is kept beside the counter under that id, so that a
// request go-redis sends again answers as its first run did.
type counter struct {
	c       *Client
	name    string
	key     string
	channel string
	// keys: the counter, its attempts' replies and when they end.
	keys []string
	// window is how long an attempt's reply is kept, as a script argument.
	window string
}

func newCounter(c *Client, name string) counter {
	key, channel := lockKeys(name)
	return counter{
		c: c, name: name, key: key, channel: channel,
		keys:   []string{key, ownKey("attempts", key), ownKey("attempt_ends", key)},
		window: ms(attemptWindow(c.rdb)),
	}
}

// attemptWindow is how long an attempt's reply is kept: as long as the
// Redis client may send its request again (replayWindow), and at least
// minAttemptWindow, because a cancelled attempt's mark must also outlast
// a first run that arrives late from a client that never re-sends.
func attemptWindow(rdb redis.UniversalClient) time.Duration {
	return max(replayWindow(rdb), minAttemptWindow)
}

// run runs script for the attempt id with n, the channel, the publish
// command and more as its further arguments; it carries a few of the
// Client's acknowledged attempts of the counter (attemptacks.go).
func (k *counter) run(ctx context.Context, script *redis.Script, id string, n any, more ...any) *redis.Cmd {
	window := k.window
	if acks := k.c.acks.take(k.key); len(acks) > 0 {
		window += " " + strings.Join(acks, " ")
	}
	args := append([]any{id, window, n, k.channel, k.c.publishArg}, more...)
	return k.c.eval(ctx, script, k.keys, args...)
}

// call runs script once under a new attempt id (run), and acknowledges
// the attempt when its reply came quickly.
func (k *counter) call(ctx context.Context, script *redis.Script, n any, more ...any) *redis.Cmd {
	id, start := k.c.newToken(), time.Now()
	cmd := k.run(ctx, script, id, n, more...)
	k.ack(id, cmd.Err() == nil && time.Since(start) < k.c.quickReply)
	return cmd
}

// ack acknowledges the attempt id when quick: its caller has the reply,
// which came from the request's only write.
func (k *counter) ack(id string, quick bool) {
	if quick {
		k.c.acks.add(k.key, id)
	}
}

// tryFunc is one try of an acquisition under the attempt id: whether it
// took what it asks for, else the permits it saw free (negative: not
// known) and how long until one may come back by itself (negative: none).
type tryFunc func(ctx context.Context, id string) (ok bool, free int, ttl time.Duration, err error)

// acquire runs try, with one attempt id for the whole call, until it
// takes the need permits it asks for, wait is spent (0: one try; negative:
// no limit) or ctx ends, woken by the counter's channel (waitQueues) or
// after the ttl try reports. It returns the attempt id. On an error the
// attempt is given up by cancel: what it may have taken goes back, and a
// run arriving late takes nothing.
func (k *counter) acquire(ctx context.Context, need int, wait time.Duration, try tryFunc, cancel func(ctx context.Context, id string) error) (string, bool, error) {
	c := k.c
	id := c.newToken()
	// The waiter joins the channel's queue after a first try failed, as
	// waitFor subscribes: an acquisition that takes at once queues nowhere.
	var qw *queuedWaiter
	w := &waker{}
	defer func() {
		if qw != nil {
			c.waiters.leave(k.channel, qw)
		}
	}()
	quick := true // every try's reply came quickly (attemptacks.go)
	ok, err := c.waitFor(ctx, w, k.channel, time.Now(), wait, forever, func(ctx context.Context, waiting bool) (bool, time.Duration, error) {
		start := time.Now()
		ok, free, ttl, err := try(ctx, id)
		quick = quick && time.Since(start) < c.quickReply
		switch {
		case ok || err != nil:
		case !waiting && wait != 0:
			qw, *w = c.waiters.join(k.channel, need)
		case free > 0: // fewer than it needs, but others may fit
			c.waiters.offer(k.channel, free)
		}
		return ok, ttl, err
	})
	if err == nil {
		k.ack(id, ok && quick) // a try that took nothing recorded nothing
		return id, ok, nil
	}
	cctx, stop := c.cleanupContext(ctx)
	defer stop()
	// A cancel that fails leaves what the attempt took taken (doc.go,
	// "Semaphores"): the attempt's error is the one to report.
	_ = cancel(cctx, id)
	return "", false, fmt.Errorf("lock: acquire from %q: %w", k.name, err)
}

// get reads the counter: 0 when it does not exist.
func (k *counter) get(ctx context.Context) (int, error) {
	n, err := k.c.rdb.Get(ctx, k.key).Int()
	if err == redis.Nil {
		return 0, nil
	}
	return n, err
}

// trySet sets the counter to n unless it exists.
func (k *counter) trySet(ctx context.Context, n int) (bool, error) {
	res, err := k.call(ctx, counterSetScript, n).Text()
	if err != nil {
		return false, err
	}
	return res == attemptSetReply, nil
}
