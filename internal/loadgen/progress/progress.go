// Package progress is the observer that shows what a run is doing while
// it runs: on a terminal it redraws one status line, elsewhere (CI logs)
// it prints a line a second, with the attack's figures so far and the
// audit's oversold figure. It has no record in the report, and imports no
// store, no Redis client and nothing of the runner above it.
package progress

import (
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/attack"
)

// IsTerminal reports whether w is a character device, where progress can
// redraw one line instead of printing a line a second.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// Line shows what the run is doing while it runs: on a terminal it
// redraws one status line, elsewhere (CI logs) it prints a line a second.
type Line struct {
	w           io.Writer
	interactive bool
	every       time.Duration

	mu      sync.Mutex
	last    time.Time
	drawn   bool
	prefix  string
	planned time.Duration
	started time.Time
	// oversold is the latest audit figure, written by the poller goroutine.
	oversold atomic.Int64
}

// New is a Line on w; a nil w shows nothing.
func New(w io.Writer, interactive bool) *Line {
	every := time.Second
	if interactive {
		every = 100 * time.Millisecond
	}
	return &Line{w: w, interactive: interactive, every: every}
}

// Phase starts a new status line subject.
func (p *Line) Phase(prefix string, planned time.Duration) {
	if p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.prefix, p.planned, p.started, p.last = prefix, planned, time.Now(), time.Time{}
	p.oversold.Store(0)
}

// Observe is called for every answer; it redraws at most every p.every.
func (p *Line) Observe(r attack.Result) {
	t := r.SoFar
	if p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if now.Sub(p.last) < p.every {
		return
	}
	p.last = now
	line := fmt.Sprintf("%s  %4.1fs/%s  requests %d  sales %d  sold-out %d  busy %d  already-bought %d  errors %d  oversold so far %d",
		p.prefix, now.Sub(p.started).Seconds(), p.planned, t.Requests, t.Sales, t.SoldOut, t.Busy, t.AlreadyBought, t.Errors, p.oversold.Load())
	if p.interactive {
		fmt.Fprintf(p.w, "\r\033[K%s", line)
		p.drawn = true
		return
	}
	fmt.Fprintln(p.w, line)
}

// Note prints a line of its own, below any status line.
func (p *Line) Note(format string, args ...any) {
	if p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
		p.drawn = false
	}
	fmt.Fprintf(p.w, format+"\n", args...)
}

// Oversold sets the latest audit's oversold figure, shown from the next
// redraw on.
func (p *Line) Oversold(n int) { p.oversold.Store(int64(n)) }
