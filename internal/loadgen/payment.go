package loadgen

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/plan"
	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/orders"
)

// payAfterLoad lists the drained orders and has a Share of their buyers
// pay, each at a random moment within PayWithin.
func (r *runner) payAfterLoad(ctx context.Context, p *plan.PaymentStep, base, stage, sku string) (*report.PaymentReport, error) {
	list, err := r.shop.orders(ctx, base, stage, sku)
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
			err := r.shop.pay(ctx, base, o.ID, o.User)
			mu.Lock()
			defer mu.Unlock()
			countPayment(rep, err)
		})
	}
	wg.Wait()
	return rep, nil
}

// settleBound bounds the wait for the sweepers after the payments.
const settleBound = 10 * time.Second

// maxPaymentOrders bounds the orders one step pays (a page each).
const maxPaymentOrders = 5000

func (r *runner) paymentStep(ctx context.Context, run plan.RunSpec, base, sku string, during *loadPayers) (*report.PaymentReport, error) {
	p := run.Payment
	var rep *report.PaymentReport
	if during != nil {
		rep = during.wait()
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
		if a, err = r.shop.audit(ctx, base, run.Stage, sku); err != nil {
			return rep, err
		}
		if p := a.Payments; p == nil || p.Unpaid == 0 && p.Unreturned == 0 || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return rep, ctx.Err()
		case <-time.After(drainPoll):
		}
	}
	rep.Remaining = a.Stock
	if a.Orders != nil {
		rep.LiveUnits = a.Orders.Units
	}
	for i := range rep.Remaining {
		code, err := r.shop.buy(ctx, base, run.Stage, sku, fmt.Sprintf("resale-%d", i))
		if err == nil && code == http.StatusOK {
			rep.Resold++
		}
	}
	return rep, nil
}

func (c *shopClient) orders(ctx context.Context, base, stage, sku string) ([]orders.Order, error) {
	var all []orders.Order
	after := ""
	for len(all) < maxPaymentOrders {
		var page struct {
			Orders []orders.Order `json:"orders"`
			Next   string         `json:"next"`
		}
		q := url.Values{"stage": {stage}, "sku": {sku}, "after": {after}, "limit": {"1000"}}
		if err := c.do(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/api/orders?"+q.Encode(), nil, true, &page); err != nil {
			return nil, err
		}
		all = append(all, page.Orders...)
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	return all, nil
}

func (c *shopClient) pay(ctx context.Context, base, id, user string) error {
	u := strings.TrimRight(base, "/") + "/api/orders/" + url.PathEscape(id) + "/pay?" + url.Values{"user": {user}}.Encode()
	return c.do(ctx, http.MethodPost, u, nil, false, nil)
}

// buy sends one sale of sku for user and returns its status.
func (c *shopClient) buy(ctx context.Context, base, stage, sku, user string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, deductURL(base, stage, sku)+"&"+url.Values{"user": {user}}.Encode(), nil)
	if err != nil {
		return 0, fmt.Errorf("buy: %w", err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("buy: %w", err)
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// countPayment records one payer's answer in rep.
func countPayment(rep *report.PaymentReport, err error) {
	var api *apiError
	switch {
	case err == nil:
		rep.Paid++
	case errors.As(err, &api) && api.Status == http.StatusConflict:
		rep.Refused++
	default:
		if rep.Failed++; rep.FirstFailure == "" {
			rep.FirstFailure = err.Error()
		}
	}
}
