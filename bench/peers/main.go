// Command peers measures lockstep's Mutex side by side with the Go Redis
// locks people use (redsync, bsm/redislock, rueidislock), one after another
// on one redis-server it starts for itself: acquisitions/s, acquire-wait
// quantiles and Redis commands per acquisition for goroutines contending for
// one key, and uncontended Lock+Unlock latency against two bare EVALSHA round
// trips. It lives in its own module so the lock library does not depend on
// its peers. See README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"
)

type config struct {
	duration    time.Duration
	warmup      time.Duration
	uncontended time.Duration
	goroutines  int
	rounds      int
	selected    string
	jsonPath    string
	redisBin    string
	redisCPUs   string
	lease       time.Duration
	fastBackoff time.Duration
	procs       string // multi-process shapes; empty: one process
}

func main() {
	if spec, ok := os.LookupEnv(childEnv); ok {
		// One contending process of a multi-process run (see multiproc.go).
		if err := runChild(context.Background(), spec, os.Stdin, os.Stdout); err != nil {
			slog.Error("peers child", "err", err)
			os.Exit(1)
		}
		return
	}
	if err := run(); err != nil {
		slog.Error("peers", "err", err)
		os.Exit(1)
	}
}

func run() error {
	var cfg config
	fs := flag.NewFlagSet("peers", flag.ExitOnError)
	fs.DurationVar(&cfg.duration, "duration", 5*time.Second, "contended run per contender")
	fs.DurationVar(&cfg.warmup, "warmup", 300*time.Millisecond, "unrecorded contended run before each contender's measured one")
	fs.DurationVar(&cfg.uncontended, "uncontended", 2*time.Second, "uncontended run per contender, shared in alternating blocks with its EVALSHA baseline")
	fs.IntVar(&cfg.goroutines, "goroutines", 64, "contending goroutines (per process with -procs N), one key")
	fs.StringVar(&cfg.procs, "procs", "", "multi-process runs instead of the one-process ones: comma-separated N (processes of -goroutines each) or NxG (N processes of G goroutines), e.g. 2x32,3x21,4x16,8x8")
	fs.IntVar(&cfg.rounds, "rounds", 1, "passes over the contenders, each starting one later; several give median ratios")
	fs.StringVar(&cfg.selected, "contenders", "all", "comma-separated contenders to run (a library's name without a configuration, such as redislock, runs all of its configurations), or all: "+strings.Join(names(allContenders(0)), ","))
	fs.StringVar(&cfg.jsonPath, "json", "", "also write the figures to this file as JSON")
	fs.StringVar(&cfg.redisBin, "redis-server", "redis-server", "redis-server binary")
	fs.StringVar(&cfg.redisCPUs, "redis-cpus", "", "pin redis-server to these CPUs (taskset -c list); pin the bench itself with taskset when starting it")
	fs.DurationVar(&cfg.lease, "lease", 10*time.Second, "lease for peers that need one (long enough never to expire during a run)")
	fs.DurationVar(&cfg.fastBackoff, "redislock-fast-backoff", time.Millisecond, "retry interval of redislock-fast")
	_ = fs.Parse(os.Args[1:])
	if err := envFallback(fs, "PEERS_"); err != nil {
		return err
	}
	selected, err := selectContenders(allContenders(cfg.fastBackoff), cfg.selected)
	if err != nil {
		return err
	}
	if cfg.rounds < 1 || cfg.goroutines < 1 {
		return fmt.Errorf("-rounds and -goroutines must be at least 1")
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := measureAll(ctx, cfg, selected)
	if err != nil {
		return err
	}
	rep.Command = strings.Join(os.Args, " ")
	if rep.Shapes != nil {
		rep.printShapes(os.Stdout)
	} else {
		rep.print(os.Stdout)
	}
	if cfg.jsonPath != "" {
		if err := writeJSON(cfg.jsonPath, rep); err != nil {
			return err
		}
	}
	var bad []string
	for _, rd := range rep.Rounds {
		bad = append(bad, failures(rd.Results)...)
	}
	for _, sr := range rep.Shapes {
		for _, rd := range sr.Rounds {
			bad = append(bad, failures(rd.Results)...)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%s", strings.Join(bad, "; "))
	}
	return nil
}

// measureAll starts the server and measures each contender in turn on it.
func measureAll(ctx context.Context, cfg config, selected []contender) (*report, error) {
	bin, err := exec.LookPath(cfg.redisBin)
	if err != nil {
		return nil, fmt.Errorf("redis-server: %w", err)
	}
	srv, err := startRedis(ctx, bin, cfg.redisCPUs)
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	b, err := newBench(ctx, srv.Addr)
	if err != nil {
		return nil, err
	}
	defer b.Close()

	rep := &report{
		Started:        time.Now(),
		RedisVersion:   srv.Version,
		RedisCPUs:      cfg.redisCPUs,
		BenchCPUs:      allowedCPUs(),
		GOMAXPROCS:     runtime.GOMAXPROCS(0),
		Goroutines:     cfg.goroutines,
		Duration:       cfg.duration.String(),
		UncontendedFor: cfg.uncontended.String(),
		Lease:          cfg.lease.String(),
	}
	t := target{addr: srv.Addr, version: srv.Version, lease: cfg.lease}
	if cfg.procs != "" {
		shapes, err := parseShapes(cfg.procs, cfg.goroutines)
		if err != nil {
			return nil, err
		}
		rep.UncontendedFor = ""
		for _, sh := range shapes {
			rounds, err := rotate(ctx, cfg.rounds, selected, func(c contender) result {
				slog.Info("measuring", "shape", sh, "contender", c.name, "redis", srv.Addr)
				return b.measureProcs(ctx, c, t, cfg, sh)
			})
			if err != nil {
				return nil, err
			}
			rep.Shapes = append(rep.Shapes, shapeReport{Shape: sh, Rounds: rounds, MedianRatios: medianRatios(rounds)})
		}
		return rep, nil
	}
	if rep.Rounds, err = rotate(ctx, cfg.rounds, selected, func(c contender) result {
		slog.Info("measuring", "contender", c.name, "redis", srv.Addr)
		return b.measure(ctx, c, t, cfg)
	}); err != nil {
		return nil, err
	}
	rep.MedianRatios = medianRatios(rep.Rounds)
	return rep, nil
}

// rotate measures every selected contender in n rounds, each round starting
// one contender later, so that a slow spell on the shared machine does not
// always fall on the same neighbours.
func rotate(ctx context.Context, n int, selected []contender, measure func(contender) result) ([]round, error) {
	var rounds []round
	for k := range n {
		rd := round{Results: make([]result, len(selected))}
		for j := range selected {
			i := (k + j) % len(selected)
			r := measure(selected[i])
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if r.Error != "" {
				slog.Error("contender failed", "round", k+1, "contender", r.Name, "err", r.Error)
			}
			rd.RunOrder = append(rd.RunOrder, r.Name)
			rd.Results[i] = r
		}
		rd.Ratios = computeRatios(rd.Results)
		rounds = append(rounds, rd)
	}
	return rounds, nil
}

// measure runs one contender: warm-up, contended run, uncontended run, each
// on its own key, with one client session. A phase that fails is recorded
// in the result, with the figures of the phases before it.
func (b *bench) measure(ctx context.Context, c contender, t target, cfg config) result {
	r := result{Name: c.name, About: c.about, Peer: c.peer}
	if err := b.measureInto(ctx, &r, c, t, cfg); err != nil {
		r.Error = err.Error()
	}
	return r
}

func (b *bench) measureInto(ctx context.Context, r *result, c contender, t target, cfg config) (err error) {
	t.requests = &requestCounter{}
	s, err := c.open(t)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeWithin(s, b.stallLimit)) }()
	key := "peers:" + c.name
	if cfg.warmup > 0 {
		if _, err := b.contended(ctx, s, t.requests, key+":warmup", cfg.goroutines, cfg.warmup); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}
	contended, err := b.contended(ctx, s, t.requests, key+":contended", cfg.goroutines, cfg.duration)
	if err != nil {
		return fmt.Errorf("contended: %w", err)
	}
	r.Contended = summarizeContended(contended)
	if err := ctx.Err(); err != nil {
		return err
	}
	uncontended, err := b.uncontended(ctx, s, t.requests, key+":uncontended", cfg.uncontended)
	if err != nil {
		return fmt.Errorf("uncontended: %w", err)
	}
	r.Uncontended = summarizeUncontended(uncontended)
	return nil
}

// closeWithin closes s, giving up after limit: a session whose goroutines
// are stuck in the library may never close.
func closeWithin(s session, limit time.Duration) error {
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		return err
	case <-time.After(limit):
		return fmt.Errorf("close did not return within %v", limit)
	}
}

func names(cs []contender) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.name
	}
	return out
}

func selectContenders(all []contender, list string) ([]contender, error) {
	if list == "all" {
		return all, nil
	}
	var out []contender
	for name := range strings.SplitSeq(list, ",") {
		name = strings.TrimSpace(name)
		if name == noLock.name {
			out = append(out, noLock)
			continue
		}
		if i := indexOf(all, name); i >= 0 {
			out = append(out, all[i])
			continue
		}
		n := len(out)
		for _, c := range all {
			if strings.HasPrefix(c.name, name+"-") {
				out = append(out, c)
			}
		}
		if len(out) == n {
			return nil, fmt.Errorf("unknown contender %q (have %s)", name, strings.Join(names(all), ","))
		}
	}
	return out, nil
}

func indexOf(cs []contender, name string) int {
	for i, c := range cs {
		if c.name == name {
			return i
		}
	}
	return -1
}

// envFallback sets every flag not given on the command line from the
// environment variable prefix+NAME (upper case, '-' as '_'), if set.
func envFallback(fs *flag.FlagSet, prefix string) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		env := prefix + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(env); ok && !given[f.Name] {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", env, err))
			}
		}
	})
	return errors.Join(errs...)
}

// allowedCPUs is the bench's CPU affinity list, as taskset left it.
func allowedCPUs() string {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "unknown"
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
