package main

import (
	"bytes"
	"context"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockstep/lockstep/internal/flagenv"
	"github.com/lockstep/lockstep/internal/loadgen"
	"github.com/lockstep/lockstep/internal/loadgen/report"
)

// The live page: one page on loopback that follows the run while it runs
// (the stage, its figures and sales over time, the crash and fault
// markers, what one sale sent to Redis, the results table filling in),
// and, with --step, waits before each stage for "run this stage". The
// workshop renders the page's content with the report's own chart code
// and sends it whole, over server-sent events, a few times a second: the
// page needs no chart library, and one opened mid-run gets the current
// state as its first event.

//go:embed live
var liveAssets embed.FS

var (
	liveIndex = template.Must(template.ParseFS(liveAssets, "live/index.html"))
	liveMain  = template.Must(template.ParseFS(liveAssets, "live/main.tmpl"))
)

// liveEvery is how often the state is rendered, while a page is open, and
// sent to every open page it changed for.
const liveEvery = 250 * time.Millisecond

// live serves the page and is the run's loadgen.Watcher.
type live struct {
	url    string
	srv    *http.Server
	served chan struct{}
	quit   chan struct{} // closed on close: ends the event streams
	step   bool
	// run holds one "run this stage" click for the stage that waits:
	// buffered, so a click that lands between the stage saying it waits
	// and its select is not refused.
	run chan struct{}
	// enters are the Enters on the terminal (readEnters), which run a
	// waiting stage too; nil without --step.
	enters   <-chan struct{}
	log      *slog.Logger
	renewals *renewalCounter
	doors    *frontDoorReader
	// token, in the page, must come with POST /run: no other web page open
	// in the browser can read it, so none can start a stage.
	token string
	// room: the page is shown to a room (--live-room); token is then the
	// admin token, which the page does not carry.
	room    bool
	frames  *frames
	renders atomic.Int64 // how often the page's content was rendered
	loop    sync.WaitGroup

	mu       sync.Mutex
	scenario string
	runs     int
	current  *liveStage
	waiting  *loadgen.StageStart
	done     []report.StageRun
	finished bool
	report   string
	runErr   string
}

type liveStage struct {
	start   loadgen.StageStart
	live    *loadgen.LiveStage
	started time.Time
}

// startLive listens on addr, which must be a loopback address.
// checkLiveAddr refuses a --live-addr that is not host:port, or not on
// loopback without --live-room: the page shows the run to whoever can
// open it, so reaching other machines is an explicit choice.
func checkLiveAddr(addr string, room bool) error {
	if err := flagenv.HostPort("live-addr", addr); err != nil {
		return err
	}
	host, _, _ := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); !room && host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("--live-addr %s: the live page listens on loopback only (127.0.0.1, ::1 or localhost); add --live-room to show it to other machines", addr)
	}
	return nil
}

// startLive serves the page at addr. roomToken empty, the page is for this
// machine: it answers only under its own address and carries the run's
// token for its button. roomToken set (--live-room, the shops' admin
// token), the page is for a room: it answers under any name, carries no
// token, and its button asks for roomToken, so a student's browser can
// watch but not start a stage.
func startLive(addr, scenario string, runs int, step bool, roomToken string, log *slog.Logger) (*live, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("live page: %w", err)
	}
	l := &live{
		url: "http://" + ln.Addr().String() + "/", served: make(chan struct{}), quit: make(chan struct{}),
		step: step, run: make(chan struct{}, 1), log: log, scenario: scenario, runs: runs,
		renewals: newRenewalCounter(), doors: newFrontDoorReader(), token: randomToken(), frames: newFrames(),
	}
	if roomToken != "" {
		l.token, l.room = roomToken, true
		if host, port, _ := net.SplitHostPort(ln.Addr().String()); net.ParseIP(host).IsUnspecified() {
			name, _ := os.Hostname()
			l.url = "http://" + net.JoinHostPort(name, port) + "/"
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", l.index)
	mux.HandleFunc("GET /events", l.events)
	mux.HandleFunc("POST /run", l.runStage)
	mux.HandleFunc("GET /report.css", asset("text/css", []byte(report.ReportCSS)))
	for _, name := range []string{"live.css", "live.js"} {
		data, err := liveAssets.ReadFile("live/" + name)
		if err != nil {
			_ = ln.Close()
			return nil, fmt.Errorf("live page: %w", err)
		}
		kind := "text/css"
		if strings.HasSuffix(name, ".js") {
			kind = "text/javascript"
		}
		mux.HandleFunc("GET /"+name, asset(kind, data))
	}
	var handler http.Handler = mux
	if !l.room {
		handler = ownHostOnly(ln.Addr().String(), mux)
	}
	l.srv = &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	l.loop.Go(l.renderLoop)
	go func() {
		defer close(l.served)
		if err := l.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			log.Error("live page", "err", err)
		}
	}()
	return l, nil
}

// ownHostOnly answers only requests addressed to the page's own address
// (or localhost on its port): a site whose name was made to resolve to
// 127.0.0.1 (DNS rebinding) sends its own name as Host, and could
// otherwise read the page, and the run's token in it.
func ownHostOnly(addr string, next http.Handler) http.Handler {
	_, port, _ := net.SplitHostPort(addr) // a listener's address always splits
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Host != addr && r.Host != net.JoinHostPort("localhost", port) {
			http.Error(w, "the live page answers only at "+addr, http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func asset(kind string, data []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", kind+"; charset=utf-8")
		_, _ = w.Write(data)
	}
}

// close ends the render loop and the event streams, then the server.
func (l *live) close() {
	close(l.quit)
	l.loop.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = l.srv.Shutdown(ctx)
	<-l.served
}

// follow counts the replicas' watchdog renewals and reads their front
// doors until ctx ends.
func (l *live) follow(ctx context.Context, replicaURLs []string) {
	var wg sync.WaitGroup
	wg.Go(func() { l.doors.follow(ctx, replicaURLs) })
	l.renewals.follow(ctx, replicaURLs)
	wg.Wait()
}

// finish shows the run's end: the rows as the report has them (judged
// against the articles), where the report is, or why the run failed.
func (l *live) finish(rep *report.Report, reportPath string, runErr error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.finished, l.report, l.current, l.waiting = true, reportPath, nil, nil
	if rep != nil {
		l.done = rep.Stages
	}
	if runErr != nil {
		l.runErr = runErr.Error()
	}
}

// StageStarting implements loadgen.Watcher; with --step it waits for "run
// this stage".
func (l *live) StageStarting(ctx context.Context, s loadgen.StageStart, stage *loadgen.LiveStage) error {
	if l.step {
		l.mu.Lock()
		select {
		case <-l.run: // a click meant for a stage that Enter started
		default:
		}
		l.waiting, l.current = &s, nil
		l.mu.Unlock()
		l.log.Info(fmt.Sprintf("next: [%d/%d] %s; press Enter here, or \"run this stage\" on %s", s.Index+1, s.Runs, s.Label, l.url))
		select {
		case <-l.run:
		case <-l.enters:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.waiting = nil
	l.current = &liveStage{start: s, live: stage, started: time.Now()}
	return nil
}

// StageDone implements loadgen.Watcher.
func (l *live) StageDone(row report.StageRun) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.done = append(l.done, row)
	if l.current != nil && l.current.start.Index == row.Index {
		l.current = nil
	}
}

func (l *live) runStage(w http.ResponseWriter, r *http.Request) {
	if subtle.ConstantTimeCompare([]byte(r.Header.Get("X-Run-Token")), []byte(l.token)) != 1 {
		msg := "POST /run needs the run's token (the live page's button sends it)"
		if l.room {
			msg = "POST /run needs the workshop's admin token (--admin-token, or admin_token in workshop.json)"
		}
		http.Error(w, msg, http.StatusForbidden)
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.waiting == nil {
		http.Error(w, "no stage is waiting to run", http.StatusConflict)
		return
	}
	select {
	case l.run <- struct{}{}:
		w.WriteHeader(http.StatusNoContent)
	default:
		http.Error(w, "this stage was already asked to run", http.StatusConflict)
	}
}

func (l *live) index(w http.ResponseWriter, _ *http.Request) {
	main, err := l.render()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := liveIndex.Execute(w, liveIndexPage{Main: main, Token: l.pageToken()}); err != nil {
		l.log.Warn("live page", "err", err)
	}
}

// pageToken is the token the page carries for its button: none for a
// room, whose button asks for the admin token instead.
func (l *live) pageToken() string {
	if l.room {
		return ""
	}
	return l.token
}

// liveIndexPage is the data of index.html.
type liveIndexPage struct {
	Main  template.HTML
	Token string
}

// events streams the rendered state, when it changed, until the page goes
// away or the workshop stops.
func (l *live) events(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	next := l.frames.watch()
	defer l.frames.unwatch()
	var last template.HTML
	for {
		select {
		case <-next:
		case <-r.Context().Done():
			return
		case <-l.quit:
			return
		}
		var main template.HTML
		main, next = l.frames.latest()
		if main == last {
			continue
		}
		data, err := json.Marshal(string(main))
		if err != nil {
			return
		}
		if _, err := fmt.Fprintf(w, "data: %s\n\n", data); err != nil {
			return
		}
		flusher.Flush()
		last = main
	}
}

// renderLoop renders the state once per tick while any page is open, and
// at once when one opens, for every open page to share: the cost of the
// page does not grow with the pages open (each render takes milliseconds,
// taken from the benchmark's cores).
func (l *live) renderLoop() {
	tick := time.NewTicker(liveEvery)
	defer tick.Stop()
	for {
		select {
		case <-l.quit:
			return
		case <-tick.C:
		case <-l.frames.opened:
		}
		if !l.frames.watched() {
			continue
		}
		main, err := l.render()
		if err != nil {
			l.log.Warn("live page", "err", err)
			continue
		}
		l.frames.publish(main)
	}
}

// frames hands the latest render to the open pages' event streams.
type frames struct {
	opened chan struct{} // a page opened: render now (buffered, 1)

	mu      sync.Mutex
	current template.HTML
	next    chan struct{} // closed when current is replaced
	pages   int
}

func newFrames() *frames {
	return &frames{opened: make(chan struct{}, 1), next: make(chan struct{})}
}

// watch counts an open page and returns the channel closed by the next
// render, which it asks for.
func (f *frames) watch() <-chan struct{} {
	f.mu.Lock()
	f.pages++
	next := f.next
	f.mu.Unlock()
	select {
	case f.opened <- struct{}{}:
	default: // a render is already asked for
	}
	return next
}

func (f *frames) unwatch() {
	f.mu.Lock()
	f.pages--
	f.mu.Unlock()
}

func (f *frames) watched() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pages > 0
}

func (f *frames) publish(main template.HTML) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.current = main
	close(f.next)
	f.next = make(chan struct{})
}

// latest returns the latest render and the channel closed by the next.
func (f *frames) latest() (template.HTML, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.current, f.next
}

// The template's view of the state.
type livePage struct {
	Scenario, ReportPath, Error string
	Runs                        int
	Finished                    bool
	Waiting                     *liveStart
	Current                     *liveNow
	// Results is report.html's results table of the stages done.
	Results template.HTML
	Done    []liveRow
}

type liveStart struct {
	loadgen.StageStart
	Number int
}

type liveNow struct {
	liveStart
	loadgen.LiveSnapshot
	Phase       string
	ElapsedS    float64
	SalesPerSec float64
	StockLeft   string
	Renewals    int
	// Doors are the replicas' front doors (limiter refusals, the mark).
	Doors       []replicaDoor
	Chart       template.HTML
	ShardsTable template.HTML
	StreamTable template.HTML
	Trace       template.HTML
}

type liveRow struct {
	*report.StageRun
	Label                     string
	Chart, ShardsTable, Trace template.HTML
	StreamTable               template.HTML
}

func (l *live) render() (template.HTML, error) {
	l.renders.Add(1)
	l.mu.Lock()
	page := livePage{Scenario: l.scenario, Runs: l.runs, Finished: l.finished, ReportPath: l.report, Error: l.runErr}
	if l.waiting != nil {
		page.Waiting = &liveStart{StageStart: *l.waiting, Number: l.waiting.Index + 1}
	}
	current := l.current
	done := l.done
	l.mu.Unlock()

	if current != nil {
		now, err := l.now(current)
		if err != nil {
			return "", err
		}
		page.Current = now
	}
	var err error
	if page.Results, err = report.ResultsHTML(&report.Report{Stages: done}); err != nil {
		return "", err
	}
	for i := range done {
		row, err := liveRowOf(&done[i])
		if err != nil {
			return "", err
		}
		page.Done = append(page.Done, row)
	}
	var b bytes.Buffer
	if err := liveMain.Execute(&b, page); err != nil {
		return "", fmt.Errorf("render the live page: %w", err)
	}
	return template.HTML(b.String()), nil //nolint:gosec // rendered by html/template
}

func (l *live) now(c *liveStage) (*liveNow, error) {
	snap := c.live.Snapshot()
	now := &liveNow{
		liveStart:    liveStart{StageStart: c.start, Number: c.start.Index + 1},
		LiveSnapshot: snap,
		Phase:        snap.Phase,
		ElapsedS:     time.Since(c.started).Seconds(),
		SalesPerSec:  recentSalesPerSec(snap.Timeline),
		Renewals:     l.renewals.count(c.start.Stage),
		Doors:        l.doors.now(),
	}
	if snap.Stock != nil {
		now.StockLeft = fmt.Sprint(*snap.Stock)
	}
	row := report.StageRun{StageID: report.StageID{Stage: c.start.Stage, Label: c.start.Label}, Timeline: snap.Timeline}
	now.Chart = report.TimelineChart(&row)
	var err error
	if now.ShardsTable, err = report.ShardsHTML(snap.Shards); err != nil {
		return nil, err
	}
	if now.StreamTable, err = report.StreamHTML(report.StreamNow(c.start.Label, snap.Stream)); err != nil {
		return nil, err
	}
	now.Trace, err = report.TraceHTML(snap.Trace)
	return now, err
}

func liveRowOf(r *report.StageRun) (liveRow, error) {
	row := liveRow{StageRun: r, Label: r.Heading()}
	if r.NotRunReason() == "" {
		row.Chart = report.TimelineChart(r)
	}
	var err error
	if row.ShardsTable, err = report.ShardsHTML(r.Shards); err != nil {
		return row, err
	}
	if row.StreamTable, err = report.StreamHTML(r.StreamRows()); err != nil {
		return row, err
	}
	row.Trace, err = report.TraceHTML(r.Trace)
	return row, err
}

// recentSalesPerSec is the sales of the last whole second of the timeline.
func recentSalesPerSec(tl report.Timeline) float64 {
	if tl.BucketMS == 0 || len(tl.Sales) < 2 {
		return 0
	}
	perSecond := 1000 / tl.BucketMS
	end := len(tl.Sales) - 1 // the last bucket is still filling
	start := max(0, end-perSecond)
	sum := 0
	for _, n := range tl.Sales[start:end] {
		sum += n
	}
	return float64(sum) * 1000 / float64((end-start)*tl.BucketMS)
}
