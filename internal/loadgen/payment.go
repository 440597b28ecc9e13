package loadgen

import (
	"context"
	"fmt"
	"github.com/lockstep/lockstep/internal/loadgen/payers"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/plan"
	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/internal/loadgen/shopapi"
)

// payments runs a stage run's payment step.
type payments struct{ *runner }

// payAfterLoad lists the drained orders and has a Share of their buyers
// pay, each at a random moment within PayWithin.
func (r payments) payAfterLoad(ctx context.Context, p *plan.PaymentStep, base, stage, sku string) (*report.PaymentReport, error) {
	list, err := r.shop.Orders(ctx, base, stage, sku)
	if err != nil {
		return nil, err
	}
	rep := &report.PaymentReport{Orders: len(list)}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, o := range list {
		if rand.Float64() >= p.Share {
			continue
		}
		rep.Payers++
		delay := time.Duration(rand.Int64N(int64(p.PayWithin.D())))
		wg.Go(func() {
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
			err := r.shop.Pay(ctx, base, o.ID, o.User)
			mu.Lock()
			defer mu.Unlock()
			payers.Count(rep, err)
		})
	}
	wg.Wait()
	return rep, nil
}

// settleBound bounds the wait for the sweepers after the payments.
const settleBound = 10 * time.Second

func (r payments) step(ctx context.Context, run plan.RunSpec, base, sku string, during *payers.Payers) (*report.PaymentReport, error) {
	p := run.Payment
	var rep *report.PaymentReport
	if during != nil {
		rep = during.Wait()
	} else {
		var err error
		if rep, err = r.payAfterLoad(ctx, p, base, run.Stage, sku); err != nil {
			return nil, err
		}
	}
	rep.Stock = int(run.Stock)
	// Every deadline has passed by now; give the sweepers two periods more.
	select {
	case <-ctx.Done():
		return rep, ctx.Err()
	case <-time.After(p.PayWithin.D() + time.Second):
	}
	// The sweeper cancels in the database first and gives the units back
	// after: wait until nothing expired is left unpaid or unreturned.
	var a report.Audit
	for deadline := time.Now().Add(settleBound); ; {
		var err error
		if a, err = r.shop.Audit(ctx, base, run.Stage, sku); err != nil {
			return rep, err
		}
		if p := a.Payments; p == nil || p.Unpaid == 0 && p.Unreturned == 0 || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return rep, ctx.Err()
		case <-time.After(shopapi.PollEvery):
		}
	}
	rep.Remaining = a.Stock
	if a.Orders != nil {
		rep.LiveUnits = a.Orders.Units
	}
	for i := range rep.Remaining {
		code, err := r.shop.Buy(ctx, base, run.Stage, sku, fmt.Sprintf("resale-%d", i))
		if err == nil && code == http.StatusOK {
			rep.Resold++
		}
	}
	return rep, nil
}
