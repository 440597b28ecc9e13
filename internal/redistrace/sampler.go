package redistrace

import (
	"context"
	"sync"
	"sync/atomic"
)

// Sample is one traced run: what it sent, and what it returned.
type Sample[R any] struct {
	Recording
	Result R `json:"result"`
}

// Sampler traces, on request, one run of a kind of request (a sale of a
// stage) among those a busy server runs: Next waits for it, Run runs every
// request and traces the one Next waits for.
type Sampler[R any] struct {
	tracer *Tracer
	// ok tells a run worth returning (a sale) from one that is not (a busy
	// lock, sold out): Next waits for the former.
	ok func(R) bool

	// waiting counts the kinds a Next waits for: with none, Run costs one
	// atomic load.
	waiting atomic.Int32
	mu      sync.Mutex
	wanted  map[string]*wanted[R]
}

type wanted[R any] struct {
	tracing bool // a run of the kind is being traced
	done    chan Sample[R]
	last    *Sample[R] // the latest traced run that was not ok
}

// NewSampler makes a sampler of the tracer's commands.
func NewSampler[R any](t *Tracer, ok func(R) bool) *Sampler[R] {
	return &Sampler[R]{tracer: t, ok: ok, wanted: map[string]*wanted[R]{}}
}

// Next traces the next run of kind that is ok and returns it. When ctx ends
// first it returns the latest run that was not ok, if one was traced
// (found reports whether one was), and ctx's error.
func (s *Sampler[R]) Next(ctx context.Context, kind string) (sample Sample[R], found bool, err error) {
	s.mu.Lock()
	w, already := s.wanted[kind]
	if !already {
		w = &wanted[R]{done: make(chan Sample[R], 1)}
		s.wanted[kind] = w
		s.waiting.Add(1)
	}
	s.mu.Unlock()
	select {
	case sample := <-w.done:
		return sample, true, nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wanted[kind] == w {
		delete(s.wanted, kind)
		s.waiting.Add(-1)
	}
	select {
	case sample := <-w.done: // came in meanwhile
		return sample, true, nil
	default:
	}
	if w.last != nil {
		return *w.last, true, ctx.Err()
	}
	return Sample[R]{}, false, ctx.Err()
}

// Run runs fn, traced when a Next waits for its kind and no other run of
// the kind is traced at the moment.
func (s *Sampler[R]) Run(ctx context.Context, kind string, fn func(context.Context) R) R {
	if s.waiting.Load() == 0 {
		return fn(ctx)
	}
	s.mu.Lock()
	w := s.wanted[kind]
	traced := w != nil && !w.tracing
	if traced {
		w.tracing = true
	}
	s.mu.Unlock()
	if !traced {
		return fn(ctx)
	}
	tctx, tr := s.tracer.Start(ctx)
	result := fn(tctx)
	sample := Sample[R]{Recording: s.tracer.Finish(tr), Result: result}
	s.mu.Lock()
	defer s.mu.Unlock()
	w.tracing = false
	if !s.ok(result) {
		w.last = &sample
		return result
	}
	if s.wanted[kind] == w {
		delete(s.wanted, kind)
		s.waiting.Add(-1)
	}
	w.done <- sample // buffered, and only one ok run gets here
	return result
}
