package inventory

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/lockstep/lockstep/internal/outcome"
	"github.com/lockstep/lockstep/internal/slotretry"
)

//go:embed scripts/*.lua
var scriptFiles embed.FS

// Scripts are the Lua scripts the package runs, for tools that name the
// script an EVALSHA runs (the workshop's traces of a sale's commands).
func Scripts() fs.FS { return scriptFiles }

func loadScript(name string) *redis.Script { return redis.NewScript(scriptSource(name)) }

func scriptSource(name string) string {
	src, err := scriptFiles.ReadFile("scripts/" + name)
	if err != nil {
		panic(fmt.Sprintf("inventory: embedded script %s: %v", name, err)) // a build defect, caught by every test
	}
	return string(src)
}

var (
	initScript         = loadScript("init.lua")
	atomicDeductScript = loadScript("atomic_deduct.lua")
	claimFaultScript   = loadScript("claim_fault.lua")
	segmentUndoScript  = loadScript("segment_undo.lua")
)

// errNoStock reports that a SKU (or segment) has no stock keys yet.
var errNoStock = errors.New("inventory: no stock yet")

// unavailable wraps a Redis error so callers can branch on ErrUnavailable.
func unavailable(op string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, op, err) // ErrUnavailable names the layer
}

// writeFailed wraps the error of a stock write: ErrOutcomeUnknown too
// when it may have run (internal/outcome); one Redis answered (a refused
// transaction or script wrote nothing) or never sent (no pooled
// connection, a refused dial) sold nothing.
func writeFailed(op string, err error) error {
	if !outcome.MayHaveRunErr(err) {
		return unavailable(op, err)
	}
	return fmt.Errorf("inventory: %s: %w: %w: %w", op, ErrUnavailable, ErrOutcomeUnknown, err)
}

// store is the stock of one stage in Redis. A tag is what goes between the
// braces of the keys: the SKU, or "<sku>:<segment>" for a segment.
type store struct {
	rdb   redis.UniversalClient
	stage string
}

// run runs script, again while a Redis Cluster refuses it because its
// keys' slot is moving (internal/slotretry).
func (s *store) run(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	return slotretry.Do(ctx, func() *redis.Cmd { return script.Run(ctx, s.rdb, keys, args...) })
}

// tx runs fn's commands in one MULTI/EXEC, again while a Redis Cluster
// refuses them because their slot is moving (the transaction is discarded
// whole then).
func (s *store) tx(ctx context.Context, fn func(redis.Pipeliner) error) error {
	return slotretry.DoErr(ctx, func() error {
		_, err := s.rdb.TxPipelined(ctx, fn)
		return err
	})
}

// stockKeys is the prefix of the keys of one tag, "lockstep:<stage>:{<tag>}:";
// each key is built when asked for, so that a sale builds only the keys
// it touches.
type stockKeys string

func (s *store) keys(tag string) stockKeys {
	return stockKeys("lockstep:" + s.stage + ":{" + tag + "}:")
}

func (k stockKeys) initial() string { return string(k) + "initial" }
func (k stockKeys) stock() string   { return string(k) + "stock" }
func (k stockKeys) sold() string    { return string(k) + "sold" }
func (k stockKeys) foreign() string { return string(k) + "foreign-unlocks" }
func (k stockKeys) lock() string    { return string(k) + "lock" }

// fence (fenced) holds "<token>:<holder>" of the newest holder that read
// the stock.
func (k stockKeys) fence() string { return string(k) + "fence" }

// stock reads the current stock; errNoStock when the tag was never
// initialised.
func (s *store) stock(ctx context.Context, tag string) (int64, error) {
	n, err := s.rdb.Get(ctx, s.keys(tag).stock()).Int64()
	switch {
	case errors.Is(err, redis.Nil):
		return 0, errNoStock
	case err != nil:
		return 0, unavailable("get stock", err)
	}
	return n, nil
}

// initialise gives tag its initial stock unless it has one already.
func (s *store) initialise(ctx context.Context, tag string, stock int64) error {
	k := s.keys(tag)
	if err := s.run(ctx, initScript, []string{k.initial(), k.stock(), k.sold()}, stock).Err(); err != nil {
		return unavailable("initialise stock", err)
	}
	return nil
}

// commit records a sale: the new stock and the sold units in one
// transaction, so a crash can never leave one without the other.
func (s *store) commit(ctx context.Context, tag string, newStock, qty int64) error {
	k := s.keys(tag)
	err := s.tx(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, k.stock(), newStock, 0)
		p.IncrBy(ctx, k.sold(), qty)
		return nil
	})
	if err != nil {
		return writeFailed("commit sale", err)
	}
	return nil
}

// commitAcross records one sale taken from several tags (segments), each
// losing takes[i] units from stocks[i]: all or none. The caller holds every
// tag's lock. On one Redis it is one transaction; on a Redis Cluster, where
// the tags live in different slots, it is commitEach.
func (s *store) commitAcross(ctx context.Context, tags []string, stocks, takes []int64) error {
	if _, cluster := s.rdb.(*redis.ClusterClient); cluster {
		return s.commitEach(ctx, tags, stocks, takes)
	}
	err := s.tx(ctx, func(p redis.Pipeliner) error {
		for i, tag := range tags {
			k := s.keys(tag)
			p.Set(ctx, k.stock(), stocks[i]-takes[i], 0)
			p.IncrBy(ctx, k.sold(), takes[i])
		}
		return nil
	})
	if err != nil {
		return writeFailed("commit sale across segments", err)
	}
	return nil
}

// commitEach writes each tag's part in a transaction of its own, in order;
// when one fails, the parts before it and that one (which may have landed)
// are undone by segment_undo.lua — on a context of their own, since the
// sale's may be what ended — so the sale is recorded whole or not at all.
// When the failed write's outcome is unknown (no reply), it may still land
// after the undo, and the answer says so. A process that dies between two
// parts leaves them recorded, an outcome its client never learns — as a
// crash after any write.
func (s *store) commitEach(ctx context.Context, tags []string, stocks, takes []int64) error {
	for i, tag := range tags {
		err := s.commit(ctx, tag, stocks[i]-takes[i], takes[i])
		if err == nil {
			continue
		}
		undoCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer cancel()
		var undoErrs []error
		for j := range i + 1 {
			k := s.keys(tags[j])
			written := strconv.FormatInt(stocks[j]-takes[j], 10)
			if uerr := s.run(undoCtx, segmentUndoScript, []string{k.stock(), k.sold()}, written, stocks[j], takes[j]).Err(); uerr != nil {
				undoErrs = append(undoErrs, uerr)
			}
		}
		if len(undoErrs) > 0 || errors.Is(err, ErrOutcomeUnknown) {
			return fmt.Errorf("inventory: commit sale across segments: %w: %w: %w", ErrUnavailable, ErrOutcomeUnknown, errors.Join(append(undoErrs, err)...))
		}
		// Undone: nothing was sold.
		return fmt.Errorf("inventory: commit sale across segments: %w: its parts were undone after: %v", ErrUnavailable, err)
	}
	return nil
}

// fencedStock reads the stock as holder, the holder of token, and moves the
// fence to that holder; errFenced when a newer holder already came through.
func (s *store) fencedStock(ctx context.Context, tag string, token int64, holder string) (int64, error) {
	k := s.keys(tag)
	stock, err := s.run(ctx, fencedReadScript, []string{k.stock(), k.fence()}, token, holder).Int64()
	switch {
	case err != nil:
		return 0, unavailable("fenced read", err)
	case stock == -2:
		return 0, errNoStock
	case stock == -3:
		return 0, errFenced
	}
	return stock, nil
}

// fencedCommit records a sale unless another holder has read the stock
// since holder did (or holder's read was lost); errFenced then, and nothing
// is written.
func (s *store) fencedCommit(ctx context.Context, tag string, newStock, qty, token int64, holder string) error {
	k := s.keys(tag)
	written, err := s.run(ctx, fencedCommitScript, []string{k.stock(), k.sold(), k.fence()}, newStock, qty, token, holder).Int()
	switch {
	case err != nil:
		return writeFailed("fenced commit", err)
	case written == 0:
		return errFenced
	}
	return nil
}

// atomicDeduct checks and deducts in one script: the remaining stock,
// ErrSoldOut or errNoStock.
func (s *store) atomicDeduct(ctx context.Context, tag string, qty int64) (int64, error) {
	k := s.keys(tag)
	remaining, err := s.run(ctx, atomicDeductScript, []string{k.stock(), k.sold()}, qty).Int64()
	if err != nil {
		return 0, writeFailed("atomic deduct", err)
	}
	return atomicResult(remaining)
}

// atomicResult reads atomic_deduct.lua's answer.
func atomicResult(remaining int64) (int64, error) {
	switch remaining {
	case -1:
		return 0, ErrSoldOut
	case -2:
		return 0, errNoStock
	}
	return remaining, nil
}

// reset sets the stock and zeroes the sales in one transaction. With
// dropLock it also deletes the lock: one the reset could not take, left by
// a holder that crashed. A lock the reset holds is released by it. also
// queues a stage's own keys into the same transaction.
func (s *store) reset(ctx context.Context, tag string, stock int64, dropLock bool, also ...func(redis.Pipeliner)) error {
	k := s.keys(tag)
	err := s.tx(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, k.initial(), stock, 0)
		p.Set(ctx, k.stock(), stock, 0)
		p.Set(ctx, k.sold(), 0, 0)
		p.Del(ctx, k.foreign(), k.fence()) // a lock server's tokens may start over
		if dropLock {
			p.Del(ctx, k.lock())
		}
		for _, queue := range also {
			queue(p)
		}
		return nil
	})
	if err != nil {
		return unavailable("reset", err)
	}
	return nil
}

// drop deletes every key of tag (a segment that a reset removed).
func (s *store) drop(ctx context.Context, p redis.Cmdable, tag string) {
	k := s.keys(tag)
	p.Del(ctx, k.initial(), k.stock(), k.sold(), k.foreign(), k.lock())
}

// countForeignUnlock records that a lock of tag was deleted while another
// owner held it.
func (s *store) countForeignUnlock(ctx context.Context, tag string) error {
	if err := s.rdb.Incr(ctx, s.keys(tag).foreign()).Err(); err != nil {
		return unavailable("count foreign unlock", err)
	}
	return nil
}

// Counts is the accounting of one SKU or segment.
type Counts struct {
	Initial        int64 `json:"initial"`
	Stock          int64 `json:"stock"`
	Sold           int64 `json:"sold"`
	ForeignUnlocks int64 `json:"foreign_unlocks"`
}

func (c Counts) add(o Counts) Counts {
	return Counts{c.Initial + o.Initial, c.Stock + o.Stock, c.Sold + o.Sold, c.ForeignUnlocks + o.ForeignUnlocks}
}

// queueCounts reads tag's counts atomically (MGET: one slot), or queues the
// read when p is a pipeline.
func (s *store) queueCounts(ctx context.Context, p redis.Cmdable, tag string) *redis.SliceCmd {
	k := s.keys(tag)
	return p.MGet(ctx, k.initial(), k.stock(), k.sold(), k.foreign())
}

// parseCounts reads an MGET of queueCounts; ok is false when the tag was
// never initialised.
func parseCounts(cmd *redis.SliceCmd) (c Counts, ok bool, err error) {
	vals, err := cmd.Result()
	if err != nil {
		return Counts{}, false, unavailable("read counts", err)
	}
	if vals[0] == nil {
		return Counts{}, false, nil
	}
	fields := []*int64{&c.Initial, &c.Stock, &c.Sold, &c.ForeignUnlocks}
	for i, v := range vals {
		if v == nil {
			continue
		}
		str, _ := v.(string)
		n, err := strconv.ParseInt(str, 10, 64)
		if err != nil {
			return Counts{}, false, fmt.Errorf("inventory: counter %d holds %q: %w", i, str, err)
		}
		*fields[i] = n
	}
	return c, true, nil
}

// counts reads tag's counts; a never-initialised tag reads as its default.
func (s *store) counts(ctx context.Context, tag string, defaultStock int64) (Counts, error) {
	cmd := s.queueCounts(ctx, s.rdb, tag)
	c, ok, err := parseCounts(cmd)
	if err != nil || ok {
		return c, err
	}
	return Counts{Initial: defaultStock, Stock: defaultStock}, nil
}
