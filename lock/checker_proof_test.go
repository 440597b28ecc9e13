package lock

import (
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// ckMutation changes one of the package's scripts: Old, found exactly once
// in the file (under scripts/, after the mutations before it), becomes New.
type ckMutation struct{ File, Old, New string }

// ckProofs are defects the lock checker must find by itself, with its
// default faults and time and the seed given: each a few script changes.
// When a script changes, re-express its mutation here (the test fails with
// "not found" until then).
var ckProofs = []struct {
	name string
	seed uint64
	muts []ckMutation
}{
	{"the latch removed from the unlock scripts", 9, []ckMutation{
		{"unlock.lua", "redis.call('lpush', KEYS[2], ARGV[5])\n", ""},
		{"release.lua", "redis.call('lpush', KEYS[3], ARGV[6])\n", ""},
		{"fair_unlock.lua", "redis.call('lpush', KEYS[4], ARGV[5])\n", ""},
		{"read_unlock.lua", "redis.call('lpush', KEYS[2], ARGV[1])\n", ""},
		{"write_unlock.lua", "redis.call('lpush', KEYS[2], ARGV[5])\n", ""},
	}},
	{"the fencing counter starts over with Redis", 9, []ckMutation{
		{"fenced_lock.lua", "if token < epoch then token = epoch end", ""},
	}},
	// read-unlock-count-decrements in mutants.txt: a re-sent inner read
	// release takes a second level off the hold's count in Redis.
	{"an inner read release that decrements the count", 9, []ckMutation{
		{"read_unlock.lua", "redis.call('hset', KEYS[1], ARGV[1], left)", "redis.call('hincrby', KEYS[1], ARGV[1], -1)"},
	}},
	{"a lease 300 ms shorter in Redis than in the Client", 9, []ckMutation{
		{"lock.lua", "ARGV[2], 1, 'hold', ARGV[4])\n    redis.call('pexpire', KEYS[1], ARGV[1])", "ARGV[2], 1, 'hold', ARGV[4])\n    redis.call('pexpire', KEYS[1], ARGV[1] - 300)"},
	}},
}

// TestLockCheckerFindsDefects runs the checker on each defect of
// ckProofs and wants it to fail.
func TestLockCheckerFindsDefects(t *testing.T) {
	if testing.Short() {
		t.Skip("a checker run per defect")
	}
	for _, p := range ckProofs {
		t.Run(p.name, func(t *testing.T) {
			violations := runLockChecker(t, p.seed, ckDefaultTime, p.muts)
			if len(violations) == 0 {
				t.Fatalf("the checker (seed %d, %v) did not find it", p.seed, ckDefaultTime)
			}
			t.Logf("found: %d violations, the first: %s", len(violations), violations[0])
		})
	}
}

// ckScripts are the package's scripts by file, for ckMutate.
func ckScripts() map[string]**redis.Script {
	return map[string]**redis.Script{
		"lock.lua": &lockScript, "unlock.lua": &unlockScript, "release.lua": &releaseScript, "renew.lua": &renewScript,
		"fair_lock.lua": &fairLockScript, "fair_unlock.lua": &fairUnlockScript, "fair_leave.lua": &fairLeaveScript,
		"fenced_lock.lua": &fencedLockScript,
		"read_lock.lua":   &readLockScript, "read_unlock.lua": &readUnlockScript, "read_renew.lua": &readRenewScript,
		"write_lock.lua": &writeLockScript, "write_unlock.lua": &writeUnlockScript, "write_leave.lua": &writeLeaveScript,
	}
}

// ckMutate applies muts to the package's scripts and returns what undoes
// them. Only a test that runs alone (not parallel) may call it.
func ckMutate(muts []ckMutation) (restore func(), err error) {
	vars := ckScripts()
	srcs := map[string]string{}
	for _, m := range muts {
		if _, ok := vars[m.File]; !ok {
			return nil, fmt.Errorf("mutation of %s: no such script", m.File)
		}
		src, ok := srcs[m.File]
		if !ok {
			b, err := scriptFiles.ReadFile("scripts/" + m.File)
			if err != nil {
				return nil, err
			}
			src = string(b)
		}
		if n := strings.Count(src, m.Old); n != 1 {
			return nil, fmt.Errorf("mutation of %s: %q found %d times, not once", m.File, m.Old, n)
		}
		srcs[m.File] = strings.Replace(src, m.Old, m.New, 1)
	}
	saved := map[**redis.Script]*redis.Script{}
	for file, src := range srcs {
		v := vars[file]
		saved[v] = *v
		*v = redis.NewScript(src)
	}
	return func() {
		for v, s := range saved {
			*v = s
		}
	}, nil
}
