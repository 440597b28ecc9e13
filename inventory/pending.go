package inventory

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockstep/lockstep/orders"
)

var pendingAdoptScript = loadScript("pending_adopt.lua")

// A process renews its heartbeat every adoptEvery, with a lifetime of
// ownerLease; every adoptEvery it also looks for the pending resolutions
// of owners whose heartbeat lapsed.
const (
	ownerLease = 3 * time.Second
	adoptEvery = time.Second
)

// pendingOrders keeps in Redis the order resolutions a sale handed to the
// resolver (a void to confirm, a give-back to send again), so that they
// outlive the process that owes them: each is recorded before the sale
// answers, deleted once resolved, and adopted by any live replica once its
// owner's heartbeat has lapsed (a replica killed, or stopped for good;
// at most ownerLease after its last beat, at once after Close) — a
// replica that starts looks at once. Every resolution is
// idempotent by its order id (the void finds its own void row or the
// order; the give-back gives once per id), so one run by the owner and
// one by an adopter, or a run after the entry was deleted, change nothing
// more than one run.
//
// Keys: lockstep:<stage>:pending-orders, a hash of order id to the entry
// (JSON, pendingEntry); lockstep:resolvers:<owner>, the heartbeat of one
// process (replica name and a random suffix), with a TTL of ownerLease.
// Neither is touched by a script with other keys.
type pendingOrders struct {
	rdb   redis.UniversalClient
	owner string
	log   *slog.Logger

	sellers map[string]*orderSeller // by stage id, all added before start

	stop context.Context
	halt context.CancelFunc
	done chan struct{}
}

func newPendingOrders(rdb redis.UniversalClient, replica string, log *slog.Logger) *pendingOrders {
	p := &pendingOrders{rdb: rdb, owner: replica + "-" + rand.Text()[:10], log: log, sellers: make(map[string]*orderSeller), done: make(chan struct{})}
	p.stop, p.halt = context.WithCancel(context.Background())
	return p
}

// pendingEntry is one pending resolution: the order the sale named, what
// is owed, and the process that owes it.
type pendingEntry struct {
	Owner string       `json:"owner"`
	Order orders.Order `json:"order"`
	// Round and OnePerUser are the order's fields its JSON leaves out.
	Round      int64 `json:"round"`
	OnePerUser bool  `json:"one_per_user"`
	// Void: the order may still land, so its id is voided before anything
	// goes back; false: it never stands, only its units go back.
	Void          bool       `json:"void"`
	Proof         takenProof `json:"proof"`
	StockInOrders bool       `json:"stock_in_orders"`
}

func (e pendingEntry) order() orders.Order {
	o := e.Order
	o.Round, o.OnePerUser = e.Round, e.OnePerUser
	return o
}

func pendingKey(stage string) string        { return "lockstep:" + stage + ":pending-orders" }
func heartbeatKey(owner string) string      { return "lockstep:resolvers:" + owner }
func (p *pendingOrders) add(s *orderSeller) { p.sellers[s.id] = s }

// record writes e, owned by this process, before the sale answers.
func (p *pendingOrders) record(ctx context.Context, e pendingEntry) error {
	e.Owner = p.owner
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if err := p.rdb.HSet(ctx, pendingKey(e.Order.Stage), e.Order.ID, b).Err(); err != nil {
		return unavailable("record pending order resolution", err)
	}
	return nil
}

// forget deletes e's entry once e is resolved, whoever holds it now.
func (p *pendingOrders) forget(ctx context.Context, e pendingEntry) error {
	if err := p.rdb.HDel(ctx, pendingKey(e.Order.Stage), e.Order.ID).Err(); err != nil {
		return unavailable("forget resolved order", err)
	}
	return nil
}

// start renews this process's heartbeat and adopts the entries of lapsed
// owners, at once and then every adoptEvery, until close.
func (p *pendingOrders) start() {
	go func() {
		defer close(p.done)
		for {
			p.beat()
			if err := p.adopt(p.stop); err != nil && p.stop.Err() == nil {
				p.log.Warn("adopt pending order resolutions", "err", err)
			}
			select {
			case <-time.After(adoptEvery):
			case <-p.stop.Done():
				return
			}
		}
	}()
}

func (p *pendingOrders) beat() {
	ctx, cancel := context.WithTimeout(p.stop, adoptEvery)
	defer cancel()
	if err := p.rdb.Set(ctx, heartbeatKey(p.owner), 1, ownerLease).Err(); err != nil && p.stop.Err() == nil {
		p.log.Warn("renew resolver heartbeat", "owner", p.owner, "err", err)
	}
}

// close stops the loop and deletes the heartbeat, so that a live replica
// adopts at once what this process still owes (its resolver is closed).
func (p *pendingOrders) close() {
	p.halt()
	<-p.done
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	if err := p.rdb.Del(ctx, heartbeatKey(p.owner)).Err(); err != nil {
		p.log.Warn("delete resolver heartbeat", "owner", p.owner, "err", err)
	}
}

// adopt reads every stage's pending entries and queues, unless queued
// already, those this process owns (an adoption whose reply was lost, a
// record that arrived after its resolution) and, once adopted, those whose
// owner's heartbeat is gone: two pipelines and one script per adoption.
func (p *pendingOrders) adopt(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, releaseTimeout)
	defer cancel()
	reads := make(map[string]*redis.MapStringStringCmd, len(p.sellers))
	if _, err := p.rdb.Pipelined(ctx, func(pl redis.Pipeliner) error {
		for id := range p.sellers {
			reads[id] = pl.HGetAll(ctx, pendingKey(id))
		}
		return nil
	}); err != nil {
		return err
	}
	type found struct {
		stage, id, raw string
		e              pendingEntry
	}
	var others []found
	owners := make(map[string]*redis.IntCmd)
	for stage, cmd := range reads {
		for id, raw := range cmd.Val() {
			var e pendingEntry
			if err := json.Unmarshal([]byte(raw), &e); err != nil {
				p.log.Error("pending order resolution unreadable", "stage", stage, "order", id, "err", err)
				continue
			}
			if e.Owner == p.owner {
				p.sellers[stage].adopted(e)
				continue
			}
			others = append(others, found{stage, id, raw, e})
			owners[e.Owner] = nil
		}
	}
	if len(others) == 0 {
		return nil
	}
	if _, err := p.rdb.Pipelined(ctx, func(pl redis.Pipeliner) error {
		for owner := range owners {
			owners[owner] = pl.Exists(ctx, heartbeatKey(owner))
		}
		return nil
	}); err != nil {
		return err
	}
	var errs []error
	for _, f := range others {
		if owners[f.e.Owner].Val() > 0 {
			continue // its owner lives and resolves it
		}
		lapsed := f.e.Owner
		f.e.Owner = p.owner
		mine, err := json.Marshal(f.e)
		if err != nil {
			return err
		}
		adopted, err := pendingAdoptScript.Run(ctx, p.rdb, []string{pendingKey(f.stage)}, f.id, f.raw, mine).Int()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if adopted == 1 {
			p.log.Info("adopted pending order resolution", "stage", f.stage, "order", f.id, "from", lapsed)
			p.sellers[f.stage].adopted(f.e)
		}
	}
	return errors.Join(errs...)
}

// handOver hands e, a resolution the sale could not finish before its
// answer, to the resolver: recorded in Redis first, on ctx, before the sale
// answers (when Redis does not answer, the resolver records it before
// anything else), then queued here, holding hold until it is resolved.
func (s *orderSeller) handOver(ctx context.Context, e pendingEntry, hold *guardHold) {
	hold.keep()
	recorded := s.pending.record(ctx, e) == nil
	s.resolver.resolve(resolutionKey(e), s.resolution(e, hold, recorded))
}

// adopted queues e, recorded as this process's, unless it is queued.
func (s *orderSeller) adopted(e pendingEntry) {
	s.resolver.resolveUnlessQueued(resolutionKey(e), s.resolution(e, nil, true))
}

func resolutionKey(e pendingEntry) string { return "order " + e.Order.ID }

// resolution is the resolver's attempt at e: it records e unless recorded,
// settles it, deletes its entry and releases hold.
func (s *orderSeller) resolution(e pendingEntry, hold *guardHold, recorded bool) func(ctx context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		if !recorded {
			if err := s.pending.record(ctx, e); err != nil {
				return false, err
			}
			recorded = true
		}
		if err := s.settle(ctx, e); err != nil {
			return false, err
		}
		if err := s.pending.forget(ctx, e); err != nil {
			return false, err
		}
		hold.done()
		return true, nil
	}
}

// settle voids e's order id until the void is confirmed — then no insert of
// it can land — and gives the units back, or finds the order inserted,
// which stands; for an order that never stands it only gives back.
func (s *orderSeller) settle(ctx context.Context, e pendingEntry) error {
	o := e.order()
	if e.Void {
		switch err := s.orders.Void(ctx, o); {
		case errors.Is(err, orders.ErrOrdered):
			return nil
		case err != nil:
			return err
		case e.StockInOrders:
			return nil
		}
	}
	return s.giveBack(ctx, o, e.Proof)
}
