package asyncorders

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockstep/lockstep/internal/outcome"
	"github.com/lockstep/lockstep/internal/slotretry"
	"github.com/lockstep/lockstep/orders"
)

//go:embed scripts/*.lua
var scripts embed.FS

func loadScript(name string) *redis.Script {
	src, err := scripts.ReadFile("scripts/" + name)
	if err != nil {
		panic(fmt.Sprintf("asyncorders: embedded script %s: %v", name, err)) // a build defect, caught by every test
	}
	return redis.NewScript(string(src))
}

var (
	resetScript      = loadScript("reset.lua")
	admitScript      = loadScript("admit.lua")
	compensateScript = loadScript("compensate.lua")
)

// Group is the one consumer group every order worker reads in.
const Group = "order-workers"

// lagSamples bounds the admission-to-row lags kept per SKU.
const lagSamples = 100_000

// Queue is the Redis side of one async stage: stock, buyers, the order
// stream and its dead letters, per SKU, under the keys
// "lockstep:<stage>:{<sku>}:…" (one hash tag per SKU).
type Queue struct {
	rdb   redis.UniversalClient
	stage string
	// betweenAccountReads, set by tests only, runs in Account between its
	// Redis read and its order database read.
	betweenAccountReads func()
}

// NewQueue is stage's queue on rdb.
func NewQueue(rdb redis.UniversalClient, stage string) *Queue {
	return &Queue{rdb: rdb, stage: stage}
}

// Stage names the queue's stage.
func (q *Queue) Stage() string { return q.stage }

// keys is the prefix of one SKU's keys.
type keys string

func (q *Queue) keys(sku string) keys {
	return keys("lockstep:" + q.stage + ":{" + sku + "}:")
}

func (k keys) initial() string     { return string(k) + "initial" }
func (k keys) stock() string       { return string(k) + "stock" }
func (k keys) sold() string        { return string(k) + "sold" }
func (k keys) buyers() string      { return string(k) + "buyers" }
func (k keys) compensated() string { return string(k) + "compensated" }
func (k keys) stream() string      { return string(k) + "orders" }
func (k keys) dead() string        { return string(k) + "dead" }
func (k keys) lags() string        { return string(k) + "lags" }
func (k keys) refusals() string    { return string(k) + "refusals" }
func (k keys) round() string       { return string(k) + "round" }

// round is sku's reset round in Redis (0 before any reset): the round of
// the stock now on sale (doc.go, "Rounds").
func (q *Queue) round(ctx context.Context, sku string) (int64, error) {
	var n int64
	err := slotretry.DoErr(ctx, func() (err error) {
		n, err = q.rdb.Get(ctx, q.keys(sku).round()).Int64()
		return err
	})
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, unavailable("read the round of "+sku, err)
	}
	return n, nil
}

// refusals is how many times the order database refused entry id's order
// (orders.ErrRefused), kept in a hash by entry id beside the stream, so
// that it outlives the worker that counted and is the same for every
// worker that takes the entry; a reset deletes it.
func (q *Queue) refusals(ctx context.Context, sku, id string) (int64, error) {
	var n int64
	err := slotretry.DoErr(ctx, func() (err error) {
		n, err = q.rdb.HGet(ctx, q.keys(sku).refusals(), id).Int64()
		return err
	})
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, unavailable("read the refusals of "+id, err)
	}
	return n, nil
}

// setRefusals writes entry id's count: a value, not an increment, so a
// write sent again after a lost reply counts once.
func (q *Queue) setRefusals(ctx context.Context, sku, id string, n int64) error {
	err := slotretry.DoErr(ctx, func() error { return q.rdb.HSet(ctx, q.keys(sku).refusals(), id, n).Err() })
	if err != nil {
		return unavailable("count a refusal of "+id, err)
	}
	return nil
}

// compensation is one run of compensate.lua (which see).
type compensation struct {
	// mark is the order id, or "entry:<id>" for a malformed entry.
	mark string
	// entry is the stream entry to dead-letter, "" for none (the sweeper).
	entry, reason string
	qty           int64
	// freeBuyer is the buyer to free, "" for none.
	freeBuyer, fields string
	// round is the round the order's units were taken in; fenced false
	// (a malformed entry, which names no round and returns nothing) runs
	// it whatever the round.
	round  int64
	fenced bool
}

// compensate runs compensate.lua for c, and answers as it does: 1 when
// it compensated, 0 when an earlier run had, -1 when c's round is over.
func (q *Queue) compensate(ctx context.Context, sku string, c compensation) (int64, error) {
	k := q.keys(sku)
	round := ""
	if c.fenced {
		round = strconv.FormatInt(c.round, 10)
	}
	n, err := q.run(ctx, compensateScript, []string{k.stock(), k.sold(), k.buyers(), k.compensated(), k.stream(), k.dead(), k.round()},
		c.mark, c.entry, Group, c.reason, c.qty, c.freeBuyer, c.fields, round).Int64()
	if err != nil {
		return 0, writeFailed("compensate", err)
	}
	return n, nil
}

// recreateGroup creates the workers' group of sku's stream again, after
// someone deleted it (a read answered NOGROUP), from the stream's start:
// the entries are read again, those handled before find their rows (or
// their marks) and are only acknowledged, and none admitted is skipped,
// as a group from "$" would. True when it created it; false when the
// stream does not exist (a stage never reset: reset.lua creates both) or
// another worker recreated it first.
func (q *Queue) recreateGroup(ctx context.Context, sku string) (bool, error) {
	err := q.rdb.XGroupCreate(ctx, q.Stream(sku), Group, "0").Err()
	switch {
	case err == nil:
		return true, nil
	case redis.HasErrorPrefix(err, "BUSYGROUP"), redis.HasErrorPrefix(err, "ERR The XGROUP subcommand requires the key to exist"):
		return false, nil
	}
	return false, unavailable("create the group of "+sku+" again", err)
}

// Stream is the order stream's key of sku.
func (q *Queue) Stream(sku string) string { return q.keys(sku).stream() }

// DeadLetters is the dead-letter stream's key of sku.
func (q *Queue) DeadLetters(sku string) string { return q.keys(sku).dead() }

func (q *Queue) run(ctx context.Context, s *redis.Script, keys []string, args ...any) *redis.Cmd {
	return slotretry.Do(ctx, func() *redis.Cmd { return s.Run(ctx, q.rdb, keys, args...) })
}

// Reset gives sku stock units, empties its buyers, stream and dead
// letters, and moves its round on past both its own and floor, the order
// table's round (orders.Store.Round): it returns the new round, which the
// caller gives the order table's reset (orders.Store.Reset), so that the
// entries a worker still holds from the round before never land as orders
// (doc.go, "Rounds"), also after Redis lost its round.
func (q *Queue) Reset(ctx context.Context, sku string, stock, floor int64) (round int64, err error) {
	return q.reset(ctx, sku, stock, floor, true)
}

// Initialise gives a never-reset sku stock units; a SKU with keys keeps
// them. Its round is floor, the order table's round, at least: after Redis
// lost its data the next entries are of the table's round.
func (q *Queue) Initialise(ctx context.Context, sku string, stock, floor int64) error {
	_, err := q.reset(ctx, sku, stock, floor, false)
	return err
}

func (q *Queue) reset(ctx context.Context, sku string, stock, floor int64, force bool) (int64, error) {
	k := q.keys(sku)
	flag := "0"
	if force {
		flag = "1"
	}
	round, err := q.run(ctx, resetScript, []string{k.initial(), k.stock(), k.sold(), k.buyers(), k.compensated(), k.stream(), k.dead(), k.round()},
		stock, Group, flag, floor).Int64()
	if err != nil {
		return 0, unavailable("reset "+sku, err)
	}
	if force {
		if err := q.rdb.Del(ctx, k.lags(), k.refusals()).Err(); err != nil {
			return 0, unavailable("reset lags and refusals of "+sku, err)
		}
	}
	return round, nil
}

// Admission is an admitted sale: its order id, made before the script ran
// so that the message and the answer name the same order.
type Admission struct {
	OrderID   string
	Remaining int64
	// Round is the SKU's round the units were taken in: the message's
	// round (Enqueue's, on the async-two-steps rung).
	Round int64
}

// Message is one order message of the stream (its encoding: message.go).
type Message struct {
	OrderID string
	SKU     string
	User    string
	Qty     int64
	Replica string
	// Admitted is when Redis appended the entry (its id's milliseconds):
	// read from the stream, never sent.
	Admitted time.Time
	// Round is the SKU's reset round the units were taken in: admit.lua
	// writes it beside the message, from Redis, never from the caller.
	Round int64
}

func (m Message) values() []any {
	return []any{orderField, m.encode(), roundField, strconv.FormatInt(m.Round, 10)}
}

// Admit runs the admission script for one sale of sku. With enqueue false
// (the async-two-steps rung) the message is not appended: the caller does
// it with Enqueue. ErrSoldOut, ErrAlreadyBought, ErrNoStock (the caller
// initialises the SKU and admits again), or ErrUnavailable (with
// ErrOutcomeUnknown when Redis did not answer: the sale may be admitted).
func (q *Queue) Admit(ctx context.Context, m Message, enqueue bool) (Admission, error) {
	k := q.keys(m.SKU)
	message := ""
	if enqueue {
		message = m.encode()
	}
	res, err := q.run(ctx, admitScript, []string{k.stock(), k.sold(), k.buyers(), k.stream(), k.round()}, m.Qty, m.User, message).Int64Slice()
	switch {
	case err != nil:
		return Admission{}, writeFailed("admit", err)
	case len(res) != 2:
		return Admission{}, unavailable("admit", fmt.Errorf("reply %v", res))
	}
	n := res[0]
	switch {
	case n == -1:
		return Admission{}, ErrSoldOut
	case n == -2:
		return Admission{}, fmt.Errorf("%w: %s", ErrNoStock, m.SKU)
	case n == -3:
		return Admission{}, fmt.Errorf("%w: %s", ErrAlreadyBought, m.User)
	}
	return Admission{OrderID: m.OrderID, Remaining: n, Round: res[1]}, nil
}

// Enqueue appends m, admitted as a (Admit with enqueue false), to its
// SKU's stream in a's round: the second call of the async-two-steps rung.
func (q *Queue) Enqueue(ctx context.Context, m Message, a Admission) error {
	m.Round = a.Round
	err := slotretry.DoErr(ctx, func() error {
		return q.rdb.XAdd(ctx, &redis.XAddArgs{Stream: q.keys(m.SKU).stream(), Values: m.values()}).Err()
	})
	if err != nil {
		return writeFailed("enqueue", err)
	}
	return nil
}

// Stats is what a run's report and live page show of one SKU's stream.
type Stats struct {
	Initial   int64 `json:"initial"`
	Remaining int64 `json:"remaining"`
	// Length is the stream's length; entries stay after their ack.
	Length int64 `json:"stream_length"`
	// Undelivered are entries no worker has read yet.
	Undelivered int64 `json:"undelivered"`
	// Pending are entries read and not acknowledged.
	Pending int64 `json:"pending"`
	// OldestPending is the age of the oldest pending entry (0 when none).
	OldestPending time.Duration `json:"oldest_pending_ns"`
	DeadLetters   int64         `json:"dead_letters"`
	// LagP50 and LagP99 are from the admission to the order row, over the
	// orders the workers wrote.
	LagP50 time.Duration `json:"lag_p50_ns"`
	LagP99 time.Duration `json:"lag_p99_ns"`
	Lags   int64         `json:"lags"`
}

// Drained reports that every admitted message was handled.
func (s Stats) Drained() bool { return s.Undelivered == 0 && s.Pending == 0 }

// Stats reads sku's figures, all at one moment (one MULTI, one round
// trip); ErrNoStock for a SKU never initialised.
func (q *Queue) Stats(ctx context.Context, sku string) (Stats, error) {
	k := q.keys(sku)
	var (
		initial, stock *redis.StringCmd
		length, dead   *redis.IntCmd
		groups         *redis.XInfoGroupsCmd
		pending        *redis.XPendingCmd
		lags           *redis.StringSliceCmd
	)
	// Each command's own error is read below: Exec's is only the first.
	_, _ = q.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		initial, stock = p.Get(ctx, k.initial()), p.Get(ctx, k.stock())
		length, dead = p.XLen(ctx, k.stream()), p.XLen(ctx, k.dead())
		groups, pending = p.XInfoGroups(ctx, k.stream()), p.XPending(ctx, k.stream(), Group)
		lags = p.LRange(ctx, k.lags(), 0, -1)
		return nil
	})
	var s Stats
	var err error
	switch s.Initial, err = initial.Int64(); {
	case errors.Is(err, redis.Nil):
		return Stats{}, fmt.Errorf("%w: %s", ErrNoStock, sku)
	case err != nil:
		return Stats{}, unavailable("read initial stock", err)
	}
	if s.Remaining, err = stock.Int64(); err != nil {
		return Stats{}, unavailable("read stock", err)
	}
	if s.Length, err = length.Result(); err != nil {
		return Stats{}, unavailable("read stream length", err)
	}
	if s.DeadLetters, err = dead.Result(); err != nil {
		return Stats{}, unavailable("read dead letters", err)
	}
	if err := groups.Err(); err != nil {
		return Stats{}, unavailable("read the group", err)
	}
	// Without the group (deleted by hand) nobody reads the stream: every
	// entry is undelivered until a worker creates the group again from
	// the start (recreateGroup), and reads them all.
	s.Undelivered = s.Length
	for _, g := range groups.Val() {
		if g.Name == Group {
			s.Undelivered, s.Pending = g.Lag, g.Pending
		}
	}
	// XPENDING is consulted only with entries pending: without the group
	// (none pending then) it answers NOGROUP.
	if s.Pending > 0 {
		p, err := pending.Result()
		if err != nil {
			return Stats{}, unavailable("read pending", err)
		}
		if at, ok := entryTime(p.Lower); ok {
			s.OldestPending = time.Since(at)
		}
	}
	if err := lags.Err(); err != nil {
		return Stats{}, unavailable("read lags", err)
	}
	s.Lags = int64(len(lags.Val()))
	s.LagP50, s.LagP99 = percentiles(lags.Val())
	return s, nil
}

// entryTime is the time a stream entry id was made (its milliseconds).
func entryTime(id string) (time.Time, bool) {
	for i := range id {
		if id[i] == '-' {
			ms, err := strconv.ParseInt(id[:i], 10, 64)
			return time.UnixMilli(ms), err == nil
		}
	}
	return time.Time{}, false
}

func percentiles(samples []string) (p50, p99 time.Duration) {
	if len(samples) == 0 {
		return 0, 0
	}
	us := make([]int64, 0, len(samples))
	for _, s := range samples {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			us = append(us, n)
		}
	}
	if len(us) == 0 {
		return 0, 0
	}
	slices.Sort(us)
	at := func(p int) time.Duration { return time.Duration(us[(len(us)-1)*p/100]) * time.Microsecond }
	return at(50), at(99)
}

// Invariant is the accounting of one SKU after the workers drained it.
type Invariant struct {
	Stats
	Units int64 `json:"units_in_orders"`
	// Returning are units of cancelled orders not yet back on sale.
	Returning int64 `json:"returning"`
	// Holds: initial = remaining + units in live orders, nothing pending
	// and nothing returning.
	Holds bool `json:"holds"`
	// Undersold are units neither on sale, nor in an order, nor returning.
	Undersold int64 `json:"undersold"`
	// Oversold are units in orders beyond the initial stock.
	Oversold int64 `json:"oversold"`
}

// Check reads sku's stream figures, then its Account (payments nil when
// the stage has none).
func (q *Queue) Check(ctx context.Context, store orders.Store, payments *orders.Payments, sku string) (Invariant, error) {
	s, err := q.Stats(ctx, sku)
	if err != nil {
		return Invariant{}, err
	}
	a, err := q.Account(ctx, store, payments, sku)
	if err != nil {
		return Invariant{}, err
	}
	s.Initial, s.Remaining = a.Initial, a.Remaining
	missing := a.Missing()
	return Invariant{
		Stats:     s,
		Units:     a.Orders.Units,
		Returning: a.Returning,
		Holds:     missing == 0 && a.Returning == 0 && s.Drained(),
		Undersold: max(0, missing),
		Oversold:  max(0, -missing),
	}, nil
}

// Drain waits until every message of sku was handled, or ctx ends.
func (q *Queue) Drain(ctx context.Context, sku string) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	last := errors.New("no figures read")
	for {
		switch s, err := q.Stats(ctx, sku); {
		case err != nil:
			if ctx.Err() == nil {
				last = err
			}
		case s.Drained():
			return nil
		default:
			last = fmt.Errorf("%d undelivered, %d pending", s.Undelivered, s.Pending)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("asyncorders: drain %s: %w: %w", sku, ctx.Err(), last)
		case <-tick.C:
		}
	}
}

func unavailable(op string, err error) error {
	return fmt.Errorf("asyncorders: %s: %w: %w", op, ErrUnavailable, err)
}

// writeFailed is unavailable, with ErrOutcomeUnknown when the write may
// have run (internal/outcome).
func writeFailed(op string, err error) error {
	if !outcome.MayHaveRunErr(err) {
		return unavailable(op, err)
	}
	return fmt.Errorf("asyncorders: %s: %w: %w: %w", op, ErrUnavailable, ErrOutcomeUnknown, err)
}
