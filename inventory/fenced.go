package inventory

import (
	"context"
	"fmt"
	"time"

	"github.com/lockstep/lockstep/lock"
)

var (
	fencedReadScript   = loadScript("fenced_read.lua")
	fencedCommitScript = loadScript("fenced_commit.lua")
	fencedResetScript  = loadScript("fenced_reset.lua")
)

// errFenced: a newer lock holder came through the SKU, so this holder's
// lock was lost; nothing was written.
var errFenced = fmt.Errorf("%w: fenced off by a newer lock holder, nothing sold", ErrLockBusy)

// fencedStage is watchdog with fencing tokens: the lock hands every holder
// a larger token, the stock read refuses a token older than the SKU's fence
// and sets the fence to this holder's token and name, and the stock write is
// refused unless the fence still names this holder. A holder that lost its
// lock without knowing (expiry, SIGSTOP, failover) therefore cannot write a
// stale read back, whatever its own clock or watchdog believe — not even
// after a failover that lost the token counter's increment with the lock and
// handed the same token to the next holder.
type fencedStage struct {
	*seller
	clients *lockClients
	health  *health
	wait    time.Duration
}

// fencedGuard is the guard of fencedStage; the token it got lands in token.
type fencedGuard struct {
	stage *fencedStage
	token *int64
}

func (g fencedGuard) acquire(ctx context.Context, key string, f Faults) (context.Context, func(context.Context) error, error) {
	c, err := g.stage.clients.get(clientOptionsOf(f))
	if err != nil {
		return nil, nil, err
	}
	m := c.FencedMutex(key)
	bounded, unbound := g.stage.health.bound(ctx)
	held, ok, err := m.TryLockContext(bounded, g.stage.wait, 0)
	unbound()
	if err != nil {
		return nil, nil, lockError(bounded, err)
	}
	if !ok {
		return nil, nil, fmt.Errorf("%w: %s not free within %v", ErrLockBusy, key, g.stage.wait)
	}
	*g.token = m.Token()
	return held, m.Unlock, nil
}

func (s *fencedStage) deduct(ctx context.Context, sku string, qty int64, f Faults) (Sale, error) {
	var token int64
	// The held context is not consulted: the fence alone must keep a holder
	// that lost its lock from selling.
	_, release, err := s.acquire(ctx, fencedGuard{stage: s, token: &token}, sku, f)
	if err != nil {
		return Sale{}, err
	}
	if err := s.crashIfArmed(ctx, sku, f, release); err != nil {
		return Sale{}, err
	}
	defer s.release(ctx, sku, release)
	leave, err := s.enterHeld(ctx, sku, f)
	if err != nil {
		return Sale{}, err
	}
	defer leave() // before the release
	remaining, err := s.fencedReadModifyWrite(ctx, ctx, sku, qty, f, token)
	if err != nil {
		return Sale{}, err
	}
	return Sale{Remaining: remaining}, nil
}

// reset needs no lock: it moves the fence past every token handed out, so
// a sale in flight cannot write into the new stock (it answers lock_busy,
// nothing sold), whatever its lock or clock believe.
func (s *fencedStage) reset(ctx context.Context, sku string, stock int64, _ int) error {
	k := s.store.keys(sku)
	keys := []string{k.initial(), k.stock(), k.sold(), k.foreign(), k.lock(), k.fence(), lock.FencingCounterKey(k.lock())}
	if err := s.store.run(ctx, fencedResetScript, keys, stock).Err(); err != nil {
		return unavailable("reset", err)
	}
	return s.holders.reset(ctx, sku)
}

func (s *fencedStage) audit(ctx context.Context, sku string) (Audit, error) {
	return s.auditSKU(ctx, sku)
}
