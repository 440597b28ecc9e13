// Package gcra is the Lua of the front door's rate limits, GCRA as
// go-redis/redis_rate runs it, as functions a script calls: limit-redis's
// own script (internal/frontdoor's allow.lua) and a sale's script that
// judges the limits and sells in one run (inventory's admit.lua). It is a
// package of its own because both use it and frontdoor imports inventory.
package gcra

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

//go:embed gcra.lua
var functions string

// Script is body with gcra.lua's functions before it: gcra_judge, over
// the limits' keys and arguments from a given position, and gcra_spend.
func Script(body string) *redis.Script { return redis.NewScript(functions + "\n" + body) }
