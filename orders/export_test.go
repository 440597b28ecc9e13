package orders

import (
	"context"
	"time"
)

// SetBetweenPayAndRead runs f between Pay's compare-and-set and its read.
func (p *Payments) SetBetweenPayAndRead(f func()) { p.betweenPayAndRead = f }

// SetBetweenLedgerReads runs f between Ledger's two reads.
func (p *Payments) SetBetweenLedgerReads(f func()) { p.betweenLedgerReads = f }

// CancelOne is the sweeper's compare-and-set of one order at now.
func (p *Payments) CancelOne(ctx context.Context, o Order, now time.Time) (bool, error) {
	return p.cancel(ctx, &o, now)
}

// GroupsInFlight is how many batches a group commit has on the wire at once.
const GroupsInFlight = groupsInFlight

// Queued counts the orders waiting for a batch (withdrawn ones included).
func (g *GroupCommit) Queued() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.queue)
}
