// Package redistrace records the Redis commands of one request, as the
// request sends them: a go-redis hook that writes down, for a context
// marked with Start, every command, its keys, arguments (a Lua script by
// its file name, never its body), reply and the round trip it took. It is
// how the workshop shows what each stage of the shop sends to Redis for
// one real sale, without MONITOR.
//
// A watchdog renews the lock of a sale from a goroutine of its own, with no
// trace in its context: a command of no traced request on a lock key a
// traced request acquired, while that request runs, is recorded as the
// trace's background call.
package redistrace

import (
	"context"
	"crypto/sha1" //nolint:gosec // what EVALSHA names a script by
	"encoding/hex"
	"fmt"
	"io/fs"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Call is one command a traced request sent.
type Call struct {
	// RoundTrip numbers the request's round trips from 1; the commands of
	// one pipeline or MULTI/EXEC share theirs. 0 for a background call.
	RoundTrip int    `json:"round_trip"`
	Command   string `json:"command"`
	// Script is the Lua script's file name, for EVALSHA and EVAL.
	Script string   `json:"script,omitempty"`
	Keys   []string `json:"keys,omitempty"`
	Args   []string `json:"args,omitempty"`
	Reply  string   `json:"reply"`
	// Background: sent by another goroutine of the process on a lock key
	// the request holds (the watchdog's renewal).
	Background bool    `json:"background,omitempty"`
	TookMS     float64 `json:"took_ms"`
}

// Recording is what a traced request sent.
type Recording struct {
	Calls      []Call `json:"calls"`
	RoundTrips int    `json:"round_trips"`
}

// maxArg bounds an argument or reply as recorded.
const maxArg = 80

// Tracer is the hook; install it on every client with Attach, before any
// hook that hands commands to another goroutine (automatic pipelining), so
// it sees the request's own context.
type Tracer struct {
	scripts map[string]string // SHA1 of the body → file name

	// inFlight counts the active traces: with none, an untraced command
	// costs one atomic load.
	inFlight atomic.Int32
	mu       sync.Mutex
	active   map[*Trace]struct{}
}

// New makes a tracer that names the scripts of the given embedded
// directories (each an fs.FS with *.lua files at its root or below).
func New(scriptDirs ...fs.FS) (*Tracer, error) {
	t := &Tracer{scripts: map[string]string{}, active: map[*Trace]struct{}{}}
	for _, dir := range scriptDirs {
		err := fs.WalkDir(dir, ".", func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".lua") {
				return err
			}
			body, err := fs.ReadFile(dir, path)
			if err != nil {
				return err
			}
			t.scripts[digest(string(body))] = path[strings.LastIndex(path, "/")+1:]
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("redistrace: script names: %w", err)
		}
	}
	return t, nil
}

func digest(body string) string {
	sum := sha1.Sum([]byte(body)) //nolint:gosec // Redis's own script digest
	return hex.EncodeToString(sum[:])
}

// Attach installs the tracer on a client.
func (t *Tracer) Attach(rdb redis.UniversalClient) { rdb.AddHook(hook{t}) }

// Trace is one traced request in flight.
type Trace struct {
	mu    sync.Mutex
	rec   Recording
	locks map[string]bool // lock keys it acquired, for background calls
}

type traceKey struct{}

// Start marks ctx: the commands sent with it (or a context made from it)
// are recorded until Finish.
func (t *Tracer) Start(ctx context.Context) (context.Context, *Trace) {
	tr := &Trace{locks: map[string]bool{}}
	t.mu.Lock()
	t.active[tr] = struct{}{}
	t.mu.Unlock()
	t.inFlight.Add(1)
	return context.WithValue(ctx, traceKey{}, tr), tr
}

// Finish stops recording and returns what was sent.
func (t *Tracer) Finish(tr *Trace) Recording {
	t.mu.Lock()
	if _, ok := t.active[tr]; ok {
		delete(t.active, tr)
		t.inFlight.Add(-1)
	}
	t.mu.Unlock()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.rec
}

// Record adds a call to a server other than Redis (the order stages' SQL)
// to the trace ctx carries, as a round trip of its own; without a trace it
// does nothing.
func Record(ctx context.Context, c Call, took time.Duration) {
	tr, ok := ctx.Value(traceKey{}).(*Trace)
	if !ok {
		return
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.rec.RoundTrips++
	c.RoundTrip, c.TookMS = tr.rec.RoundTrips, float64(took.Microseconds())/1000
	tr.rec.Calls = append(tr.rec.Calls, c)
}

// handshake are the commands go-redis sends to set up a new connection:
// not the request's, though a request that dials waits for them.
var handshake = map[string]bool{"hello": true, "client": true, "auth": true, "select": true, "readonly": true}

// record adds the commands of one round trip.
func (tr *Trace) record(cmds []redis.Cmder, took time.Duration, background bool, t *Tracer) {
	if handshake[strings.ToLower(cmds[0].Name())] {
		return
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	roundTrip := 0 // a background call cost the request no round trip
	if !background {
		tr.rec.RoundTrips++
		roundTrip = tr.rec.RoundTrips
	}
	for _, cmd := range cmds {
		c := t.describe(cmd)
		c.RoundTrip, c.Background, c.TookMS = roundTrip, background, float64(took.Microseconds())/1000
		tr.rec.Calls = append(tr.rec.Calls, c)
		for _, k := range c.Keys {
			if strings.HasSuffix(k, ":lock") {
				tr.locks[k] = true
			}
		}
	}
}

// holding returns the traces in flight that acquired one of keys.
func (t *Tracer) holding(keys []string) []*Trace {
	if len(keys) == 0 {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var found []*Trace
	for tr := range t.active {
		tr.mu.Lock()
		if slices.ContainsFunc(keys, func(k string) bool { return tr.locks[k] }) {
			found = append(found, tr)
		}
		tr.mu.Unlock()
	}
	return found
}

type hook struct{ t *Tracer }

func (h hook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (h hook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.t.inFlight.Load() == 0 { // nothing traced: the common case
			return next(ctx, cmd)
		}
		tr, traced := ctx.Value(traceKey{}).(*Trace)
		var background []*Trace
		if !traced {
			if background = h.t.holding(h.t.keysOf(cmd)); background == nil {
				return next(ctx, cmd)
			}
		}
		start := time.Now()
		err := next(ctx, cmd)
		took := time.Since(start)
		if traced {
			tr.record([]redis.Cmder{cmd}, took, false, h.t)
		}
		for _, b := range background {
			b.record([]redis.Cmder{cmd}, took, true, h.t)
		}
		return err
	}
}

// ProcessPipelineHook records a traced request's pipelines and
// transactions as one round trip each. Untraced ones are not looked at for
// background calls: automatic pipelining sends, in batches, commands
// ProcessHook has already seen.
func (h hook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.t.inFlight.Load() == 0 {
			return next(ctx, cmds)
		}
		tr, traced := ctx.Value(traceKey{}).(*Trace)
		if !traced {
			return next(ctx, cmds)
		}
		start := time.Now()
		err := next(ctx, cmds)
		tr.record(cmds, time.Since(start), false, h.t)
		return err
	}
}

// keyless are the commands whose first argument is no key.
var keyless = map[string]bool{
	"multi": true, "exec": true, "discard": true, "ping": true, "hello": true, "auth": true, "select": true,
	"client": true, "info": true, "wait": true, "script": true, "publish": true, "subscribe": true,
	"unsubscribe": true, "psubscribe": true, "punsubscribe": true, "command": true, "time": true,
}

// keysOf returns a command's keys: a script's declared keys, else the
// first argument (what most commands the shop sends take; their other
// arguments are shown as arguments).
func (t *Tracer) keysOf(cmd redis.Cmder) []string {
	keys, _, _ := t.split(cmd)
	return keys
}

// split returns a command's keys, its other arguments and its script's name.
func (t *Tracer) split(cmd redis.Cmder) (keys, args []string, script string) {
	all := cmd.Args()
	name := strings.ToLower(cmd.Name())
	str := func(v any) string { return clip(fmt.Sprint(v)) }
	switch {
	case (name == "evalsha" || name == "eval" || name == "evalsha_ro" || name == "eval_ro") && len(all) >= 3:
		body := fmt.Sprint(all[1])
		sha := body
		if strings.HasPrefix(name, "eval") && !strings.HasPrefix(name, "evalsha") {
			sha = digest(body)
		}
		script = t.scripts[sha]
		if script == "" {
			script = "script " + clip(sha[:min(len(sha), 12)])
		}
		n, _ := strconv.Atoi(fmt.Sprint(all[2]))
		for i, a := range all[3:] {
			if i < n {
				keys = append(keys, fmt.Sprint(a))
			} else {
				args = append(args, str(a))
			}
		}
	case len(all) > 1 && !keyless[name]:
		keys = []string{fmt.Sprint(all[1])}
		for _, a := range all[2:] {
			args = append(args, str(a))
		}
	default:
		for _, a := range all[1:] {
			args = append(args, str(a))
		}
	}
	return keys, args, script
}

func (t *Tracer) describe(cmd redis.Cmder) Call {
	keys, args, script := t.split(cmd)
	return Call{Command: strings.ToUpper(cmd.Name()), Script: script, Keys: keys, Args: args, Reply: reply(cmd)}
}

// reply renders a command's reply, or its error.
func reply(cmd redis.Cmder) string {
	if err := cmd.Err(); err != nil {
		if err == redis.Nil {
			return "(nil)"
		}
		return clip("(error) " + err.Error())
	}
	var v any
	switch c := cmd.(type) {
	case *redis.Cmd:
		v = c.Val()
	case *redis.StringCmd:
		v = c.Val()
	case *redis.IntCmd:
		v = c.Val()
	case *redis.BoolCmd:
		v = c.Val()
	case *redis.StatusCmd:
		v = c.Val()
	case *redis.SliceCmd:
		v = c.Val()
	case *redis.FloatCmd:
		v = c.Val()
	default:
		s := cmd.String()
		if i := strings.LastIndex(s, ": "); i >= 0 {
			s = s[i+2:]
		}
		return clip(s)
	}
	if v == nil {
		return "(nil)"
	}
	return clip(fmt.Sprint(v))
}

func clip(s string) string {
	if len(s) <= maxArg {
		return s
	}
	return s[:maxArg-1] + "…"
}
