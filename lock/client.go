package lock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockstep/lockstep/internal/slotretry"
)

const (
	defaultWatchdogTimeout = 30 * time.Second
	// defaultMaxLocalPasses: 64 carried 7–22 % more acquisitions than 16
	// with 2–8 contending processes, at a quarter of the Redis commands and
	// twice the p99 wait (BENCHMARKS.md, bench/peers -procs).
	defaultMaxLocalPasses = 64
	// defaultFairWaiterTimeout is Redisson's threadWaitTime.
	defaultFairWaiterTimeout = 5 * time.Second
	// renewRetry is the pause between renewals that failed on a Redis error.
	renewRetry = 100 * time.Millisecond
	// go-redis's defaults (v9.23, Options.init): 3 retries, 5 s read,
	// write and dial timeouts, 1 s at most between tries, 30 s for a
	// pooled connection without a read timeout, 5 dials 100 ms apart.
	defaultRedisRetries   = 3
	defaultRedisTimeout   = 5 * time.Second
	defaultRedisBackoff   = time.Second
	defaultRedisPoolWait  = 30 * time.Second
	defaultRedisDials     = 5
	defaultRedisDialPause = 100 * time.Millisecond
)

// Option configures a Client.
type Option func(*options)

type options struct {
	watchdogTimeout time.Duration
	maxLocalPasses  int
	waitReplicas    int
	waitTimeout     time.Duration
	fairWaiterTTL   time.Duration
	readersFirst    bool
	plainPubSub     bool
	onRenewal       func(name string, err error)
}

// WithWatchdogTimeout sets the lease the watchdog keeps a lock at (default
// 30s, as Redisson's lockWatchdogTimeout); it renews every d/3. A crashed
// holder's lock is free again at most d after its last renewal.
func WithWatchdogTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.watchdogTimeout = d
		}
	}
}

// WithMaxLocalPasses bounds how many times in a row a Mutex is passed between
// handles of one Client without releasing it in Redis (default 64). Zero turns
// cohorting off: every unlock releases the lock in Redis, as Redisson does.
func WithMaxLocalPasses(n int) Option {
	return func(o *options) {
		if n >= 0 {
			o.maxLocalPasses = n
		}
	}
}

// WithWaitReplicas makes every Mutex acquisition wait (Redis WAIT) until n
// replicas confirmed it, failing with ErrNotReplicated and releasing the lock
// otherwise: a failover then cannot promote a replica that never saw the lock
// (Redisson's synced-slaves check). WAIT runs in a pipeline with the
// acquisition, so timeout must stay below the Redis client's ReadTimeout.
func WithWaitReplicas(n int, timeout time.Duration) Option {
	return func(o *options) {
		o.waitReplicas, o.waitTimeout = n, timeout
	}
}

// WithFairWaiterTimeout sets how long a FairMutex waiter, or a waiting
// RWMutex writer, keeps its place without refreshing it (default 5s,
// Redisson's threadWaitTime): a live waiter refreshes it every third of
// that, and a dead one holds the others back by at most this long.
func WithFairWaiterTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.fairWaiterTTL = d
		}
	}
}

// WithReadersFirst makes RWMutex admit new readers while a writer waits, as
// Redisson's RReadWriteLock does: more read throughput, but overlapping
// readers can keep a writer waiting for ever. By default writers come first.
func WithReadersFirst() Option {
	return func(o *options) { o.readersFirst = true }
}

// WithPlainPubSub makes a Client on a Redis Cluster publish unlocks with
// PUBLISH and listen with SUBSCRIBE, as on one Redis. By default a Cluster
// Client uses sharded pub/sub (SPUBLISH, SSUBSCRIBE), which keeps a lock's
// messages in the shard of its slot instead of broadcasting them to every
// node; it needs Redis 7, and this option is for older clusters.
func WithPlainPubSub() Option {
	return func(o *options) { o.plainPubSub = true }
}

// WithRenewalObserver is called after every watchdog renewal with nil, with
// ErrLockLost when the lock was gone, or with the Redis error. It runs on the
// watchdog goroutine and must return quickly.
func WithRenewalObserver(f func(name string, err error)) Option {
	return func(o *options) { o.onRenewal = f }
}

// Client creates locks on one Redis deployment. It owns the pub/sub
// connections its waiters share (one on a single Redis, one per slot waited
// on in a Cluster) and the watchdogs of the locks it holds.
type Client struct {
	rdb  redis.UniversalClient
	id   string
	opts options

	// The Mutex scripts' owner and watchdog-lease arguments, and how long a
	// release latch lasts (replayWindow), boxed once: go-redis takes
	// arguments as any, and boxing a string allocates.
	idArg, watchdogTTLArg, latchTTLArg any
	// publishArg is the command the unlock scripts publish with: "publish",
	// or "spublish" where the subscriptions are sharded.
	publishArg any

	life       context.Context // cancelled with ErrClosed by Close
	closeLife  context.CancelCauseFunc
	goroutines sync.WaitGroup
	handles    atomic.Uint64
	holds      atomic.Uint64

	mu      sync.Mutex
	closed  bool
	cohorts map[string]*cohort
	subs    subscriptions
	waiters waitQueues

	// acks are the counters' attempts to drop, and quickReply the longest
	// a reply may take to be acknowledged (attemptacks.go).
	acks       attemptAcks
	quickReply time.Duration

	renewals renewalQueue
}

// New returns a Client on rdb. It starts nothing until a lock waits.
func New(rdb redis.UniversalClient, opts ...Option) *Client {
	o := options{
		watchdogTimeout: defaultWatchdogTimeout,
		maxLocalPasses:  defaultMaxLocalPasses,
		fairWaiterTTL:   defaultFairWaiterTimeout,
	}
	for _, opt := range opts {
		opt(&o)
	}
	life, closeLife := context.WithCancelCause(context.Background())
	c := &Client{
		rdb:       rdb,
		id:        randomID(),
		opts:      o,
		life:      life,
		closeLife: closeLife,
		cohorts:   make(map[string]*cohort),
	}
	c.idArg, c.watchdogTTLArg = c.id, ms(o.watchdogTimeout)
	c.latchTTLArg = ms(replayWindow(rdb))
	c.quickReply = quickReply(budgetOfClient(rdb))
	c.publishArg = "publish"
	if cluster, ok := rdb.(*redis.ClusterClient); ok && !o.plainPubSub {
		c.subs.sharded = cluster
		c.publishArg = "spublish"
	}
	c.subs.init(c)
	c.waiters.init(c)
	c.renewals.init(c)
	return c
}

// ID is the owner prefix this Client writes into the locks it holds.
func (c *Client) ID() string { return c.id }

// Close stops the watchdogs and the pub/sub connection and cancels every held
// context with ErrClosed. It does not unlock: the locks this Client holds
// expire after their lease, exactly as when a process crashes. It returns
// once its waiters have left the locks' queues, so a program may close its
// Redis client next: a place left queued would be granted the lock, which
// would then wait out a grant lease with nobody to take it; and an
// attempt that took a lock as the Client closed gives it back rather than
// leave it held for a lease by nobody. With Redis
// unreachable, that wait lasts until their requests fail (go-redis's
// timeouts), and a leave is given the watchdog timeout at most.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	c.closed = true
	c.mu.Unlock()
	c.closeLife(ErrClosed)
	c.renewals.stop()
	err := c.subs.close()
	c.goroutines.Wait()
	return err
}

// startTask registers a timer callback's work so that Close waits for it;
// false once the Client is closed.
func (c *Client) startTask() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.goroutines.Add(1)
	return true
}

// Mutex returns a handle on the reentrant lock called name. Each handle is one
// owner; handles are cheap, so take one per goroutine or per request.
func (c *Client) Mutex(name string) *Mutex {
	key, channel := lockKeys(name)
	return &Mutex{c: c, name: name, key: key, channel: channel}
}

// newOwner names a new owner of this Client: Redisson's client-id:thread-id.
func (c *Client) newOwner() string {
	return c.id + ":" + strconv.FormatUint(c.handles.Add(1), 10)
}

// newToken names a new hold of this Client (see doc.go, "Unknown
// outcomes"). It is never a number, so the read and write scripts, which
// count levels in numeric fields, never take it for one.
func (c *Client) newToken() string {
	return c.id + ":h" + strconv.FormatUint(c.holds.Add(1), 10)
}

// latchKey is the release latch of key's holds (see doc.go, "Unknown
// outcomes"): the tokens of its last releases, latchCap at most, kept for
// replayWindow after the last. One key per lock, not one per release, so
// its memory follows the locks in use, not the rate of releases. The
// scripts that write it declare it, so that while the lock's Cluster slot
// migrates Redis refuses them (TRYAGAIN) rather than let them create it on
// the importing master while the slot's master still has it, where
// MIGRATE without REPLACE would fail with BUSYKEY and stop the reshard;
// they then run with the lock's key alone, and write no latch.
func latchKey(key string) string { return ownKey("released", key) }

// latchCap is how many release tokens a latch keeps (the scripts' LTRIM).
const latchCap = 8

// ownKey names a key the library keeps beside the lock key key: its
// waiter queue, a read level's timeout, the release latch. It begins with
// '~' and the kind, and a lock's key never begins so (lockKeys), so no
// lock's name can reach one of them (Mutex("{order-7}:queue") is a lock of
// its own, not the queue of "{order-7}"); it keeps key's hash tag.
func ownKey(kind, key string) string { return "~" + kind + ":" + key }

// replayWindow is how long after a request was first written the Redis
// client may still write it again, by go-redis v9's retry loops
// (redis.go, processWithRetry and _process; osscluster.go,
// ClusterClient.process). A release latch lasts that long. A client that
// tries once (a *redis.Client with MaxRetries: -1) never sends a request
// again: 0, and the scripts write no latch.
func replayWindow(rdb redis.UniversalClient) time.Duration {
	return budgetOfClient(rdb).window()
}

// budgetOfClient is the re-send budget of rdb's requests.
func budgetOfClient(rdb redis.UniversalClient) resendBudget {
	switch r := rdb.(type) {
	case *redis.Client:
		return budgetOf(r.Options(), 1)
	case *redis.ClusterClient:
		// A Cluster client tries again on another node up to MaxRedirects
		// times, each node's client with its own retries.
		o := r.Options()
		return budgetOf(clusterNodeOptions(o), o.MaxRedirects+1)
	}
	return budgetOf(initOptions(&redis.Options{}), 1) // go-redis's defaults
}

// unboundedIO stands for a read or a write with no timeout: go-redis
// waits for it until the connection fails, which the TCP keep-alive of its
// default dialer detects after 30 s idle and 3 probes 5 s apart
// (options.go, defaultKeepAliveConfig). A dialer of the program's may take
// longer: a re-send after that answers as if its latch had expired.
const unboundedIO = 45 * time.Second

// resendBudget bounds one request's tries in go-redis.
type resendBudget struct {
	tries       int
	read, write time.Duration // a try's socket timeouts
	// What a re-send may wait for before it is written: the backoff
	// (MaxRetryBackoff), a connection from the pool (PoolTimeout) or a
	// new one (DialerRetries dials of DialTimeout, DialerRetryTimeout
	// apart, then the handshake: a write and a read).
	backoff, pool, dial time.Duration
}

// budgetOf reads the budget of a client built with o, as go-redis's
// Options.init left them, which sends a request up to calls times, each
// with the client's retries.
func budgetOf(o *redis.Options, calls int) resendBudget {
	io := func(d time.Duration) time.Duration {
		if d <= 0 {
			return unboundedIO
		}
		return d
	}
	read, write := io(o.ReadTimeout), io(o.WriteTimeout)
	dials := max(o.DialerRetries, 1)
	return resendBudget{
		tries:   calls * (max(o.MaxRetries, 0) + 1),
		read:    read,
		write:   write,
		backoff: max(o.MaxRetryBackoff, 0),
		pool:    max(o.PoolTimeout, 0),
		dial:    time.Duration(dials)*io(o.DialTimeout) + time.Duration(dials-1)*max(o.DialerRetryTimeout, 0) + write + read,
	}
}

// window is from the first write of a request to the last: the first try
// waits for its write and its reply, every further one for what comes
// before its write, then its write, and all but the last for a reply.
func (b resendBudget) window() time.Duration {
	if b.tries <= 1 {
		return 0
	}
	again := time.Duration(b.tries - 1)
	return b.write + b.read + again*(b.backoff+b.pool+b.dial+b.write) + (again-1)*b.read
}

// clusterNodeOptions are the options of a Cluster client's node clients:
// a ClusterOptions' own are copied to them (ClusterOptions.clientOptions)
// and initialised again, so a ReadTimeout of -1, which ClusterOptions.init
// turns into 0, becomes 5 s.
func clusterNodeOptions(o *redis.ClusterOptions) *redis.Options {
	return initOptions(&redis.Options{
		MaxRetries: o.MaxRetries, MaxRetryBackoff: o.MaxRetryBackoff,
		ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout, PoolTimeout: o.PoolTimeout,
		DialTimeout: o.DialTimeout, DialerRetries: o.DialerRetries, DialerRetryTimeout: o.DialerRetryTimeout,
	})
}

// initOptions applies go-redis's Options.init to the fields budgetOf reads,
// for options no client initialised; a timeout it leaves at 0 is none.
func initOptions(n *redis.Options) *redis.Options {
	switch n.ReadTimeout {
	case -2, -1:
		n.ReadTimeout = 0
	case 0:
		n.ReadTimeout = defaultRedisTimeout
	}
	switch n.WriteTimeout {
	case -2, -1:
		n.WriteTimeout = 0
	case 0:
		n.WriteTimeout = n.ReadTimeout
	}
	if n.PoolTimeout == 0 {
		n.PoolTimeout = defaultRedisPoolWait
		if n.ReadTimeout > 0 {
			n.PoolTimeout = n.ReadTimeout + time.Second
		}
	}
	switch n.MaxRetries {
	case -1:
		n.MaxRetries = 0
	case 0:
		n.MaxRetries = defaultRedisRetries
	}
	switch n.MaxRetryBackoff {
	case -1:
		n.MaxRetryBackoff = 0
	case 0:
		n.MaxRetryBackoff = defaultRedisBackoff
	}
	if n.DialTimeout == 0 {
		n.DialTimeout = defaultRedisTimeout
	}
	if n.DialerRetries <= 0 {
		n.DialerRetries = defaultRedisDials
	}
	if n.DialerRetryTimeout == 0 {
		n.DialerRetryTimeout = defaultRedisDialPause
	}
	return n
}

// cohort returns the cohort of m's key, pinned until unpin. When there is
// none, m's last cohort is reused if it has one: it was unpinned and dropped
// by then, so nobody else uses it.
func (c *Client) cohort(m *Mutex) (*cohort, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	co := c.cohorts[m.key]
	if co == nil {
		if co = m.lastCohort; co != nil {
			co.reset()
		} else {
			co = newCohort(c, m.key, m.channel)
		}
		c.cohorts[m.key] = co
	}
	co.pins++
	m.lastCohort = co
	return co, nil
}

func (c *Client) unpin(co *cohort) {
	c.mu.Lock()
	defer c.mu.Unlock()
	co.pins--
	if co.pins == 0 {
		delete(c.cohorts, co.key)
		c.subs.unsubscribeLocked(co.channel, co.waker.listener)
	}
}

func (c *Client) renewalObserved(name string, err error) {
	if c.opts.onRenewal != nil {
		c.opts.onRenewal(name, err)
	}
}

// attempt runs one acquisition script. It reports acquired, or the lock's
// remaining TTL (negative when it has none). With WithWaitReplicas an
// acquisition the replicas did not confirm reports acquired with an error
// wrapping ErrNotReplicated: the caller must release it.
func (c *Client) attempt(ctx context.Context, script *redis.Script, keys []string, args ...any) (acquired bool, ttl time.Duration, err error) {
	res, err := c.runAcquire(ctx, script, keys, args)
	if errors.Is(err, ErrNotReplicated) {
		return true, 0, err // held: the caller releases it
	}
	if err != nil {
		return false, 0, err
	}
	switch res := res.(type) {
	case string:
		if res == acquiredOK {
			return true, 0, nil
		}
	case int64:
		return false, time.Duration(res) * time.Millisecond, nil
	}
	return false, 0, fmt.Errorf("unexpected reply %v", res)
}

// runAcquire runs an acquisition script, followed by WAIT when
// WithWaitReplicas is set.
func (c *Client) runAcquire(ctx context.Context, script *redis.Script, keys []string, args []any) (any, error) {
	if c.opts.waitReplicas > 0 {
		res, err := c.attemptReplicated(ctx, script, keys, args)
		return res, atDeadline(ctx, err)
	}
	res, err := c.eval(ctx, script, keys, args...).Result()
	return res, atDeadline(ctx, err)
}

// atDeadline reports a socket timeout at ctx's deadline as the deadline
// (context.DeadlineExceeded, wrapping the timeout): a go-redis client with
// ContextTimeoutEnabled puts ctx's deadline on its socket, which can fail
// a moment before ctx's own timer fires, and a waiter whose wait ran out
// must say so whichever came first.
func atDeadline(ctx context.Context, err error) error {
	var timeout net.Error
	deadline, ok := ctx.Deadline()
	if !ok || !errors.As(err, &timeout) || !timeout.Timeout() || time.Now().Before(deadline) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%w: %w", context.DeadlineExceeded, err)
}

// eval runs script (EVALSHA, EVAL when Redis lacks it), again while a
// Redis Cluster refuses it because the lock's slot is moving
// (internal/slotretry), until ctx is done. A lock's scripts declare only
// real keys (channels and key prefixes go in ARGV), so they meet TRYAGAIN
// only while MIGRATE moves the lock's own keys, not for as long as its slot
// migrates (Redisson #612).
func (c *Client) eval(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	return slotretry.Do(ctx, func() *redis.Cmd {
		cmd := script.Run(ctx, c.rdb, keys, args...)
		if len(keys) > 1 && runsAlone(script) && redis.HasErrorPrefix(cmd.Err(), "TRYAGAIN") {
			cmd = script.Run(ctx, c.rdb, keys[:1], args...)
		}
		return cmd
	})
}

// runsAlone reports whether script also runs with its first key alone, the
// lock's hash. The lock scripts declare the lock and its waiter queue (a
// FairMutex also its waiters' deadlines, a write lock the waiting writers,
// a FencedMutex its fencing counter) and the lock's release latch, the
// release scripts the lock and its latch; a Cluster refuses them with TRYAGAIN
// while their slot migrates and one of them is on neither master (a free
// lock, an empty queue) or they are on different ones — until the whole
// slot moved, indefinitely if a reshard stopped half-way (issue 24). One
// key is never refused so: the master that has it runs the script, and the
// importing master one that neither has (ASK). Without its queue a lock is
// taken and given up as Redisson's is: a Mutex's with an unlock message to
// every waiter (lock.lua, release.lua), a FairMutex's out of turn, its
// waiters woken by their timers and a queued place left to lapse
// (fair_lock.lua, fair_leave.lua), a write lock's with no
// place kept for a waiting writer (write_lock.lua), so readers do not wait
// behind one (read_lock.lua); a FencedMutex's only
// where its counter is (fenced_lock.lua, ErrCounterMoving); and a release
// goes without the lock's latch (a re-sent one may then answer ErrNotHeld).
func runsAlone(script *redis.Script) bool {
	switch script {
	case lockScript, releaseScript, unlockScript, fairLockScript, fairUnlockScript, fairLeaveScript, writeLockScript, readLockScript,
		fencedLockScript, readUnlockScript, writeUnlockScript:
		return true
	}
	return false
}

// acquiredOK is the reply of the reentrant locks' acquisition scripts when
// they acquired (Redisson's nil reply costs go-redis an error path).
const acquiredOK = "OK"

// acquiredReply tells an acquisition script's "acquired" answer: acquiredOK
// for the reentrant locks, a {token} array for the fenced one.
func acquiredReply(res any, err error) bool {
	if err != nil {
		return false
	}
	switch res := res.(type) {
	case string:
		return res == acquiredOK
	case []any:
		return true
	}
	return false
}

// attemptReplicated runs the script and WAIT on one connection (WAIT counts
// the writes of its own connection), so an acquisition is reported only once
// enough replicas have it. An unconfirmed acquisition is still held in Redis:
// the error wraps ErrNotReplicated and the caller must release it.
func (c *Client) attemptReplicated(ctx context.Context, script *redis.Script, keys []string, args []any) (any, error) {
	for loaded := false; ; loaded = true {
		var (
			wait     *redis.Cmd
			rdb      redis.Cmdable
			attempts int
		)
		run := slotretry.Do(ctx, func() *redis.Cmd {
			// The key's master again on each attempt: a MOVED says the
			// slot map changed (a failover, a reshard).
			var err error
			if rdb, err = c.masterOf(ctx, keys[0], attempts > 0); err != nil {
				cmd := redis.NewCmd(ctx)
				cmd.SetErr(err)
				return cmd
			}
			attempts++
			pipe := rdb.Pipeline()
			run := pipe.EvalSha(ctx, script.Hash(), keys, args...)
			wait = pipe.Do(ctx, "wait", c.opts.waitReplicas, c.opts.waitTimeout.Milliseconds())
			_, _ = pipe.Exec(ctx)
			return run
		})
		res, err := run.Result()
		switch {
		case redis.HasErrorPrefix(err, "NOSCRIPT") && !loaded:
			if err := script.Load(ctx, rdb).Err(); err != nil {
				return nil, err
			}
			continue
		case !acquiredReply(res, err):
			return res, err // not acquired, or failed
		case wait.Err() != nil:
			return nil, fmt.Errorf("%w: WAIT: %v", ErrNotReplicated, wait.Err())
		}
		if acked, _ := wait.Int64(); acked < int64(c.opts.waitReplicas) {
			return nil, fmt.Errorf("%w: %d of %d replicas", ErrNotReplicated, acked, c.opts.waitReplicas)
		}
		return res, err
	}
}

// masterOf is where WAIT must follow a write of key, on the same
// connection: on a Cluster the master of key's slot (a pipeline would send
// the keyless WAIT anywhere), after a reload of the slot map when asked,
// else the Client's Redis.
func (c *Client) masterOf(ctx context.Context, key string, reload bool) (redis.Cmdable, error) {
	cluster, ok := c.rdb.(*redis.ClusterClient)
	if !ok {
		return c.rdb, nil
	}
	if reload {
		cluster.ReloadState(ctx)
	}
	master, err := cluster.MasterForKey(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("master of its slot: %w", err)
	}
	return master, nil
}

// lockKeys derives the Redis key and the unlock channel of a lock. They share
// a hash tag: the one in name if it has one, else name itself. A key that
// would begin with '~', which begins the library's own keys (ownKey), is
// given another: "~x{t}" is kept as "~~x{t}", which no own key is.
func lockKeys(name string) (key, channel string) {
	key = name
	if !hasHashTag(name) {
		key = "{" + name + "}"
	}
	if strings.HasPrefix(key, "~") {
		key = "~" + key
	}
	return key, key + ":channel"
}

// hasHashTag applies Redis Cluster's rule: the first '{' followed by a '}'
// with at least one byte between them.
func hasHashTag(s string) bool {
	open := strings.IndexByte(s, '{')
	if open < 0 {
		return false
	}
	end := strings.IndexByte(s[open+1:], '}')
	return end > 0
}

func randomID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
}

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// ttlArg is ms(d) as a script argument.
func (c *Client) ttlArg(d time.Duration) any {
	if d == c.opts.watchdogTimeout {
		return c.watchdogTTLArg
	}
	return ms(d)
}

// cleanupGrace is how long a cleanup may run once its caller's context
// has ended: long enough to be sent and answered once.
const cleanupGrace = 500 * time.Millisecond

// cleanupContext bounds what must still be sent to Redis after ctx ended —
// a release that undoes an acquisition its caller will not use, a waiter's
// leave — by the caller's deadline (cleanupGrace past it, if it has passed
// or ctx was cancelled), and never by more than the watchdog timeout, after
// which such a lock has expired anyway. While a lock's slot migrates, Redis
// may refuse such a call (TRYAGAIN) for as long as the migration lasts; the
// caller does not wait for that (a TryLock with a 1 s context returned
// after 31 s, issue 24): a queue place it could not leave lapses on its
// own, and a lost attempt's hold with its lease.
func (c *Client) cleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	bound := c.opts.watchdogTimeout
	if deadline, ok := ctx.Deadline(); ok {
		bound = min(bound, max(time.Until(deadline), cleanupGrace))
	} else if ctx.Err() != nil {
		bound = min(bound, cleanupGrace)
	}
	return context.WithTimeout(context.WithoutCancel(ctx), bound)
}

// replyLost reports whether err leaves it unknown whether a command ran: it
// is neither Redis's reply (a refusal such as MOVED or TRYAGAIN included)
// nor a failure before anything was sent (no pooled connection, a closed
// client, a refused dial). It is the go-redis part of the project's
// internal/outcome table, which this public package does not import; a
// test holds the two to the same cases (replylost_test.go).
func replyLost(err error) bool {
	var replied redis.Error
	var dial *net.OpError
	switch {
	case err == nil, errors.Is(err, redis.Nil), errors.As(err, &replied),
		errors.Is(err, ErrNotReplicated), errors.Is(err, ErrClosed),
		errors.Is(err, redis.ErrPoolTimeout), errors.Is(err, redis.ErrClosed),
		errors.As(err, &dial) && dial.Op == "dial", errors.Is(err, syscall.ECONNREFUSED):
		return false
	}
	return true
}

// expiredOnArrival is the error of an acquisition whose reply came after
// the lease it was sent with ran out: Redis may already have let it go.
func expiredOnArrival(sent time.Time, ttl time.Duration) error {
	if time.Since(sent) < ttl {
		return nil
	}
	return fmt.Errorf("%w: its lease ran out before the reply came", ErrLockLost)
}
