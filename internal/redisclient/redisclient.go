// Package redisclient builds every go-redis client of the project — the
// shops', the workshop's, the load generator's, the benchmarks' and the
// tests' — from one set of options, so that one rule holds everywhere:
// go-redis never sends a command again once it may have run.
//
// A command sent whose reply is lost (a read timeout, a dropped
// connection, a master stalled past the timeout that runs it when it
// continues) may have run; sending it again can run it twice, and most of
// what the project sends is not safe to run twice (a sale's script, an
// INCRBY, a reentrant lock's HINCRBY). So:
//   - MaxRetries is -1 on every client, single, Sentinel-managed or per
//     node of a cluster: go-redis retries nothing on its own. The pool
//     still replaces connections a Redis restart closed before handing
//     them out, and a caller that knows a command is safe to repeat (or
//     that Redis refused it) retries it itself (internal/slotretry).
//   - A cluster client keeps go-redis's MaxRedirects (3): it must follow
//     MOVED and ASK, and retries TRYAGAIN, CLUSTERDOWN, LOADING and READONLY,
//     which Redis answers without running anything. But within the same
//     redirects go-redis also resends a command after an I/O error or a
//     timeout (ClusterClient.process: the same node first, then another,
//     and a pipeline's failed commands), which no option turns off: a hook
//     on every node (sendOnce) refuses those resends with ErrMayHaveRun.
//     A transaction (MULTI/EXEC) go-redis already never resends once its
//     EXEC may have reached Redis.
//
// The outcome of a command that failed with ErrMayHaveRun, a timeout or a
// lost connection is unknown: the caller must say so (the shop answers 503
// may_have_sold) rather than assume either way. Which errors those are is
// internal/outcome's table, the one rule of the project.
package redisclient

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockstep/lockstep/internal/outcome"
)

// Settings are what differs between the project's clients; everything else
// is set here, the same for all.
type Settings struct {
	Password string
	DB       int
	// Timeout bounds each dial, read, write and wait for a pooled
	// connection; 0 keeps go-redis's defaults (5 s to dial, 3 s to read and
	// write).
	Timeout  time.Duration
	PoolSize int // 0: go-redis's default (10 per CPU)
	// Dialer, optional, opens the connections (a benchmark counting them).
	Dialer func(ctx context.Context, network, addr string) (net.Conn, error)
}

// clusterRedirects is how many MOVED, ASK or refusals (TRYAGAIN,
// CLUSTERDOWN...) a cluster client follows for one command: go-redis's
// default, spelled out because the retry rule depends on it.
const clusterRedirects = 3

// clusterSlotsReload is how often a cluster client re-reads the slot map
// on its own: after a master dies, go-redis keeps routing to it until the
// map is reloaded (60 s by default, go-redis #3979).
const clusterSlotsReload = time.Second

// universal is every client's options; Options, FailoverOptions and
// ClusterOptions take their part of it.
func universal(s Settings, addrs []string) *redis.UniversalOptions {
	return &redis.UniversalOptions{
		Addrs:                 addrs,
		Password:              s.Password,
		DB:                    s.DB,
		Dialer:                s.Dialer,
		DialTimeout:           s.Timeout,
		ReadTimeout:           s.Timeout,
		WriteTimeout:          s.Timeout,
		PoolTimeout:           s.Timeout,
		ContextTimeoutEnabled: true,
		PoolSize:              s.PoolSize,
		// See the package comment: nothing is sent twice.
		MaxRetries:   -1,
		MaxRedirects: clusterRedirects,
		// Two dial attempts, not go-redis's five with 100ms pauses, so a
		// refused dial answers at once and a hung one within the timeout.
		// A dial that failed sent nothing: repeating it is safe.
		DialerRetries:      2,
		DialerRetryTimeout: 20 * time.Millisecond,
	}
}

// Options are the options of a client of the one server at addr.
func Options(s Settings, addr string) *redis.Options {
	return universal(s, []string{addr}).Simple()
}

// FailoverOptions are the options of a client of the master that the
// Sentinels at sentinels name master.
func FailoverOptions(s Settings, master string, sentinels []string) *redis.FailoverOptions {
	o := universal(s, sentinels)
	o.MasterName = master
	return o.Failover()
}

// ClusterOptions are the options of a Redis Cluster client seeded with
// addrs; every node's client refuses to resend a command that may have run.
func ClusterOptions(s Settings, addrs []string) *redis.ClusterOptions {
	o := universal(s, addrs).Cluster()
	o.ClusterStateReloadInterval = clusterSlotsReload
	o.NewClient = func(opt *redis.Options) *redis.Client {
		node := redis.NewClient(opt)
		node.AddHook(sendOnce{})
		return node
	}
	return o
}

// New is a client of the one server at addr.
func New(s Settings, addr string) *redis.Client { return redis.NewClient(Options(s, addr)) }

// NewFailover is a client of the master the Sentinels name, followed across
// failovers.
func NewFailover(s Settings, master string, sentinels []string) *redis.Client {
	return redis.NewFailoverClient(FailoverOptions(s, master, sentinels))
}

// NewCluster is a Redis Cluster client seeded with addrs.
func NewCluster(s Settings, addrs []string) *redis.ClusterClient {
	return redis.NewClusterClient(ClusterOptions(s, addrs))
}

// ErrMayHaveRun: a cluster client was about to send a command again after
// an attempt whose reply was lost; the command may have run, so it was not.
var ErrMayHaveRun = errors.New("redis: the command may have run (its reply was lost): not sent again")

// sendOnce is the hook on each node client of a cluster client, which sees
// every attempt go-redis makes on that node. A command carries the error
// of its previous attempt until the next one ends; an attempt whose
// command carries an error after which it may have run is refused.
type sendOnce struct{}

func (sendOnce) DialHook(next redis.DialHook) redis.DialHook { return next }

func (sendOnce) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if err := cmd.Err(); mayHaveRun(err) {
			return notSentAgain(err)
		}
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook refuses a whole pipeline (a node's share of one, a
// transaction, or a command sent after ASKING) when one of its commands may
// have run: every command in it then reports ErrMayHaveRun, as none of them
// may be taken for refused. After a pipeline that may have run, every
// command in it is marked so: go-redis puts a failed read's error only on
// the commands that carry none, and a command sent after ASKING still
// carries the ASK of its previous attempt — it would look refused, and be
// resent (a sale counted twice while its slot moved, issue 24).
func (sendOnce) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if err := cmd.Err(); mayHaveRun(err) {
				refused := notSentAgain(err)
				for _, c := range cmds {
					c.SetErr(refused)
				}
				return refused
			}
		}
		err := next(ctx, cmds)
		if mayHaveRun(err) {
			for _, cmd := range cmds {
				if e := cmd.Err(); e != nil && !mayHaveRun(e) {
					cmd.SetErr(err)
				}
			}
		}
		return err
	}
}

// mayHaveRun reports whether a command that failed with err may have run
// (internal/outcome): not when Redis answered (a refusal such as MOVED,
// ASK or TRYAGAIN ran nothing; any other answer ended the command), nor
// when no connection was had to send it on.
func mayHaveRun(err error) bool { return outcome.Of(err) == outcome.MayHaveRun }

// notSentAgain is ErrMayHaveRun with the lost reply's error. It wraps only
// ErrMayHaveRun: go-redis would resend on a wrapped EOF or timeout.
func notSentAgain(err error) error {
	if errors.Is(err, ErrMayHaveRun) {
		return err
	}
	return fmt.Errorf("%w; the attempt failed with: %v", ErrMayHaveRun, err)
}
