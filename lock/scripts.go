package lock

import (
	"embed"

	"github.com/redis/go-redis/v9"
)

//go:embed scripts/*.lua
var scriptFiles embed.FS

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
