// Package redisbatch is automatic pipelining for go-redis: single commands
// that goroutines issue at the same time on one client are written to Redis
// as one pipeline, so a busy shop pays one write and one read system call
// (on its side and on Redis's) per batch instead of per command. Under light
// load a batch is one command and nothing waits for company: a batch is
// whatever queued up while the previous one was on the wire.
//
// One batch is on the wire at a time. More senders would only cut the same
// commands into smaller batches, each costing the system calls and wake-ups
// of a round trip on both sides: with 64 concurrent HTTP clients on the
// shop's atomic stage, four senders sent batches of ~3 commands and Redis
// spent 4.0-4.4 µs of CPU per sale; one, with the yield in send, sends
// ~16 and Redis spends 2.7-3.0 µs (BENCHMARKS.md, shop section).
//
// Each command still gets its own reply and error. Pipelines and
// transactions (MULTI/EXEC) pass through untouched, and so do blocking
// commands, which would hold up the batch behind them, and commands tied to
// their connection's state.
package redisbatch

import (
	"context"
	"errors"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

const (
	// maxBatch bounds one pipeline.
	maxBatch = 256
	// yieldBelow is the queue length under which the sender lets the
	// goroutines ready to run go first before it takes the batch.
	yieldBelow = 8
)

// Batcher is a go-redis hook; install it with Attach.
type Batcher struct {
	rdb   redis.UniversalClient
	queue chan *call
	stop  chan struct{}
	done  sync.WaitGroup

	// mu orders Close after every enqueue in progress: the sender runs
	// until closed is set, so an enqueued command is always sent.
	mu     sync.RWMutex
	closed bool

	// calls are reused: every command needs one, for as long as it waits.
	calls sync.Pool
}

type call struct {
	cmd redis.Cmder
	// sent gets one value once cmd has its reply or error.
	sent chan struct{}
}

// Attach installs automatic pipelining on rdb. Close stops it; close it
// before the client.
func Attach(rdb redis.UniversalClient) *Batcher {
	b := &Batcher{rdb: rdb, queue: make(chan *call, maxBatch), stop: make(chan struct{})}
	b.calls.New = func() any { return &call{sent: make(chan struct{}, 1)} }
	b.done.Go(b.send)
	rdb.AddHook(b)
	return b
}

// Close stops the sender once the queued commands are sent; commands
// issued afterwards go to Redis one by one.
func (b *Batcher) Close() {
	b.mu.Lock()
	already := b.closed
	b.closed = true
	b.mu.Unlock()
	if !already {
		close(b.stop)
	}
	b.done.Wait()
}

// DialHook implements redis.Hook.
func (b *Batcher) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return next(ctx, network, addr)
	}
}

// ProcessPipelineHook implements redis.Hook: pipelines, including the
// batches themselves, go straight through.
func (b *Batcher) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// ProcessHook implements redis.Hook: queue the command for the next batch
// and wait for its reply. The wait does not end with ctx: the command may
// already be on the wire and its reply will be written into it, so the
// caller must not read it before; the batch's own timeouts bound the wait.
func (b *Batcher) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if ctx.Value(flushing{}) != nil || unbatchable(cmd.Name()) {
			return next(ctx, cmd)
		}
		b.mu.RLock()
		if b.closed {
			b.mu.RUnlock()
			return next(ctx, cmd)
		}
		c := b.calls.Get().(*call)
		c.cmd = cmd
		b.queue <- c
		b.mu.RUnlock()
		<-c.sent
		c.cmd = nil
		b.calls.Put(c)
		return cmd.Err()
	}
}

// send writes batches until Close, then drains what is left.
func (b *Batcher) send() {
	batch := make([]*call, 0, maxBatch)
	for {
		var first *call
		select {
		case first = <-b.queue:
		case <-b.stop:
			for {
				select {
				case c := <-b.queue:
					b.flush(append(batch[:0], c))
				default:
					return
				}
			}
		}
		batch = append(batch[:0], first)
		// A short queue gets one chance to grow: the goroutines ready to
		// run, often handlers about to issue their command, run first and
		// join this batch rather than the next. On a busy shop that makes
		// batches of ~16 commands instead of ~10, and every batch saved is
		// a round trip's system calls and wake-ups on both sides. An idle
		// shop has nothing ready to run, and the yield returns at once.
		if len(b.queue) < yieldBelow {
			runtime.Gosched()
		}
	fill:
		for len(batch) < maxBatch {
			select {
			case c := <-b.queue:
				batch = append(batch, c)
			default:
				break fill
			}
		}
		b.flush(batch)
	}
}

// flushing marks the context of a batch, so that what go-redis sends on
// its own while sending one (HELLO on a new connection) is not queued
// behind it.
type flushing struct{}

// flush sends one batch; the client's read and write timeouts bound it.
func (b *Batcher) flush(batch []*call) {
	ctx := context.WithValue(context.Background(), flushing{}, true)
	_, err := b.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, c := range batch {
			_ = p.Process(ctx, c.cmd)
		}
		return nil
	})
	// A batch that went out leaves each command its own reply or error, and
	// err is one of theirs. One that never went out, because the new
	// connection's set-up failed with a Redis error (a wrong password:
	// WRONGPASS), leaves the commands untouched, as if they had succeeded
	// with empty replies: give them err.
	if err != nil && !slices.ContainsFunc(batch, func(c *call) bool { return errors.Is(c.cmd.Err(), err) }) {
		for _, c := range batch {
			c.cmd.SetErr(err)
		}
	}
	for _, c := range batch {
		c.sent <- struct{}{}
	}
}

// unbatchable reports commands that must run where they were issued:
// those that may block on the server, and those that set up or depend on
// the state of their connection (a pub/sub or a dedicated Conn).
func unbatchable(name string) bool {
	switch strings.ToLower(name) {
	case "blpop", "brpop", "brpoplpush", "blmove", "blmpop", "bzpopmin", "bzpopmax", "bzmpop",
		"xread", "xreadgroup", "wait", "waitaof", "subscribe", "psubscribe", "ssubscribe",
		"unsubscribe", "punsubscribe", "sunsubscribe", "monitor",
		"hello", "auth", "select", "client", "readonly", "readwrite", "reset", "quit",
		"multi", "exec", "discard", "watch", "unwatch":
		return true
	}
	return false
}
