package loadgen

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

// progress shows what the run is doing while it runs: on a terminal it
// redraws one status line, elsewhere (CI logs) it prints a line a second.
type progress struct {
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

func newProgress(w io.Writer, interactive bool) *progress {
	every := time.Second
	if interactive {
		every = 100 * time.Millisecond
	}
	return &progress{w: w, interactive: interactive, every: every}
}

// phase starts a new status line subject.
func (p *progress) phase(prefix string, planned time.Duration) {
	if p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.prefix, p.planned, p.started, p.last = prefix, planned, time.Now(), time.Time{}
	p.oversold.Store(0)
}

// Observe is called for every answer; it redraws at most every p.every.
func (p *progress) Observe(r attack.Result) {
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

// note prints a line of its own, below any status line.
func (p *progress) note(format string, args ...any) {
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
