package main

import (
	"path/filepath"
	"testing"
)

// TestPaymentDuringLoadScenario runs payment-during-load on real processes
// (redis-server, three shops, nginx, MariaDB, two order workers with their
// sweepers): buyers pay their orders, read from the sales' answers, while
// the sale still runs, some past pay_within. Payments must have gone out
// before the load's end, late ones must have been refused, and every
// payment is paid or cancelled, never both, each cancelled unit back once,
// and the row's audit finds no unit missing.
func TestPaymentDuringLoadScenario(t *testing.T) {
	out := filepath.Join(t.ArtifactDir(), "payment-during-load")
	rep, stdout := runAsyncScenario(t, "payment-during-load", out)
	t.Logf("report in %s:\n%s", out, stdout)
	if len(rep.Stages) != 1 {
		t.Fatalf("%d rows, want 1", len(rep.Stages))
	}
	r := &rep.Stages[0]
	p := r.Payment
	if p == nil {
		t.Fatalf("%s: no payment step (error %q)", r.Stage, r.Error)
	}
	t.Logf("payment: %+v", *p)
	if !p.DuringLoad || p.SentDuringLoad == 0 || p.Late == 0 || p.Refused == 0 || p.Paid == 0 {
		t.Errorf("payments during the load: %+v", *p)
	}
	// The row's audit was read while the sweepers may still have been
	// cancelling: every unit on sale, in a live order or returning, once.
	if o := r.Audit.Orders; !r.Passed() || o == nil || o.DuplicateOrders != 0 || o.Undersold != 0 ||
		int64(r.Audit.Initial) != int64(r.Audit.Stock)+o.Units+o.Returning {
		t.Errorf("checks %+v, audit %+v, orders %+v", r.Checks, r.Audit, r.Audit.Orders)
	}
}
