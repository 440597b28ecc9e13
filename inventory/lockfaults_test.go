package inventory_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/lockserver/lockservertest"
	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/lockstep/lockstep/inventory"
)

// The bounds the fault test holds each stage to (documented in
// inventory/doc.go and docs/lock-systems.md).
const (
	saleDeadline = 2 * time.Second // the near replica's request deadline
	saleWork     = time.Second     // the work fault: the unlock comes after it
	answerSlack  = time.Second     // scheduling on a loaded machine
	// sellsAgainWithin is how soon after the link is back another replica
	// sells: what the failed request left is resolved by then.
	sellsAgainWithin = 5 * time.Second
)

// A replica whose link to its lock server stalls before a request, loses a
// request's reply, or stalls during its unlock answers within its deadline
// (or the release bound), and once the link is back what its request left
// — a row, a key, a node — is gone within sellsAgainWithin: another replica
// sells again, and nothing is oversold. Defects this guards (issue 22): a
// mysql INSERT or DELETE and an etcd Lock or Unlock without an answer left
// the SKU locked (until a reset, or the whole lease), and the zookeeper
// stage ignored the deadline and the release bound (20-30 s answers).
func TestLockServerStagesRecoverFromALinkFault(t *testing.T) {
	steps := []struct {
		name        string
		fault       func(*lockservertest.Link, lockServerStage)
		duringWork  bool // fault the link while the sale holds the lock, so its unlock meets it
		sellsDuring bool
	}{
		{"stalled before the request", func(l *lockservertest.Link, _ lockServerStage) { l.Blackhole() }, false, false},
		{"reply lost", func(l *lockservertest.Link, sys lockServerStage) { l.DropRepliesFrom(sys.requests) }, false, false},
		{"stalled during the unlock", func(l *lockservertest.Link, _ lockServerStage) { l.Blackhole() }, true, true},
	}
	for _, sys := range lockServerStages {
		t.Run(sys.id, func(t *testing.T) {
			addrs, configure := sys.start(t, 1)
			link := lockservertest.StartLink(t, addrs[0])
			srv := redistest.Start(t)
			near := replicasOnRedis(t, srv, 1, configure([]string{link.Addr()}))[0]
			far := replicasOnRedis(t, srv, 1, configure(addrs))[0]
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			if err := near.Reset(ctx, sys.id, "sku-1", 50, 0); err != nil {
				t.Fatal(err)
			}
			if err := near.SetFaults(ctx, sys.id, inventory.Faults{Work: saleWork}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(1200 * time.Millisecond) // the faults re-read
			// sold are the sales answered; mayHaveSold the retries below
			// whose deadline ended after their write was sent (on a loaded
			// machine), each of which may have sold.
			var sold, mayHaveSold int64
			if _, err := near.Deduct(ctx, sys.id, "sku-1", 1); err != nil { // its connection and session up
				t.Fatalf("first sale: %v", err)
			}
			sold++
			for _, step := range steps {
				deadline, bound := saleDeadline, saleDeadline+answerSlack
				if step.duringWork {
					deadline, bound = saleDeadline+saleWork, saleWork+time.Second+answerSlack // the release bound
					time.AfterFunc(saleWork/2, func() { step.fault(link, sys) })
				} else {
					step.fault(link, sys)
				}
				saleCtx, cancelSale := context.WithTimeout(ctx, deadline)
				start := time.Now()
				_, err := near.Deduct(saleCtx, sys.id, "sku-1", 1)
				took := time.Since(start)
				cancelSale()
				switch {
				case step.sellsDuring && err != nil:
					t.Errorf("%s: sale %v, want sold (its stock write does not cross the link)", step.name, err)
				case step.sellsDuring:
					sold++
				case err == nil:
					t.Errorf("%s: sold through a faulty link", step.name)
				case !errors.Is(err, sys.failed) || strings.Contains(err.Error(), "redis"):
					t.Errorf("%s: sale %v, want %v (and no word of redis: its link is fine)", step.name, err, sys.failed)
				}
				if took > bound {
					t.Errorf("%s: answered after %v, want within %v: %v", step.name, took.Round(time.Millisecond), bound, err)
				}
				link.Cut() // the client reconnects at once
				link.Restore()
				back := time.Now()
				for _, inv := range []*inventory.Inventory{far, near} {
					for {
						try, cancelTry := context.WithTimeout(ctx, saleDeadline+saleWork)
						_, err := inv.Deduct(try, sys.id, "sku-1", 1)
						cancelTry()
						if err == nil {
							sold++
							break
						}
						if errors.Is(err, inventory.ErrOutcomeUnknown) {
							mayHaveSold++
						}
						if time.Since(back) > sellsAgainWithin {
							t.Fatalf("%s: no sale %v after the link came back: %v", step.name, time.Since(back).Round(time.Millisecond), err)
						}
						time.Sleep(100 * time.Millisecond)
					}
				}
				t.Logf("%s: answered in %v; sold again %v after the link came back", step.name, took.Round(time.Millisecond), time.Since(back).Round(time.Millisecond))
				a, err := far.Audit(ctx, sys.id, "sku-1")
				if err != nil {
					t.Fatal(err)
				}
				if a.Oversold != 0 || !a.Consistent || int64(a.Sold) < sold || int64(a.Sold) > sold+mayHaveSold {
					t.Fatalf("%s: audit %+v, %d sales answered and %d that may have sold", step.name, a, sold, mayHaveSold)
				}
			}
		})
	}
}
