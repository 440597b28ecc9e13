// Package payers is the observer that pays while the load runs
// (plan.PaymentStep's DuringLoad): for a Share of the sales whose answer
// names an order it starts a payer, who pays through the shop's API at a
// random moment; its record is the row's report.PaymentReport. It imports
// no store, no Redis client and nothing of the runner above it.
package payers

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/attack"
	"github.com/lockstep/lockstep/internal/loadgen/plan"
	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/internal/loadgen/shopapi"
	"github.com/lockstep/lockstep/internal/sleep"
)

// lateFactor: a payer's delay is drawn within lateFactor × pay_within of
// its sale, so a third of the payers come past their deadline.
const lateFactor = 1.5

// notWrittenRetry is the spacing of the retries of a payment answered 404
// while the workers have not written its order; they stop notWrittenBound
// after the first request (past that, the 404 is a failure).
const (
	notWrittenRetry = 50 * time.Millisecond
	notWrittenBound = 5 * time.Second
)

// Payers are the buyers who pay while the load runs: Observe starts a
// payer for a Share of the sales; Wait, after the load, waits for every
// payer and reports.
type Payers struct {
	ctx       context.Context
	shop      *shopapi.Client
	base      string
	step      plan.PaymentStep
	wg        sync.WaitGroup
	mu        sync.Mutex
	rep       report.PaymentReport
	loadEnded time.Time // zero while the load runs
	// giveUpAfter bounds the retries of a 404 (notWrittenBound).
	giveUpAfter time.Duration
}

// Start starts taking the sales of a load on base; ctx ends every payer.
func Start(ctx context.Context, shop *shopapi.Client, base string, step plan.PaymentStep) *Payers {
	return &Payers{ctx: ctx, shop: shop, base: base, step: step, rep: report.PaymentReport{DuringLoad: true}, giveUpAfter: notWrittenBound}
}

// Observe starts a payer for a Share of the sales whose answer names an
// order. It runs in the attack's result loop, so it never blocks.
func (lp *Payers) Observe(r attack.Result) {
	res := r.Result
	if res.Code != http.StatusOK && res.Code != http.StatusAccepted {
		return
	}
	var sale struct {
		Order string `json:"order"`
		User  string `json:"user"`
	}
	if json.Unmarshal(res.Body, &sale) != nil || sale.Order == "" {
		return
	}
	lp.mu.Lock()
	defer lp.mu.Unlock()
	lp.rep.Orders++
	if rand.Float64() >= lp.step.Share {
		return
	}
	lp.rep.Payers++
	delay := time.Duration(rand.Int64N(int64(lateFactor * float64(lp.step.PayWithin.D()))))
	if delay > lp.step.PayWithin.D() {
		lp.rep.Late++
	}
	// The delay runs from the sale's answer: its deadline does too.
	at := res.End().Add(delay)
	lp.wg.Go(func() { lp.pay(at, sale.Order, sale.User) })
}

// pay pays order at at, retrying a 404 until the workers have written it.
// A payment whose answer is lost counts as failed (the check then fails:
// nothing is guessed); one sent twice is answered paid again (paying a
// paid order changes nothing); one that comes past the deadline is paid
// if the sweeper has not got there yet, or refused 409.
func (lp *Payers) pay(at time.Time, order, user string) {
	if sleep.For(lp.ctx, time.Until(at)) != nil {
		return
	}
	lp.mu.Lock()
	if lp.loadEnded.IsZero() {
		lp.rep.SentDuringLoad++
	}
	lp.mu.Unlock()
	giveUp := time.Now().Add(lp.giveUpAfter)
	for {
		err := lp.shop.Pay(lp.ctx, lp.base, order, user)
		var api *shopapi.APIError
		if errors.As(err, &api) && api.Status == http.StatusNotFound && time.Now().Before(giveUp) {
			lp.mu.Lock()
			lp.rep.Retried404++
			lp.mu.Unlock()
			if sleep.For(lp.ctx, notWrittenRetry) == nil {
				continue
			}
		}
		lp.mu.Lock()
		Count(&lp.rep, err)
		lp.mu.Unlock()
		return
	}
}

// LoadDone marks the end of the load: later payers no longer count as sent
// during it.
func (lp *Payers) LoadDone() {
	lp.mu.Lock()
	lp.loadEnded = time.Now()
	lp.mu.Unlock()
}

// Wait waits for every payer and returns what they saw.
func (lp *Payers) Wait() *report.PaymentReport {
	lp.wg.Wait()
	lp.mu.Lock()
	defer lp.mu.Unlock()
	rep := lp.rep
	return &rep
}

// Count records one payer's answer in rep.
func Count(rep *report.PaymentReport, err error) {
	var api *shopapi.APIError
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
