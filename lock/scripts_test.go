package lock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// Script-level tests: every guard a script enforces, run with EVALSHA
// against a real Redis, one case per guard, without the Go API around it.
// Each case starts from an empty Redis, runs its setup commands, runs the
// script once and checks its reply and the state it leaves.

// Names the cases use: one lock, its queue, deadlines and writers, two
// owners (Clients or handles) and two hold tokens.
const (
	sKey     = "{s}"
	sQueue   = "~queue:{s}"
	sDead    = "~deadlines:{s}"
	sWriters = "~writers:{s}"
	sLatch   = "~released:{s}"
	sLevels  = "~rwlock_timeout:{s}"
	sCounter = "~token:{s}"
	ownerA   = "A"
	ownerB   = "B"
	tokenA   = "A:h1"
	tokenA2  = "A:h2"
	tokenB   = "B:h1"
	long     = "60000" // ms, a lease that outlasts the test
	short    = "100"
	// A fencing counter ahead of the server's clock (in µs, the year
	// 2223): the next token is its next value, not the clock's.
	ahead  = "8000000000000000"
	ahead1 = "8000000000000001"
)

// check runs cmd after the script and compares its result: "=" with
// fmt.Sprint, ">" and "<" as integers.
type check struct {
	cmd  []any
	op   string
	want any
}

func eq(want any, cmd ...any) check   { return check{cmd, "=", want} }
func gt(want int64, cmd ...any) check { return check{cmd, ">", want} }
func lt(want int64, cmd ...any) check { return check{cmd, "<", want} }

type scriptCase struct {
	name   string
	setup  [][]any
	keys   []string
	args   []any
	want   any // the reply, as fmt.Sprint shows it; "nil" for a nil reply
	checks []check
}

// Arguments of the scripts, in their ARGV order.
func lockArgs(lease, owner, waiting, token, levels string) []any {
	return []any{lease, owner, waiting, token, levels}
}

func releaseArgs(owner, mode, token string) []any {
	return []any{owner, "5000", mode, "{s}:channel", "publish", token, long}
}

func unlockArgs(lease, owner, token, left string) []any {
	return []any{lease, owner, "{s}:channel", "publish", token, left, long}
}

func fairLockArgs(lease, owner, queue, token, levels string) []any {
	return []any{lease, owner, "5000", queue, token, levels}
}

func fairUnlockArgs(lease, owner, token, left string) []any {
	return []any{lease, owner, "{s}:channel", "publish", token, left, long}
}

// readPrefix is the level-key prefix of read hold token.
func readPrefix(token string) string { return sLevels + ":" + token }

func readLockArgs(lease, token, writersFirst, levels string) []any {
	return []any{lease, token, "A:write", writersFirst, readPrefix(token), levels}
}

func readUnlockArgs(token, left string) []any {
	return []any{token, "{s}:channel", readPrefix(token), sLevels, "publish", left, long}
}

func writeLockArgs(lease, field, waiting, token, levels string) []any {
	return []any{lease, field, waiting, "5000", token, levels}
}

func writeUnlockArgs(lease, field, token, left string) []any {
	return []any{lease, field, "{s}:channel", "publish", token, left, long, sWriters}
}

// heldBy is the hash of an exclusive lock held by owner's hold token.
func heldBy(owner, token string, levels int, ttl string) [][]any {
	return [][]any{{"hset", sKey, owner, levels, "hold", token}, {"pexpire", sKey, ttl}}
}

func TestScriptGuards(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	loadScripts(t, rdb)
	future := strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)
	past := strconv.FormatInt(time.Now().Add(-time.Hour).UnixMilli(), 10)

	for _, group := range []struct {
		script *redis.Script
		cases  []scriptCase
	}{
		{lockScript, []scriptCase{
			// Issue 32, finding 6: a first run arriving after its hold was released.
			{name: "late first run, released already: nothing taken", setup: [][]any{{"rpush", sLatch, tokenA}}, keys: []string{sKey, sQueue, sLatch},
				args: lockArgs(long, ownerA, "1", tokenA, "1"), want: "-2", checks: []check{eq("0", "exists", sKey)}},
			{name: "late first run, waiting: leaves its Client's grant alone", setup: [][]any{{"hset", sKey, ownerA, 1, "hold", ""}, {"rpush", sLatch, tokenA}},
				keys: []string{sKey, sQueue, sLatch}, args: lockArgs(long, ownerA, "1", tokenA, "1"), checks: []check{eq("", "hget", sKey, "hold")}},
			{name: "free: acquired with its token", keys: []string{sKey, sQueue, sLatch}, args: lockArgs(long, ownerA, "0", tokenA, "1"),
				want: "OK", checks: []check{eq("1", "hget", sKey, ownerA), eq(tokenA, "hget", sKey, "hold"), gt(50000, "pttl", sKey)}},
			{name: "run again: the same hold, unchanged", setup: heldBy(ownerA, tokenA, 1, long), keys: []string{sKey, sQueue, sLatch},
				args: lockArgs(long, ownerA, "0", tokenA, "1"), want: "OK", checks: []check{eq("1", "hget", sKey, ownerA)}},
			{name: "reentrant level: the Client's count, lease never shortened", setup: heldBy(ownerA, tokenA, 1, long),
				keys: []string{sKey, sQueue, sLatch}, args: lockArgs(short, ownerA, "0", tokenA, "2"), want: "OK",
				checks: []check{eq("2", "hget", sKey, ownerA), gt(50000, "pttl", sKey)}},
			{name: "reentrant level: a longer lease extends", setup: heldBy(ownerA, tokenA, 1, short),
				keys: []string{sKey, sQueue, sLatch}, args: lockArgs(long, ownerA, "0", tokenA, "2"), want: "OK",
				checks: []check{gt(50000, "pttl", sKey)}},
			{name: "reentrant level of a hold Redis lost: not re-created", keys: []string{sKey, sQueue, sLatch},
				args: lockArgs(long, ownerA, "0", tokenA, "2"), want: "-2", checks: []check{eq("0", "exists", sKey)}},
			{name: "another hold of the same owner: busy", setup: heldBy(ownerA, tokenA2, 1, long), keys: []string{sKey, sQueue, sLatch},
				args: lockArgs(long, ownerA, "0", tokenA, "1"), checks: []check{eq(tokenA2, "hget", sKey, "hold"), eq("1", "hget", sKey, ownerA)}},
			{name: "a hash without a hold (an older client's): busy", setup: [][]any{{"hset", sKey, ownerB, 1}},
				keys: []string{sKey, sQueue, sLatch}, args: lockArgs(long, ownerA, "0", tokenA, "1"), want: "-1",
				checks: []check{eq("0", "hexists", sKey, ownerA)}},
			{name: "waiting while held: queued once, queue expires", setup: append(heldBy(ownerB, tokenB, 1, long), []any{"rpush", sQueue, ownerA}),
				keys: []string{sKey, sQueue, sLatch}, args: lockArgs(long, ownerA, "1", tokenA, "1"),
				checks: []check{eq("[A]", "lrange", sQueue, 0, -1), gt(60000, "pttl", sQueue)}},
			{name: "not waiting while held: not queued", setup: heldBy(ownerB, tokenB, 1, long), keys: []string{sKey, sQueue, sLatch},
				args: lockArgs(long, ownerA, "0", tokenA, "1"), checks: []check{eq("0", "exists", sQueue)}},
			{name: "waiting, free: acquired and out of the queue", setup: [][]any{{"rpush", sQueue, ownerA, ownerB}},
				keys: []string{sKey, sQueue, sLatch}, args: lockArgs(long, ownerA, "1", tokenA, "1"), want: "OK",
				checks: []check{eq("[B]", "lrange", sQueue, 0, -1)}},
			{name: "waiting: takes the grant to its Client with its own lease", setup: [][]any{{"hset", sKey, ownerA, 1, "hold", ""}, {"pexpire", sKey, short}},
				keys: []string{sKey, sQueue, sLatch}, args: lockArgs(long, ownerA, "1", tokenA, "1"), want: "OK",
				checks: []check{eq(tokenA, "hget", sKey, "hold"), gt(50000, "pttl", sKey)}},
			{name: "not waiting: leaves a grant alone", setup: [][]any{{"hset", sKey, ownerA, 1, "hold", ""}, {"pexpire", sKey, long}},
				keys: []string{sKey, sQueue, sLatch}, args: lockArgs(long, ownerA, "0", tokenA, "1"), checks: []check{eq("", "hget", sKey, "hold")}},
			{name: "waiting: leaves another Client's grant alone", setup: [][]any{{"hset", sKey, ownerB, 1, "hold", ""}, {"pexpire", sKey, long}},
				keys: []string{sKey, sQueue, sLatch}, args: lockArgs(long, ownerA, "1", tokenA, "1"),
				checks: []check{eq("", "hget", sKey, "hold"), eq("0", "hexists", sKey, ownerA)}},
			// Alone: the lock's key without its queue, as while its slot
			// migrates (issue 24).
			{name: "alone, waiting, free: acquired", keys: []string{sKey}, args: lockArgs(long, ownerA, "1", tokenA, "1"), want: "OK",
				checks: []check{eq(tokenA, "hget", sKey, "hold"), eq("0", "exists", sQueue)}},
			{name: "alone, waiting while held: not queued", setup: heldBy(ownerB, tokenB, 1, long), keys: []string{sKey},
				args: lockArgs(long, ownerA, "1", tokenA, "1"), checks: []check{eq("0", "exists", sQueue)}},
			{name: "alone, waiting: takes the grant to its Client", setup: [][]any{{"hset", sKey, ownerA, 1, "hold", ""}, {"pexpire", sKey, short}},
				keys: []string{sKey}, args: lockArgs(long, ownerA, "1", tokenA, "1"), want: "OK", checks: []check{eq(tokenA, "hget", sKey, "hold")}},
		}},
		{releaseScript, []scriptCase{
			{name: "leave of an attempt that took nothing: its token latched", setup: heldBy(ownerB, tokenB, 1, long), keys: []string{sKey, sQueue, sLatch},
				args: releaseArgs(ownerA, releaseLeave, tokenA), want: "nil", checks: []check{eq("[A:h1]", "lrange", sLatch, 0, -1), gt(50000, "pttl", sLatch)}},
			{name: "the latch keeps the last 8 tokens", setup: append(heldBy(ownerA, tokenA, 1, long), []any{"rpush", sLatch, 1, 2, 3, 4, 5, 6, 7, 8}),
				keys: []string{sKey, sQueue, sLatch}, args: releaseArgs(ownerA, releaseGive, tokenA), want: "1",
				checks: []check{eq("[A:h1 1 2 3 4 5 6 7]", "lrange", sLatch, 0, -1)}},
			{name: "a client that never re-sends: no latch", setup: heldBy(ownerA, tokenA, 1, long), keys: []string{sKey, sQueue, sLatch},
				args: []any{ownerA, "5000", releaseGive, "{s}:channel", "publish", tokenA, "0"}, want: "1", checks: []check{eq("0", "exists", sLatch)}},
			{name: "release: deleted, latched", setup: heldBy(ownerA, tokenA, 3, long), keys: []string{sKey, sQueue, sLatch},
				args: releaseArgs(ownerA, releaseGive, tokenA), want: "1", checks: []check{eq("0", "exists", sKey), eq("[A:h1]", "lrange", sLatch, 0, -1), gt(50000, "pttl", sLatch)}},
			{name: "another hold's token: nothing", setup: heldBy(ownerA, tokenA2, 1, long), keys: []string{sKey, sQueue, sLatch},
				args: releaseArgs(ownerA, releaseGive, tokenA), want: "nil", checks: []check{eq(tokenA2, "hget", sKey, "hold")}},
			{name: "run again: the latch answers released", setup: [][]any{{"rpush", sLatch, tokenA}}, keys: []string{sKey, sQueue, sLatch},
				args: releaseArgs(ownerA, releaseGive, tokenA), want: "1"},
			// Alone (issue 24): given up, not handed on, and every waiter
			// told; the message comes back when nobody here heard it.
			// No latch: it is declared, and may be on the other node.
			{name: "alone: given up, waiters told, no latch", setup: append(heldBy(ownerA, tokenA, 1, long), []any{"rpush", sQueue, ownerB}),
				keys: []string{sKey}, args: releaseArgs(ownerA, releaseGive, tokenA), want: "uA",
				checks: []check{eq("0", "exists", sKey), eq("[B]", "lrange", sQueue, 0, -1), eq("0", "exists", sLatch)}},
			{name: "alone, keep: given up all the same", setup: heldBy(ownerA, tokenA, 1, long), keys: []string{sKey},
				args: releaseArgs(ownerA, releaseKeep, tokenA), want: "uA", checks: []check{eq("0", "exists", sKey)}},
			{name: "alone, leave: a grant to the Client is given up", setup: [][]any{{"hset", sKey, ownerA, 1, "hold", ""}},
				keys: []string{sKey}, args: releaseArgs(ownerA, releaseLeave, tokenA), want: "uA", checks: []check{eq("0", "exists", sKey)}},
			{name: "run again after another hold's release: not held", setup: [][]any{{"rpush", sLatch, tokenA2}}, keys: []string{sKey, sQueue, sLatch},
				args: releaseArgs(ownerA, releaseGive, tokenA), want: "nil"},
			{name: "a queued Client is granted it for a grant lease", setup: append(heldBy(ownerA, tokenA, 1, long), []any{"rpush", sQueue, ownerB}),
				keys: []string{sKey, sQueue, sLatch}, args: releaseArgs(ownerA, releaseGive, tokenA), want: "gB",
				checks: []check{eq("1", "hget", sKey, ownerB), eq("", "hget", sKey, "hold"), eq("0", "hexists", sKey, ownerA), lt(5001, "pttl", sKey), eq("0", "exists", sQueue)}},
			{name: "the owner's own stale place is skipped", setup: append(heldBy(ownerA, tokenA, 1, long), []any{"rpush", sQueue, ownerA, ownerB}),
				keys: []string{sKey, sQueue, sLatch}, args: releaseArgs(ownerA, releaseGive, tokenA), want: "gB",
				checks: []check{eq("1", "hget", sKey, ownerB), eq("0", "hexists", sKey, ownerA)}},
			{name: "keep with nobody queued: kept, no latch", setup: heldBy(ownerA, tokenA, 1, long), keys: []string{sKey, sQueue, sLatch},
				args: releaseArgs(ownerA, releaseKeep, tokenA), want: "0", checks: []check{eq(tokenA, "hget", sKey, "hold"), eq("0", "exists", sLatch)}},
			{name: "keep with a Client queued: granted", setup: append(heldBy(ownerA, tokenA, 1, long), []any{"rpush", sQueue, ownerB}),
				keys: []string{sKey, sQueue, sLatch}, args: releaseArgs(ownerA, releaseKeep, tokenA), want: "gB", checks: []check{eq("1", "hget", sKey, ownerB)}},
			{name: "leave: out of the queue", setup: append(heldBy(ownerB, tokenB, 1, long), []any{"rpush", sQueue, ownerA, ownerB}),
				keys: []string{sKey, sQueue, sLatch}, args: releaseArgs(ownerA, releaseLeave, tokenA), want: "nil",
				checks: []check{eq("[B]", "lrange", sQueue, 0, -1), eq(tokenB, "hget", sKey, "hold")}},
			{name: "leave: a grant to the Client is handed on", setup: [][]any{{"hset", sKey, ownerA, 1, "hold", ""}, {"rpush", sQueue, ownerB}},
				keys: []string{sKey, sQueue, sLatch}, args: releaseArgs(ownerA, releaseLeave, tokenA), want: "gB",
				checks: []check{eq("1", "hget", sKey, ownerB), eq("0", "hexists", sKey, ownerA)}},
			{name: "leave: what the lost attempt took is freed", setup: heldBy(ownerA, tokenA, 1, long), keys: []string{sKey, sQueue, sLatch},
				args: releaseArgs(ownerA, releaseLeave, tokenA), want: "1", checks: []check{eq("0", "exists", sKey)}},
			{name: "leave: a later hold of the Client is left alone", setup: heldBy(ownerA, tokenA2, 1, long), keys: []string{sKey, sQueue, sLatch},
				args: releaseArgs(ownerA, releaseLeave, tokenA), want: "nil", checks: []check{eq(tokenA2, "hget", sKey, "hold")}},
			{name: "leave: another Client's grant is left alone", setup: [][]any{{"hset", sKey, ownerB, 1, "hold", ""}},
				keys: []string{sKey, sQueue, sLatch}, args: releaseArgs(ownerA, releaseLeave, tokenA), want: "nil", checks: []check{eq("1", "hget", sKey, ownerB)}},
		}},
		{unlockScript, []scriptCase{
			{name: "an attempt given up that took nothing: its token latched", setup: heldBy(ownerB, tokenB, 1, long), keys: []string{sKey, sLatch},
				args: unlockArgs(long, ownerA, tokenA, "-1"), want: "nil", checks: []check{eq("[A:h1]", "lrange", sLatch, 0, -1)}},
			{name: "an attempt given up that took the lock: released", setup: heldBy(ownerA, tokenA, 1, long), keys: []string{sKey, sLatch},
				args: unlockArgs(long, ownerA, tokenA, "-1"), want: "1", checks: []check{eq("0", "exists", sKey), eq("[A:h1]", "lrange", sLatch, 0, -1)}},
			{name: "another hold's token: nothing", setup: heldBy(ownerA, tokenA2, 2, long), keys: []string{sKey, sLatch},
				args: unlockArgs(long, ownerA, tokenA, "1"), want: "nil", checks: []check{eq("2", "hget", sKey, ownerA)}},
			{name: "inner level: the count left, lease never shortened", setup: heldBy(ownerA, tokenA, 2, long), keys: []string{sKey, sLatch},
				args: unlockArgs(short, ownerA, tokenA, "1"), want: "0", checks: []check{eq("1", "hget", sKey, ownerA), gt(50000, "pttl", sKey)}},
			{name: "inner level: extended to the lease", setup: heldBy(ownerA, tokenA, 2, short), keys: []string{sKey, sLatch},
				args: unlockArgs(long, ownerA, tokenA, "1"), want: "0", checks: []check{gt(50000, "pttl", sKey)}},
			{name: "last level: deleted whatever Redis counts, latched", setup: heldBy(ownerA, tokenA, 5, long), keys: []string{sKey, sLatch},
				args: unlockArgs(long, ownerA, tokenA, "0"), want: "1", checks: []check{eq("0", "exists", sKey), eq("[A:h1]", "lrange", sLatch, 0, -1)}},
			{name: "run again: the latch answers released", setup: [][]any{{"rpush", sLatch, tokenA}}, keys: []string{sKey, sLatch},
				args: unlockArgs(long, ownerA, tokenA, "0"), want: "1"},
			{name: "the lock's key alone (slot migrating): released, no latch", setup: heldBy(ownerA, tokenA, 1, long), keys: []string{sKey},
				args: unlockArgs(long, ownerA, tokenA, "0"), want: "1", checks: []check{eq("0", "exists", sKey, sLatch)}},
			{name: "the lock's key alone, run again: no latch read, not held", setup: [][]any{{"rpush", sLatch, tokenA}}, keys: []string{sKey},
				args: unlockArgs(long, ownerA, tokenA, "0"), want: "nil"},
		}},
		{renewScript, []scriptCase{
			{name: "its hold: extended", setup: heldBy(ownerA, tokenA, 1, short), keys: []string{sKey},
				args: []any{long, "hold", tokenA}, want: "1", checks: []check{gt(50000, "pttl", sKey)}},
			{name: "its hold: never shortened", setup: heldBy(ownerA, tokenA, 1, long), keys: []string{sKey},
				args: []any{short, "hold", tokenA}, want: "1", checks: []check{gt(50000, "pttl", sKey)}},
			{name: "a later hold of the same owner: left alone", setup: heldBy(ownerA, tokenA2, 1, short), keys: []string{sKey},
				args: []any{long, "hold", tokenA}, want: "0", checks: []check{lt(101, "pttl", sKey)}},
		}},
		{fairLockScript, []scriptCase{
			{name: "late first run, released already: nothing taken", setup: [][]any{{"rpush", sLatch, tokenA}}, keys: []string{sKey, sQueue, sDead, sLatch},
				args: fairLockArgs(long, ownerA, "1", tokenA, "1"), want: "-2", checks: []check{eq("0", "exists", sKey), eq("0", "exists", sQueue)}},
			{name: "the lock's key alone (slot migrating), free: acquired, nobody queued", keys: []string{sKey}, args: fairLockArgs(long, ownerA, "1", tokenA, "1"),
				want: "OK", checks: []check{eq(tokenA, "hget", sKey, "hold"), eq("0", "exists", sQueue, sDead)}},
			{name: "the lock's key alone, held: its TTL, not queued", setup: heldBy(ownerB, tokenB, 1, long), keys: []string{sKey},
				args: fairLockArgs(long, ownerA, "1", tokenA, "1"), checks: []check{eq(tokenB, "hget", sKey, "hold"), eq("0", "exists", sQueue, sDead)}},
			{name: "free, nobody queued: acquired", keys: []string{sKey, sQueue, sDead, sLatch}, args: fairLockArgs(long, ownerA, "0", tokenA, "1"),
				want: "OK", checks: []check{eq(tokenA, "hget", sKey, "hold"), gt(50000, "pttl", sKey)}},
			{name: "run again: the same hold, unchanged", setup: heldBy(ownerA, tokenA, 1, long), keys: []string{sKey, sQueue, sDead, sLatch},
				args: fairLockArgs(long, ownerA, "0", tokenA, "1"), want: "OK", checks: []check{eq("1", "hget", sKey, ownerA)}},
			{name: "reentrant level: lease never shortened", setup: heldBy(ownerA, tokenA, 1, long), keys: []string{sKey, sQueue, sDead, sLatch},
				args: fairLockArgs(short, ownerA, "0", tokenA, "2"), want: "OK", checks: []check{eq("2", "hget", sKey, ownerA), gt(50000, "pttl", sKey)}},
			{name: "reentrant level of a hold Redis lost: not re-created", keys: []string{sKey, sQueue, sDead, sLatch},
				args: fairLockArgs(long, ownerA, "0", tokenA, "2"), want: "-2", checks: []check{eq("0", "exists", sKey)}},
			{name: "free but another waiter is first: not acquired", setup: [][]any{{"rpush", sQueue, ownerB}, {"zadd", sDead, future, ownerB}},
				keys: []string{sKey, sQueue, sDead, sLatch}, args: fairLockArgs(long, ownerA, "0", tokenA, "1"),
				checks: []check{eq("0", "exists", sKey)}},
			{name: "free and first in the queue: acquired, out of it", setup: [][]any{{"rpush", sQueue, ownerA, ownerB}, {"zadd", sDead, future, ownerA, future, ownerB}},
				keys: []string{sKey, sQueue, sDead, sLatch}, args: fairLockArgs(long, ownerA, "1", tokenA, "1"), want: "OK",
				checks: []check{eq("[B]", "lrange", sQueue, 0, -1), eq("nil", "zscore", sDead, ownerA)}},
			{name: "a dead first waiter is dropped", setup: [][]any{{"rpush", sQueue, ownerB}, {"zadd", sDead, past, ownerB}},
				keys: []string{sKey, sQueue, sDead, sLatch}, args: fairLockArgs(long, ownerA, "0", tokenA, "1"), want: "OK",
				checks: []check{eq("0", "exists", sQueue)}},
			{name: "waiting while held: queued once", setup: append(heldBy(ownerB, tokenB, 1, long), []any{"rpush", sQueue, ownerA}, []any{"zadd", sDead, future, ownerA}),
				keys: []string{sKey, sQueue, sDead, sLatch}, args: fairLockArgs(long, ownerA, "1", tokenA, "1"),
				checks: []check{eq("[A]", "lrange", sQueue, 0, -1)}},
			{name: "another hold of the same owner: busy", setup: heldBy(ownerA, tokenA2, 1, long), keys: []string{sKey, sQueue, sDead, sLatch},
				args: fairLockArgs(long, ownerA, "0", tokenA, "1"), checks: []check{eq(tokenA2, "hget", sKey, "hold")}},
		}},
		{fairUnlockScript, []scriptCase{
			{name: "an attempt given up that took nothing: its token latched", keys: []string{sKey, sQueue, sDead, sLatch},
				args: fairUnlockArgs(long, ownerA, tokenA, "-1"), want: "nil", checks: []check{eq("[A:h1]", "lrange", sLatch, 0, -1)}},
			{name: "last level: the owner's own stale place dropped, the next waiter woken", setup: append(heldBy(ownerA, tokenA, 1, long),
				[]any{"rpush", sQueue, ownerA, ownerB}, []any{"zadd", sDead, future, ownerA, future, ownerB}),
				keys: []string{sKey, sQueue, sDead, sLatch}, args: fairUnlockArgs(long, ownerA, tokenA, "0"), want: "1",
				checks: []check{eq("[B]", "lrange", sQueue, 0, -1), eq("nil", "zscore", sDead, ownerA)}},
			{name: "the lock's key alone (slot migrating), last level: deleted, no latch, nobody woken", setup: append(heldBy(ownerA, tokenA, 1, long),
				[]any{"rpush", sQueue, ownerB}, []any{"zadd", sDead, future, ownerB}), keys: []string{sKey},
				args: fairUnlockArgs(long, ownerA, tokenA, "0"), want: "1",
				checks: []check{eq("0", "exists", sKey), eq("0", "exists", sLatch), eq("[B]", "lrange", sQueue, 0, -1)}},
			{name: "another hold's token: nothing", setup: heldBy(ownerA, tokenA2, 1, long), keys: []string{sKey, sQueue, sDead, sLatch},
				args: fairUnlockArgs(long, ownerA, tokenA, "0"), want: "nil", checks: []check{eq("1", "exists", sKey)}},
			{name: "inner level: lease never shortened", setup: heldBy(ownerA, tokenA, 2, long), keys: []string{sKey, sQueue, sDead, sLatch},
				args: fairUnlockArgs(short, ownerA, tokenA, "1"), want: "0", checks: []check{eq("1", "hget", sKey, ownerA), gt(50000, "pttl", sKey)}},
			{name: "inner level: extended to the lease", setup: heldBy(ownerA, tokenA, 2, short), keys: []string{sKey, sQueue, sDead, sLatch},
				args: fairUnlockArgs(long, ownerA, tokenA, "1"), want: "0", checks: []check{gt(50000, "pttl", sKey)}},
			{name: "last level: deleted, dead waiters dropped, latched", setup: append(heldBy(ownerA, tokenA, 1, long),
				[]any{"rpush", sQueue, "dead", ownerB}, []any{"zadd", sDead, past, "dead", future, ownerB}),
				keys: []string{sKey, sQueue, sDead, sLatch}, args: fairUnlockArgs(long, ownerA, tokenA, "0"), want: "1",
				checks: []check{eq("0", "exists", sKey), eq("[B]", "lrange", sQueue, 0, -1), eq("[A:h1]", "lrange", sLatch, 0, -1)}},
			{name: "run again: the latch answers released", setup: [][]any{{"rpush", sLatch, tokenA}}, keys: []string{sKey, sQueue, sDead, sLatch},
				args: fairUnlockArgs(long, ownerA, tokenA, "0"), want: "1"},
		}},
		{fairLeaveScript, []scriptCase{
			{name: "the lock's key alone (slot migrating): nothing to leave", setup: [][]any{{"rpush", sQueue, ownerA}}, keys: []string{sKey},
				args: []any{ownerA, "{s}:channel", "publish"}, want: "1", checks: []check{eq("[A]", "lrange", sQueue, 0, -1)}},
			{name: "out of the queue and its deadlines", setup: [][]any{{"rpush", sQueue, ownerA, ownerB}, {"zadd", sDead, future, ownerA, future, ownerB}},
				keys: []string{sKey, sQueue, sDead}, args: []any{ownerA, "{s}:channel", "publish"}, want: "1",
				checks: []check{eq("[B]", "lrange", sQueue, 0, -1), eq("nil", "zscore", sDead, ownerA)}},
		}},
		{fencedLockScript, []scriptCase{
			{name: "free: the next fencing token", setup: [][]any{{"set", sCounter, ahead}}, keys: []string{sKey, sCounter, sLatch},
				args: []any{long, ownerA, tokenA, "1", sCounter}, want: "[" + ahead1 + "]", checks: []check{eq(ahead1, "get", sCounter), eq(tokenA, "hget", sKey, "hold")}},
			{name: "run again: the same fencing token, no increment", setup: [][]any{{"set", sCounter, 8}, {"hset", sKey, ownerA, 1, "token", 8, "hold", tokenA}},
				keys: []string{sKey, sCounter, sLatch}, args: []any{long, ownerA, tokenA, "1", sCounter}, want: "[8]", checks: []check{eq("8", "get", sCounter)}},
			{name: "reentrant level keeps the token", setup: [][]any{{"set", sCounter, 8}, {"hset", sKey, ownerA, 1, "token", 8, "hold", tokenA}},
				keys: []string{sKey, sCounter, sLatch}, args: []any{long, ownerA, tokenA, "2", sCounter}, want: "[8]", checks: []check{eq("2", "hget", sKey, ownerA)}},
			{name: "reentrant level of a hold Redis lost: no new token", setup: [][]any{{"set", sCounter, 8}}, keys: []string{sKey, sCounter, sLatch},
				args: []any{long, ownerA, tokenA, "2", sCounter}, want: "-2", checks: []check{eq("8", "get", sCounter), eq("0", "exists", sKey)}},
			{name: "held by another hold: busy", setup: [][]any{{"hset", sKey, ownerA, 1, "token", 8, "hold", tokenA2}, {"pexpire", sKey, long}},
				keys: []string{sKey, sCounter, sLatch}, args: []any{long, ownerA, tokenA, "1", sCounter}, checks: []check{eq(tokenA2, "hget", sKey, "hold")}},
			{name: "the lock's key alone, the counter here: the next fencing token", setup: [][]any{{"set", sCounter, ahead}}, keys: []string{sKey},
				args: []any{long, ownerA, tokenA, "1", sCounter}, want: "[" + ahead1 + "]", checks: []check{eq(ahead1, "get", sCounter), eq(tokenA, "hget", sKey, "hold")}},
			{name: "the lock's key alone, no counter here: refused, nothing created", keys: []string{sKey},
				args: []any{long, ownerA, tokenA, "1", sCounter}, want: "COUNTERMOVING the fencing counter has not moved to this node yet",
				checks: []check{eq("0", "exists", sKey, sCounter)}},
		}},
		{readLockScript, []scriptCase{
			{name: "late first run, released already: nothing taken", setup: [][]any{{"rpush", sLatch, tokenA}}, keys: []string{sKey, sWriters, sLatch},
				args: readLockArgs(long, tokenA, "1", "1"), want: "-2", checks: []check{eq("0", "exists", sKey, readPrefix(tokenA)+":1")}},
			{name: "the lock's key alone (slot migrating): no waiting writer seen", keys: []string{sKey}, setup: [][]any{{"zadd", sWriters, future, "B:write"}},
				args: readLockArgs(long, tokenA, "1", "1"), want: "OK", checks: []check{eq("1", "hget", sKey, tokenA)}},
			{name: "free: a read level of its own", keys: []string{sKey, sWriters, sLatch}, args: readLockArgs(long, tokenA, "1", "1"), want: "OK",
				checks: []check{eq("read", "hget", sKey, "mode"), eq("1", "hget", sKey, tokenA), gt(50000, "pttl", readPrefix(tokenA)+":1")}},
			{name: "run again: the same level", setup: [][]any{{"hset", sKey, "mode", "read", tokenA, 1}, {"set", readPrefix(tokenA) + ":1", 1, "px", long}},
				keys: []string{sKey, sWriters, sLatch}, args: readLockArgs(long, tokenA, "1", "1"), want: "OK",
				checks: []check{eq("1", "hget", sKey, tokenA), eq("0", "exists", readPrefix(tokenA)+":2")}},
			{name: "reentrant level: a key of its own", setup: [][]any{{"hset", sKey, "mode", "read", tokenA, 1}, {"set", readPrefix(tokenA) + ":1", 1, "px", long}},
				keys: []string{sKey, sWriters, sLatch}, args: readLockArgs(short, tokenA, "1", "2"), want: "OK",
				checks: []check{eq("2", "hget", sKey, tokenA), gt(0, "pttl", readPrefix(tokenA)+":2")}},
			{name: "reentrant level of a hold Redis lost: not re-created", keys: []string{sKey, sWriters, sLatch},
				args: readLockArgs(long, tokenA, "1", "2"), want: "-2", checks: []check{eq("0", "exists", sKey)}},
			{name: "a writer waits: a new reader waits behind it", setup: [][]any{{"hset", sKey, "mode", "read", tokenB, 1}, {"pexpire", sKey, long}, {"zadd", sWriters, future, "B:write"}},
				keys: []string{sKey, sWriters, sLatch}, args: readLockArgs(long, tokenA, "1", "1"), checks: []check{eq("0", "hexists", sKey, tokenA)}},
			{name: "readers first: a waiting writer is passed", setup: [][]any{{"hset", sKey, "mode", "read", tokenB, 1}, {"zadd", sWriters, future, "B:write"}},
				keys: []string{sKey, sWriters, sLatch}, args: readLockArgs(long, tokenA, "0", "1"), want: "OK"},
			{name: "a waiting writer's lapsed place is dropped", setup: [][]any{{"zadd", sWriters, past, "B:write"}},
				keys: []string{sKey, sWriters, sLatch}, args: readLockArgs(long, tokenA, "1", "1"), want: "OK", checks: []check{eq("0", "exists", sWriters)}},
			{name: "the writer reads", setup: [][]any{{"hset", sKey, "mode", "write", "A:write", 1}, {"zadd", sWriters, future, "B:write"}},
				keys: []string{sKey, sWriters, sLatch}, args: readLockArgs(long, tokenA, "1", "1"), want: "OK"},
			{name: "another owner writes: busy", setup: [][]any{{"hset", sKey, "mode", "write", "B:write", 1}, {"pexpire", sKey, long}},
				keys: []string{sKey, sWriters, sLatch}, args: readLockArgs(long, tokenA, "1", "1"), checks: []check{eq("0", "hexists", sKey, tokenA)}},
		}},
		{readUnlockScript, []scriptCase{
			{name: "an attempt given up that took nothing: its token latched", keys: []string{sKey, sLatch},
				args: readUnlockArgs(tokenA, "-1"), want: "nil", checks: []check{eq("[A:h1]", "lrange", sLatch, 0, -1)}},
			{name: "not its hold: nothing", setup: [][]any{{"hset", sKey, "mode", "read", tokenA2, 1}}, keys: []string{sKey, sLatch},
				args: readUnlockArgs(tokenA, "0"), want: "nil", checks: []check{eq("1", "exists", sKey)}},
			{name: "inner level: its time goes to the level below", setup: [][]any{{"hset", sKey, "mode", "read", tokenA, 2}, {"pexpire", sKey, long},
				{"set", readPrefix(tokenA) + ":1", 1, "px", short}, {"set", readPrefix(tokenA) + ":2", 1, "px", long}},
				keys: []string{sKey, sLatch}, args: readUnlockArgs(tokenA, "1"), want: "0",
				checks: []check{gt(50000, "pttl", readPrefix(tokenA)+":1"), eq("0", "exists", readPrefix(tokenA)+":2"), gt(50000, "pttl", sKey), eq("1", "hget", sKey, tokenA)}},
			{name: "last level with other readers: the lock lasts as their longest", setup: [][]any{{"hset", sKey, "mode", "read", tokenA, 1, tokenB, 1},
				{"pexpire", sKey, long}, {"set", readPrefix(tokenA) + ":1", 1, "px", long}, {"set", readPrefix(tokenB) + ":1", 1, "px", "5000"}},
				keys: []string{sKey, sLatch}, args: readUnlockArgs(tokenA, "0"), want: "0",
				checks: []check{lt(5001, "pttl", sKey), gt(0, "pttl", sKey), eq("0", "hexists", sKey, tokenA), eq("0", "exists", readPrefix(tokenA)+":1")}},
			{name: "last reader: deleted, latched", setup: [][]any{{"hset", sKey, "mode", "read", tokenA, 1}, {"set", readPrefix(tokenA) + ":1", 1}},
				keys: []string{sKey, sLatch}, args: readUnlockArgs(tokenA, "0"), want: "1", checks: []check{eq("0", "exists", sKey, readPrefix(tokenA)+":1"), eq("[A:h1]", "lrange", sLatch, 0, -1)}},
			{name: "run again: the latch answers released", setup: [][]any{{"rpush", sLatch, tokenA}}, keys: []string{sKey, sLatch},
				args: readUnlockArgs(tokenA, "0"), want: "1"},
			{name: "the writer's last read level: still written", setup: [][]any{{"hset", sKey, "mode", "write", "A:write", 1, "A:write:hold", tokenA2, tokenA, 1}},
				keys: []string{sKey, sLatch}, args: readUnlockArgs(tokenA, "0"), want: "0", checks: []check{eq("write", "hget", sKey, "mode")}},
		}},
		{readRenewScript, []scriptCase{
			{name: "not its hold: nothing", setup: [][]any{{"hset", sKey, "mode", "read", tokenA2, 1}, {"pexpire", sKey, short}}, keys: []string{sKey},
				args: []any{long, tokenA, sLevels}, want: "0", checks: []check{lt(101, "pttl", sKey)}},
			{name: "its hold: the lock and the levels extended", setup: [][]any{{"hset", sKey, "mode", "read", tokenA, 1}, {"pexpire", sKey, short},
				{"set", readPrefix(tokenA) + ":1", 1, "px", short}}, keys: []string{sKey},
				args: []any{long, tokenA, sLevels}, want: "1", checks: []check{gt(50000, "pttl", sKey), gt(50000, "pttl", readPrefix(tokenA)+":1")}},
			{name: "never shortened", setup: [][]any{{"hset", sKey, "mode", "read", tokenA, 1}, {"pexpire", sKey, long}}, keys: []string{sKey},
				args: []any{short, tokenA, sLevels}, want: "1", checks: []check{gt(50000, "pttl", sKey)}},
		}},
		{writeLockScript, []scriptCase{
			{name: "late first run, released already: nothing taken", setup: [][]any{{"rpush", sLatch, tokenA}}, keys: []string{sKey, sWriters, sLatch},
				args: writeLockArgs(long, "A:write", "1", tokenA, "1"), want: "-2", checks: []check{eq("0", "exists", sKey, sWriters)}},
			{name: "the lock's key alone (slot migrating), free: acquired", keys: []string{sKey}, args: writeLockArgs(long, "A:write", "1", tokenA, "1"),
				want: "OK", checks: []check{eq(tokenA, "hget", sKey, "A:write:hold")}},
			{name: "the lock's key alone, held: its TTL, no place kept", setup: [][]any{{"hset", sKey, "mode", "write", "B:write", 1, "B:write:hold", tokenB}, {"pexpire", sKey, long}},
				keys: []string{sKey}, args: writeLockArgs(long, "A:write", "1", tokenA, "1"), checks: []check{eq("0", "exists", sWriters)}},
			{name: "free: acquired, out of the waiting writers", setup: [][]any{{"zadd", sWriters, future, "A:write"}}, keys: []string{sKey, sWriters, sLatch},
				args: writeLockArgs(long, "A:write", "1", tokenA, "1"), want: "OK",
				checks: []check{eq("write", "hget", sKey, "mode"), eq(tokenA, "hget", sKey, "A:write:hold"), eq("0", "exists", sWriters)}},
			{name: "run again: the same hold", setup: [][]any{{"hset", sKey, "mode", "write", "A:write", 1, "A:write:hold", tokenA}},
				keys: []string{sKey, sWriters, sLatch}, args: writeLockArgs(long, "A:write", "0", tokenA, "1"), want: "OK", checks: []check{eq("1", "hget", sKey, "A:write")}},
			{name: "reentrant level: lease never shortened", setup: [][]any{{"hset", sKey, "mode", "write", "A:write", 1, "A:write:hold", tokenA}, {"pexpire", sKey, long}},
				keys: []string{sKey, sWriters, sLatch}, args: writeLockArgs(short, "A:write", "0", tokenA, "2"), want: "OK",
				checks: []check{eq("2", "hget", sKey, "A:write"), gt(50000, "pttl", sKey)}},
			{name: "reentrant level of a hold Redis lost: not re-created", keys: []string{sKey, sWriters, sLatch},
				args: writeLockArgs(long, "A:write", "0", tokenA, "2"), want: "-2", checks: []check{eq("0", "exists", sKey)}},
			{name: "waiting while read: a place with a deadline", setup: [][]any{{"hset", sKey, "mode", "read", tokenB, 1}, {"pexpire", sKey, long}},
				keys: []string{sKey, sWriters, sLatch}, args: writeLockArgs(long, "A:write", "1", tokenA, "1"),
				checks: []check{gt(time.Now().UnixMilli(), "zscore", sWriters, "A:write"), lt(5001, "pttl", sWriters)}},
		}},
		{writeUnlockScript, []scriptCase{
			{name: "an attempt given up that took nothing: its token latched", keys: []string{sKey, sLatch},
				args: writeUnlockArgs(long, "A:write", tokenA, "-1"), want: "nil", checks: []check{eq("[A:h1]", "lrange", sLatch, 0, -1)}},
			{name: "last level: the writer's own stale place dropped", setup: [][]any{{"hset", sKey, "mode", "write", "A:write", 1, "A:write:hold", tokenA},
				{"zadd", sWriters, future, "A:write", future, "B:write"}}, keys: []string{sKey, sLatch}, args: writeUnlockArgs(long, "A:write", tokenA, "0"), want: "1",
				checks: []check{eq("0", "exists", sKey), eq("[B:write]", "zrange", sWriters, 0, -1)}},
			{name: "another hold's token: nothing", setup: [][]any{{"hset", sKey, "mode", "write", "A:write", 1, "A:write:hold", tokenA2}},
				keys: []string{sKey, sLatch}, args: writeUnlockArgs(long, "A:write", tokenA, "0"), want: "nil", checks: []check{eq("1", "exists", sKey)}},
			{name: "inner level: lease never shortened", setup: [][]any{{"hset", sKey, "mode", "write", "A:write", 2, "A:write:hold", tokenA}, {"pexpire", sKey, long}},
				keys: []string{sKey, sLatch}, args: writeUnlockArgs(short, "A:write", tokenA, "1"), want: "0",
				checks: []check{eq("1", "hget", sKey, "A:write"), gt(50000, "pttl", sKey)}},
			{name: "last level: deleted, latched", setup: [][]any{{"hset", sKey, "mode", "write", "A:write", 3, "A:write:hold", tokenA}},
				keys: []string{sKey, sLatch}, args: writeUnlockArgs(long, "A:write", tokenA, "0"), want: "1", checks: []check{eq("0", "exists", sKey), eq("[A:h1]", "lrange", sLatch, 0, -1)}},
			{name: "last level with its own read levels: a read lock", setup: [][]any{{"hset", sKey, "mode", "write", "A:write", 1, "A:write:hold", tokenA, tokenA2, 1}},
				keys: []string{sKey, sLatch}, args: writeUnlockArgs(long, "A:write", tokenA, "0"), want: "1",
				checks: []check{eq("read", "hget", sKey, "mode"), eq("0", "hexists", sKey, "A:write:hold")}},
			{name: "run again: the latch answers released", setup: [][]any{{"rpush", sLatch, tokenA}}, keys: []string{sKey, sLatch},
				args: writeUnlockArgs(long, "A:write", tokenA, "0"), want: "1"},
		}},
		{writeLeaveScript, []scriptCase{
			{name: "out of the waiting writers", setup: [][]any{{"zadd", sWriters, future, "A:write", future, "B:write"}},
				keys: []string{sWriters}, args: []any{"A:write", "{s}:channel", "publish"}, want: "1",
				checks: []check{eq("[B:write]", "zrange", sWriters, 0, -1)}},
		}},
	} {
		for _, tc := range group.cases {
			t.Run(scriptName(group.script)+"/"+tc.name, func(t *testing.T) {
				runScriptCase(t, rdb, group.script, tc)
			})
		}
	}
}

func runScriptCase(t *testing.T, rdb *redis.Client, script *redis.Script, tc scriptCase) {
	t.Helper()
	ctx := ctxTimeout(t, 5*time.Second)
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range tc.setup {
		if err := rdb.Do(ctx, cmd...).Err(); err != nil {
			t.Fatalf("setup %v: %v", cmd, err)
		}
	}
	reply, err := rdb.EvalSha(ctx, script.Hash(), tc.keys, tc.args...).Result()
	if errors.Is(err, redis.Nil) {
		reply, err = nil, nil
	}
	if err != nil && fmt.Sprint(tc.want) == err.Error() {
		reply, err = err.Error(), nil // an error reply the case expects
	}
	if err != nil {
		t.Fatalf("EVALSHA: %v", err)
	}
	got := fmt.Sprint(reply)
	if reply == nil {
		got = "nil"
	}
	if tc.want != nil && got != fmt.Sprint(tc.want) {
		t.Fatalf("reply %s, want %v", got, tc.want)
	}
	if tc.want == nil && got == "OK" {
		t.Fatalf("reply OK: acquired, want busy")
	}
	for _, c := range tc.checks {
		assertCheck(t, ctx, rdb, c)
	}
}

func assertCheck(t *testing.T, ctx context.Context, rdb *redis.Client, c check) {
	t.Helper()
	res, err := rdb.Do(ctx, c.cmd...).Result()
	if errors.Is(err, redis.Nil) {
		res, err = "nil", nil
	}
	if err != nil {
		t.Fatalf("%v: %v", c.cmd, err)
	}
	if c.op == "=" {
		if fmt.Sprint(res) != fmt.Sprint(c.want) {
			t.Fatalf("%v = %v, want %v", c.cmd, res, c.want)
		}
		return
	}
	n, err := strconv.ParseFloat(fmt.Sprint(res), 64)
	if err != nil {
		t.Fatalf("%v = %v, want a number", c.cmd, res)
	}
	if want := float64(c.want.(int64)); (c.op == ">" && n <= want) || (c.op == "<" && n >= want) {
		t.Fatalf("%v = %v, want %s %d", c.cmd, res, c.op, c.want)
	}
}

// scriptName is the file a script was loaded from, for the test's name.
func scriptName(script *redis.Script) string {
	for name, s := range map[string]*redis.Script{
		"lock": lockScript, "release": releaseScript, "unlock": unlockScript, "renew": renewScript,
		"fair_lock": fairLockScript, "fair_unlock": fairUnlockScript, "fair_leave": fairLeaveScript,
		"fenced_lock": fencedLockScript, "read_lock": readLockScript, "read_unlock": readUnlockScript,
		"read_renew": readRenewScript, "write_lock": writeLockScript, "write_unlock": writeUnlockScript,
		"write_leave": writeLeaveScript,
	} {
		if s == script {
			return name
		}
	}
	return script.Hash()
}
