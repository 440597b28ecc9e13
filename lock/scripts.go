package lock

import (
	"embed"
	"io/fs"
	"strings"

	"github.com/redis/go-redis/v9"
)

//go:embed scripts/*.lua
var scriptFiles embed.FS

// Scripts are the Lua scripts the package runs, for tools that name the
// script an EVALSHA runs (the workshop's traces of a sale's commands).
func Scripts() fs.FS { return scriptFiles }

// loadScript wraps an embedded script for EVALSHA with EVAL fallback
// (redis.Script.Run). A missing file is a build defect, caught by every test.
func loadScript(name string) *redis.Script {
	src, err := scriptFiles.ReadFile("scripts/" + name)
	if err != nil {
		panic("lock: missing embedded script " + name)
	}
	return redis.NewScript(string(src))
}

// The scripts are computed once at start-up and never change.
var (
	lockScript    = loadScript("lock.lua")
	unlockScript  = loadScript("unlock.lua")
	releaseScript = loadScript("release.lua")
	renewScript   = loadScript("renew.lua")
)

// loadCounterScript is loadScript for the scripts of the semaphores and
// the count-down latch: attempts.lua, the attempt record they share, then
// the files named (a PermitExpirableSemaphore's begin with leases.lua).
func loadCounterScript(names ...string) *redis.Script {
	var src strings.Builder
	for _, name := range append([]string{"attempts.lua"}, names...) {
		part, err := scriptFiles.ReadFile("scripts/" + name)
		if err != nil {
			panic("lock: missing embedded script " + name)
		}
		src.Write(part)
		src.WriteByte('\n')
	}
	return redis.NewScript(src.String())
}
