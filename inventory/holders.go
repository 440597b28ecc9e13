package inventory

import (
	"context"
	"errors"
	"log/slog"

	"github.com/redis/go-redis/v9"
)

var (
	holdersEnterScript = loadScript("holders_enter.lua")
	holdersLeaveScript = loadScript("holders_leave.lua")
)

// holders counts, when a stage's track_holders fault is on, the sales inside
// their critical section — from the lock acquired to just before its release
// — per SKU and replica, and keeps the most seen at once. A correct lock
// never lets that maximum past one; a lock lost to expiry, a pause or a
// failover does. The counts live in their own Redis when one is configured,
// so that they survive what the scenario does to the stock's Redis.
//
// Keys, in the SKU's hash slot: lockstep:<stage>:{<sku>}:holders, a hash of
// replica name to sales inside (the workshop deletes the field of a replica
// it killed: a dead process holds nothing), and ...:max-holders.
type holders struct {
	rdb     redis.UniversalClient
	stage   string
	replica string
	log     *slog.Logger
}

func (h *holders) keys(tag string) []string {
	prefix := "lockstep:" + h.stage + ":{" + tag + "}:"
	return []string{prefix + "holders", prefix + "max-holders"}
}

// enter counts a sale that entered its critical section.
func (h *holders) enter(ctx context.Context, tag string) error {
	if err := holdersEnterScript.Run(ctx, h.rdb, h.keys(tag), h.replica).Err(); err != nil {
		return unavailable("count holder", err)
	}
	return nil
}

// leave uncounts it; on a context detached from the request, like the unlock.
func (h *holders) leave(ctx context.Context, tag string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if err := holdersLeaveScript.Run(ctx, h.rdb, h.keys(tag)[:1], h.replica).Err(); err != nil {
		h.log.Warn("uncount holder", "stage", h.stage, "tag", tag, "err", err)
	}
}

// max is the most sales seen inside at once since the last reset; nil when
// none was counted.
func (h *holders) max(ctx context.Context, tag string) (*int64, error) {
	n, err := h.rdb.Get(ctx, h.keys(tag)[1]).Int64()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, nil
	case err != nil:
		return nil, unavailable("read max holders", err)
	}
	return &n, nil
}

func (h *holders) reset(ctx context.Context, tag string) error {
	if err := h.rdb.Del(ctx, h.keys(tag)...).Err(); err != nil {
		return unavailable("reset holders", err)
	}
	return nil
}
