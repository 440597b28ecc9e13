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

// max is the most sales seen inside at once since the last reset, over
// the locks of tags (one for most stages, a segment's each for segmented);
// nil when none was counted. One pipeline, a round trip per node.
func (h *holders) max(ctx context.Context, tags ...string) (*int64, error) {
	cmds := make([]*redis.StringCmd, len(tags))
	_, err := h.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, tag := range tags {
			cmds[i] = p.Get(ctx, h.keys(tag)[1])
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, unavailable("read max holders", err)
	}
	var most *int64
	for _, cmd := range cmds {
		n, err := cmd.Int64()
		switch {
		case errors.Is(err, redis.Nil):
			continue
		case err != nil:
			return nil, unavailable("read max holders", err)
		}
		if most == nil || n > *most {
			most = &n
		}
	}
	return most, nil
}

// reset forgets the counts of tags' locks, in one pipeline.
func (h *holders) reset(ctx context.Context, tags ...string) error {
	_, err := h.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, tag := range tags {
			p.Del(ctx, h.keys(tag)...) // one tag's keys share its slot
		}
		return nil
	})
	if err != nil {
		return unavailable("reset holders", err)
	}
	return nil
}
