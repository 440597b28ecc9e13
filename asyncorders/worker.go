package asyncorders

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockstep/lockstep/internal/slotretry"
	"github.com/lockstep/lockstep/orders"
)

// Mode is how a worker handles its stream: the design, or one of the
// courses' defects (docs/async-orders.md).
type Mode int

const (
	// Correct reads in the group, claims idle entries, and acknowledges on
	// the stream it read.
	Correct Mode = iota
	// NoClaim never claims: a dead consumer's pending entries wait until a
	// consumer of the same name starts (the async-no-claim rung).
	NoClaim
	// WrongAck acknowledges on another key, as the copied 黑马点评 consumer
	// does: orders are written, the pending list grows (async-wrong-ack).
	// Like the course's consumer it claims nothing either.
	WrongAck
)

// wrongAckKey is the key WrongAck acknowledges on: the course's
// "stream.orders", beside the stream it read.
const wrongAckKey = "stream.orders"

// Config is an order worker's.
type Config struct {
	// Consumer names the worker in the group; a restarted worker that keeps
	// its name finds its own pending entries first.
	Consumer string
	SKUs     []string
	Mode     Mode
	// Batch is the most entries one read or claim returns.
	Batch int64
	// Block is how long one read waits for an entry.
	Block time.Duration
	// ClaimIdle is how long an entry stays pending before another worker
	// takes it (XAUTOCLAIM): longer than any insert takes, so that a live
	// worker's entry is not taken from it.
	ClaimIdle time.Duration
	// ClaimEvery is how often a worker looks for idle entries.
	ClaimEvery time.Duration
	// MaxDeliveries: an entry whose order the order database refused this
	// many times (orders.ErrRefused: an error about the row, not an
	// outage) is given up: to the dead letters, its units back on sale.
	// Deliveries never count: a restarted worker's re-read, a claim while
	// the database is down, a worker killed mid-insert deliver an entry
	// again without any insert failing on its own account, and an admitted
	// sale is never given up for them.
	MaxDeliveries int64
	// FaultHook, when set, runs at each FaultPoint: an order worker
	// process's crash hook kills it there (cmd/orderworker), a test ends
	// the worker. An error leaves the entries in hand unhandled and
	// unacknowledged, as a death does.
	FaultHook func(FaultPoint) error
	// Payments, when set with PayWithin, gives each order a payment due
	// PayWithin after its admission; the Sweeper cancels it unpaid.
	Payments  *orders.Payments
	PayWithin time.Duration
}

// DefaultConfig is the workshop's.
func DefaultConfig(consumer string, skus []string) Config {
	return Config{Consumer: consumer, SKUs: skus, Batch: 64, Block: time.Second,
		ClaimIdle: 5 * time.Second, ClaimEvery: time.Second, MaxDeliveries: 5}
}

// Worker turns one stage's order messages into order rows.
type Worker struct {
	q     *Queue
	store orders.Store
	cfg   Config
	log   *slog.Logger
}

// NewWorker is a worker of q's stage writing into store.
func NewWorker(q *Queue, store orders.Store, cfg Config, log *slog.Logger) *Worker {
	return &Worker{q: q, store: store, cfg: cfg, log: log.With("stage", q.stage, "consumer", cfg.Consumer)}
}

// Run reads every SKU's stream until ctx ends; the entry in hand is
// finished first (or left pending, to be claimed).
func (w *Worker) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, sku := range w.cfg.SKUs {
		wg.Go(func() { w.serve(ctx, sku) })
	}
	wg.Wait()
	return nil
}

func (w *Worker) serve(ctx context.Context, sku string) {
	w.own(ctx, sku)
	var claimed time.Time
	failures := 0
	for ctx.Err() == nil {
		if w.cfg.Mode == Correct && time.Since(claimed) >= w.cfg.ClaimEvery {
			w.claim(ctx, sku)
			claimed = time.Now()
		}
		streams, err := w.q.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: Group, Consumer: w.cfg.Consumer,
			Streams: []string{w.q.Stream(sku), ">"}, Count: w.cfg.Batch, Block: w.cfg.Block}).Result()
		switch {
		case errors.Is(err, redis.Nil):
			failures = 0
			continue
		case redis.HasErrorPrefix(err, "NOGROUP"):
			if created, err := w.q.recreateGroup(ctx, sku); created {
				w.log.Warn("the order stream's group was deleted: created it again, reading every entry from the start", "sku", sku)
				failures = 0
				continue
			} else if err != nil && ctx.Err() == nil {
				w.log.Warn("recreate the group", "sku", sku, "err", err)
			}
			failures++
			pause(ctx, failures)
			continue
		case err != nil:
			if ctx.Err() == nil {
				// Said once a minute while it lasts.
				if failures++; failures%60 == 1 {
					w.log.Warn("read the order stream", "sku", sku, "err", err, "failures", failures)
				}
				pause(ctx, failures)
			}
			continue
		}
		failures = 0
		if err := w.fault(AfterRead); err != nil {
			w.log.Warn("left a batch read and unhandled", "sku", sku, "err", err)
			continue
		}
		for _, s := range streams {
			w.handleBatch(ctx, sku, s.Messages)
		}
	}
}

// own handles the entries this consumer read and did not acknowledge
// before it restarted (XREADGROUP from 0: its own pending list).
func (w *Worker) own(ctx context.Context, sku string) {
	start := "0"
	for ctx.Err() == nil {
		streams, err := w.q.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: Group, Consumer: w.cfg.Consumer,
			Streams: []string{w.q.Stream(sku), start}, Count: w.cfg.Batch}).Result()
		if err != nil || len(streams) == 0 || len(streams[0].Messages) == 0 {
			if err != nil && !errors.Is(err, redis.Nil) && !redis.HasErrorPrefix(err, "NOGROUP") {
				w.log.Warn("read own pending entries", "sku", sku, "err", err)
			}
			return
		}
		msgs := streams[0].Messages
		w.handleBatch(ctx, sku, msgs)
		start = msgs[len(msgs)-1].ID
	}
}

// claim takes the entries pending longer than ClaimIdle, whichever
// consumer read them: a dead worker's.
func (w *Worker) claim(ctx context.Context, sku string) {
	start := "0-0"
	for ctx.Err() == nil {
		msgs, next, err := w.q.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{Stream: w.q.Stream(sku), Group: Group,
			Consumer: w.cfg.Consumer, MinIdle: w.cfg.ClaimIdle, Start: start, Count: w.cfg.Batch}).Result()
		if err != nil {
			if ctx.Err() == nil && !redis.HasErrorPrefix(err, "NOGROUP") { // the read loop says NOGROUP
				w.log.Warn("claim idle entries", "sku", sku, "err", err)
			}
			return
		}
		if len(msgs) > 0 {
			w.log.Info("claimed idle entries", "sku", sku, "entries", len(msgs))
			if err := w.fault(AfterClaim); err != nil {
				w.log.Warn("left claimed entries unhandled", "sku", sku, "entries", len(msgs), "err", err)
				return
			}
			w.handleBatch(ctx, sku, msgs)
		}
		if next == "0-0" {
			return
		}
		start = next
	}
}

// batchStore is the order database of a worker that writes a batch at
// once (orders.SQLStore); a worker on any other Store writes each entry
// on its own.
type batchStore interface {
	InsertBatch(ctx context.Context, os []orders.Order, deadlines []time.Time) error
}

// handleBatch writes the orders of a read or claimed batch with one
// multi-row INSERT, their payments in the same transaction, and
// acknowledges them with one XACK. A batch the database refuses
// (orders.ErrBatchRefused: one of its rows cannot land as a new live
// order) is handled entry by entry, so a poison entry goes to the dead
// letters alone, its refusal counted on its own, and the others are
// written; a malformed entry never joins the batch.
func (w *Worker) handleBatch(ctx context.Context, sku string, ms []redis.XMessage) {
	bs, ok := w.store.(batchStore)
	if !ok || len(ms) < 2 {
		for _, m := range ms {
			w.handle(ctx, sku, m)
		}
		return
	}
	batch := make([]redis.XMessage, 0, len(ms))
	msgs := make([]Message, 0, len(ms))
	for _, m := range ms {
		msg, err := parse(sku, m.ID, m.Values)
		if err != nil {
			w.handle(ctx, sku, m) // to the dead letters, alone
			continue
		}
		batch, msgs = append(batch, m), append(msgs, msg)
	}
	if len(batch) == 0 {
		return
	}
	os := make([]orders.Order, len(msgs))
	var deadlines []time.Time
	if w.cfg.Payments != nil && w.cfg.PayWithin > 0 {
		deadlines = make([]time.Time, len(msgs))
	}
	for i, msg := range msgs {
		os[i] = msg.order(w.q.stage)
		if deadlines != nil {
			deadlines[i] = msg.Admitted.Add(w.cfg.PayWithin)
		}
	}
	err := retry(ctx, w.log, "insert a batch of orders", w.inRound(sku, msgs[0].Round, func(c context.Context) error {
		return bs.InsertBatch(c, os, deadlines)
	}))
	switch {
	case err == nil:
		if err := w.fault(AfterInsert); err != nil {
			w.log.Warn("left an inserted batch unacknowledged", "sku", sku, "entries", len(batch), "err", err)
			return
		}
		w.ackBatch(ctx, sku, batch, msgs)
	case errors.Is(err, orders.ErrStaleRound): // a batch is of one round (InsertBatch refuses any other)
		for _, m := range batch {
			w.dropStale(ctx, sku, m.ID, msgs[0].Round)
		}
	case errors.Is(err, orders.ErrBatchRefused):
		w.log.Info("the order database refused a batch: writing its entries one by one", "sku", sku, "entries", len(batch), "err", err)
		for _, m := range batch {
			w.handle(ctx, sku, m)
		}
	default: // ctx ended: the entries stay pending for a worker to claim
	}
}

// handle writes one entry's order and acknowledges it, or moves it to the
// dead letters. Once begun it finishes on a context without ctx's cancel,
// so a graceful stop does not leave it half done; while the database or
// Redis is down it waits (backing off) until they answer or ctx ends.
func (w *Worker) handle(ctx context.Context, sku string, m redis.XMessage) {
	msg, err := parse(sku, m.ID, m.Values)
	if err != nil {
		w.deadLetter(ctx, sku, m, compensation{mark: "entry:" + m.ID, reason: "malformed: " + err.Error()})
		return
	}
	o := msg.order(w.q.stage)
	err = retry(ctx, w.log, "insert order", w.inRound(sku, msg.Round, func(c context.Context) error { return w.store.Insert(c, o) }))
	switch {
	case err == nil:
		if !w.paymentOpened(ctx, sku, m, msg) {
			return
		}
		if err := w.fault(AfterInsert); err != nil {
			w.log.Warn("left an inserted order unacknowledged", "sku", sku, "entry", m.ID, "err", err)
			return
		}
		w.ack(ctx, sku, m.ID, time.Since(msg.Admitted))
	case errors.Is(err, orders.ErrStaleRound):
		w.dropStale(ctx, sku, m.ID, msg.Round)
	case errors.Is(err, orders.ErrVoided):
		w.voided(ctx, sku, m, msg)
	case errors.Is(err, orders.ErrDuplicateBuyer):
		// The buyer's other order stands: return the units, keep the buyer.
		w.giveUp(ctx, sku, m, msg, err.Error())
	case errors.Is(err, orders.ErrRefused):
		w.refused(ctx, sku, m, msg, err)
	default: // ctx ended: the entry stays pending for a worker to claim
	}
}

// paymentOpened opens the payment of msg's order, when the stage has
// payments: by order id, so opening it again changes nothing. False when
// the entry is done with: ctx ended (it stays pending, and whoever takes
// it next finds the order and opens the payment), or a reset deleted the
// order meanwhile (dropped: orders.Payments.Open is fenced by the round as
// the insert is).
func (w *Worker) paymentOpened(ctx context.Context, sku string, m redis.XMessage, msg Message) bool {
	if w.cfg.Payments == nil || w.cfg.PayWithin <= 0 {
		return true
	}
	deadline := msg.Admitted.Add(w.cfg.PayWithin)
	err := retry(ctx, w.log, "open payment", w.inRound(sku, msg.Round, func(c context.Context) error {
		return w.cfg.Payments.Open(c, msg.order(w.q.stage), deadline)
	}))
	if errors.Is(err, orders.ErrStaleRound) {
		w.dropStale(ctx, sku, m.ID, msg.Round)
	}
	return err == nil
}

// inRound wraps write, a write of orders of round: an orders.ErrStaleRound
// (the order table's round is not round) while Redis is still in round
// (or behind it) means the table's reset is still to come (a reset moves
// Redis's round first, then the table's), so it answers errResetPending,
// which retry waits out, and the write lands once the table is in round.
// ErrStaleRound is left as it is only when Redis moved past round too: the
// order's units belong to the stock a reset replaced.
func (w *Worker) inRound(sku string, round int64, write func(context.Context) error) func(context.Context) error {
	return func(c context.Context) error {
		err := write(c)
		if !errors.Is(err, orders.ErrStaleRound) {
			return err
		}
		now, rerr := w.q.round(c, sku)
		switch {
		case rerr != nil:
			return rerr // Redis unavailable: retried
		case round < now:
			return err
		}
		return fmt.Errorf("%w: round %d, Redis's: %w", errResetPending, round, err)
	}
}

// errResetPending: the order table is not yet in the round of the
// orders a worker writes (the reset between Redis's round and the
// table's).
var errResetPending = errors.New("asyncorders: the order table's reset is still to come")

// dropStale drops an entry of round, a round a reset ended: its units
// were in the stock the reset replaced and its buyer in the set it
// emptied, so neither an order nor a give-back is owed. Its XACK is a
// no-op (the reset emptied the stream and made its group anew), sent so
// that nothing of it can stay pending.
func (w *Worker) dropStale(ctx context.Context, sku, id string, round int64) {
	w.log.Info("dropped an entry of a round a reset ended", "sku", sku, "entry", id, "round", round)
	w.ack(ctx, sku, id, 0)
}

// refused counts one more refusal of the entry's order by the database
// and gives the entry up at MaxDeliveries; below it the entry stays
// pending, and a claim takes it again after ClaimIdle. The count is read,
// then written as a value (each step retried on its own), so a write
// whose reply was lost counts once; two workers refused at once may
// count one refusal for the two, never more than happened.
func (w *Worker) refused(ctx context.Context, sku string, m redis.XMessage, msg Message, cause error) {
	var n int64
	err := retry(ctx, w.log, "read the refusals", func(c context.Context) (err error) {
		n, err = w.q.refusals(c, sku, m.ID)
		return err
	})
	if err != nil {
		return
	}
	n++
	if err := retry(ctx, w.log, "count a refusal", func(c context.Context) error { return w.q.setRefusals(c, sku, m.ID, n) }); err != nil {
		return
	}
	if n >= w.cfg.MaxDeliveries {
		w.giveUp(ctx, sku, m, msg, fmt.Sprintf("refused %d times by the order database: %v", n, cause))
		return
	}
	w.log.Warn("the order database refused an order; its entry stays pending for a later claim", "sku", sku, "entry", m.ID,
		"refusals", n, "of", w.cfg.MaxDeliveries, "err", cause)
}

// fault runs the fault hook, if any, at p.
func (w *Worker) fault(p FaultPoint) error {
	if w.cfg.FaultHook == nil {
		return nil
	}
	return w.cfg.FaultHook(p)
}

// giveUp voids the order id, so no late insert can land it, and then
// dead-letters the entry returning its units; an insert that landed first
// keeps the order: its payment is opened (its inserting worker may have
// died before it did) and the entry acknowledged.
func (w *Worker) giveUp(ctx context.Context, sku string, m redis.XMessage, msg Message, reason string) {
	err := retry(ctx, w.log, "void order", func(c context.Context) error { return w.store.Void(c, msg.order(w.q.stage)) })
	switch {
	case errors.Is(err, orders.ErrOrdered):
		if w.paymentOpened(ctx, sku, m, msg) {
			w.ack(ctx, sku, m.ID, 0)
		}
	case err == nil:
		if err := w.fault(AfterVoid); err != nil {
			w.log.Warn("left a voided order's entry uncompensated", "sku", sku, "entry", m.ID, "err", err)
			return
		}
		w.compensateVoided(ctx, sku, m, msg, reason)
	case ctx.Err() == nil: // the void refused too: nothing returned, the entry stays pending
		w.log.Warn("could not void an order to give its entry up", "sku", sku, "entry", m.ID, "reason", reason, "err", err)
	}
}

// voided finishes an entry whose order id was voided before this insert:
// by a give-up (its own, or one that stopped between its void and
// compensate.lua), which dead-letters the entry; or by the sweeper, which
// cancelled the order for want of a payment (a worker inserted it and
// died before its XACK, and the entry came round again after the payment
// window). That order was the sale's and stood until its cancel: no dead
// letter; the entry is finished as the sweeper finishes a cancel (the
// units back once under the order id's mark, the buyer freed), then
// acknowledged. A cancelled payment tells the two apart: a give-up voids
// only an id that has no order row, so no payment.
func (w *Worker) voided(ctx context.Context, sku string, m redis.XMessage, msg Message) {
	if w.cfg.Payments != nil {
		var status string
		err := retry(ctx, w.log, "read the payment of a voided order", func(c context.Context) (err error) {
			status, err = w.cfg.Payments.Status(c, msg.OrderID, msg.User)
			return err
		})
		switch {
		case errors.Is(err, orders.ErrNoOrder):
		case err != nil:
			return // ctx ended: the entry stays pending
		case status == orders.PaymentCancelled:
			c := compensation{mark: msg.OrderID, reason: "payment timeout", qty: msg.Qty, freeBuyer: msg.User, round: msg.Round, fenced: true}
			if err := retry(ctx, w.log, "give back a cancelled order", func(ctx context.Context) error {
				_, err := w.q.compensate(ctx, sku, c)
				return err
			}); err == nil {
				w.ack(ctx, sku, m.ID, 0)
			}
			return
		}
	}
	w.compensateVoided(ctx, sku, m, msg, "order id voided before its insert")
}

// compensateVoided dead-letters the entry of a voided order id, returning
// its units and freeing its buyer unless an order of theirs stands (a
// duplicate buyer keeps her place). It finishes a give-up, its own or one
// that stopped between its void and compensate.lua (a worker killed
// there; its redelivery's insert meets the void row): compensate.lua runs
// once per order id, and only acknowledges when the units went back
// already.
func (w *Worker) compensateVoided(ctx context.Context, sku string, m redis.XMessage, msg Message, reason string) {
	var ordered bool
	err := retry(ctx, w.log, "look up the buyer's order", func(c context.Context) (err error) {
		ordered, err = w.store.HasOrder(c, w.q.stage, sku, msg.User)
		return err
	})
	if err != nil {
		return // the entry stays pending: claimed again later
	}
	freeBuyer := msg.User
	if ordered {
		freeBuyer = ""
	}
	w.deadLetter(ctx, sku, m, compensation{mark: msg.OrderID, reason: reason, qty: msg.Qty, freeBuyer: freeBuyer,
		round: msg.Round, fenced: true})
}

// deadLetter runs compensate.lua for entry m (c's entry and fields are m's).
func (w *Worker) deadLetter(ctx context.Context, sku string, m redis.XMessage, c compensation) {
	fields := make([]string, 0, len(m.Values))
	for name, v := range m.Values {
		fields = append(fields, fmt.Sprintf("%s=%v", name, v))
	}
	c.entry, c.fields = m.ID, strings.Join(fields, " ")
	var n int64
	err := retry(ctx, w.log, "dead-letter entry", func(ctx context.Context) (err error) {
		n, err = w.q.compensate(ctx, sku, c)
		return err
	})
	switch {
	case err != nil:
	case n < 0:
		w.log.Info("gave up an entry of a round a reset ended: nothing returned", "sku", sku, "entry", m.ID, "reason", c.reason, "round", c.round)
	default:
		w.log.Warn("dead-lettered an order entry", "sku", sku, "entry", m.ID, "reason", c.reason, "returned", c.qty)
	}
}

// ack acknowledges entry id and records the order's lag (0: no order
// written now).
func (w *Worker) ack(ctx context.Context, sku, id string, lag time.Duration) {
	var lags []time.Duration
	if lag > 0 {
		lags = []time.Duration{lag}
	}
	w.ackAll(ctx, sku, []string{id}, lags)
}

// ackBatch acknowledges a written batch and records its orders' lags.
func (w *Worker) ackBatch(ctx context.Context, sku string, batch []redis.XMessage, msgs []Message) {
	ids := make([]string, len(batch))
	lags := make([]time.Duration, len(msgs))
	for i := range batch {
		ids[i], lags[i] = batch[i].ID, time.Since(msgs[i].Admitted)
	}
	w.ackAll(ctx, sku, ids, lags)
}

// ackAll acknowledges ids with one XACK and records lags, in one MULTI.
// WrongAck acknowledges on the wrong key.
func (w *Worker) ackAll(ctx context.Context, sku string, ids []string, lags []time.Duration) {
	k := w.q.keys(sku)
	stream := k.stream()
	if w.cfg.Mode == WrongAck {
		stream = string(k) + wrongAckKey
	}
	_ = retry(ctx, w.log, "acknowledge entries", func(c context.Context) error {
		return redisFailed(slotretry.DoErr(c, func() error {
			_, err := w.q.rdb.TxPipelined(c, func(p redis.Pipeliner) error {
				p.XAck(c, stream, Group, ids...)
				if len(lags) > 0 {
					samples := make([]any, len(lags))
					for i, lag := range lags {
						samples[i] = strconv.FormatInt(lag.Microseconds(), 10)
					}
					p.RPush(c, k.lags(), samples...)
					p.LTrim(c, k.lags(), -lagSamples, -1)
				}
				return nil
			})
			return err
		}))
	})
}

// redisFailed marks a Redis error as worth retrying: every call a worker
// makes is safe to repeat (doc.go).
func redisFailed(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// retry runs op until it succeeds, fails with something other than an
// unavailable server, or ctx ends (then ctx's error). Each attempt gets a
// context without ctx's cancel, bounded by attemptTimeout, so a stop does
// not cut an attempt in half.
func retry(ctx context.Context, log *slog.Logger, what string, op func(context.Context) error) error {
	for failures := 1; ; failures++ {
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), attemptTimeout)
		err := op(c)
		cancel()
		if err == nil || !(errors.Is(err, orders.ErrUnavailable) || errors.Is(err, ErrUnavailable) || errors.Is(err, errResetPending)) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		log.Warn("retrying", "op", what, "attempt", failures, "err", err)
		pause(ctx, failures)
	}
}

// attemptTimeout bounds one call to Redis or the database.
const attemptTimeout = 5 * time.Second

// pause waits before the next attempt: 10 ms doubling up to one second.
func pause(ctx context.Context, failures int) {
	d := min(10*time.Millisecond<<min(failures-1, 7), time.Second)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// The async stages: the design, and the rungs that show the courses'
// defects (docs/async-orders.md).
const (
	StageStream   = "async-stream"
	StageTwoSteps = "async-two-steps"
	StageNoClaim  = "async-no-claim"
	StageWrongAck = "async-wrong-ack"
)

// Stages lists the async stages.
func Stages() []string { return []string{StageStream, StageTwoSteps, StageNoClaim, StageWrongAck} }

// ModeOf is the mode of stage's workers; false for a stage that is not async.
func ModeOf(stage string) (Mode, bool) {
	switch stage {
	case StageStream, StageTwoSteps:
		return Correct, true
	case StageNoClaim:
		return NoClaim, true
	case StageWrongAck:
		return WrongAck, true
	}
	return 0, false
}
