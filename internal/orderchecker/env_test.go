package orderchecker

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/lockstep/lockstep/internal/faultproxy"
	"github.com/lockstep/lockstep/internal/lockserver"
	"github.com/lockstep/lockstep/internal/lockserver/lockservertest"
	"github.com/lockstep/lockstep/internal/redistest"
)

// The processes' settings: a sale's deadline, the workers' claim and
// payment timing. Short, so that a run of a minute sees many deadlines
// pass, claims happen and payments expire.
const (
	saleDeadline = 3 * time.Second
	payWithin    = 4 * time.Second
	database     = "lockstep"
)

// proc is one child process (a shop or an order worker) that the injector
// kills (SIGKILL) and starts again with the same arguments.
type proc struct {
	name string
	bin  string
	args []string
	log  string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		return nil
	}
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); f.Close(); close(done) }()
	p.cmd, p.done = cmd, done
	return nil
}

// alive reports whether the process runs (it may have exited by itself).
func (p *proc) alive() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		p.cmd = nil
		return false
	default:
		return true
	}
}

// kill ends the process with SIGKILL and waits for it.
func (p *proc) kill() { p.signal(syscall.SIGKILL, 0) }

// stop asks the process to stop (SIGTERM), then kills it after grace.
func (p *proc) stop(grace time.Duration) { p.signal(syscall.SIGTERM, grace) }

func (p *proc) signal(sig syscall.Signal, grace time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	p.cmd = nil
}

// env is the checker's world: Redis and MariaDB behind one fault proxy
// each, two shops and two workers behind those proxies.
type env struct {
	t        *testing.T
	redis    *redistest.Server
	maria    *lockserver.MariaDB
	rproxy   *faultproxy.Proxy
	mproxy   *faultproxy.Proxy
	rfaults  *linkFaults
	mfaults  *linkFaults
	shops    []*proc
	shopURLs []string
	workers  []*proc
	db       *sql.DB // direct, not through the proxy: the checker's own reads
}

// build compiles a command of this module into dir, with the files of
// overlay (go build -overlay; "": none) in place of the module's.
func build(t *testing.T, dir, pkg, overlay string) string {
	t.Helper()
	bin := filepath.Join(dir, filepath.Base(pkg))
	args := []string{"build", "-o", bin}
	if overlay != "" {
		args = append(args, "-overlay", overlay)
	}
	if out, err := exec.Command("go", append(args, "github.com/lockstep/lockstep/"+pkg)...).CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// startEnv starts the checker's world, its commands built with overlay.
func startEnv(t *testing.T, seed uint64, overlay string) *env {
	t.Helper()
	dir := t.TempDir()
	shopBin, workerBin := build(t, dir, "cmd/shop", overlay), build(t, dir, "cmd/orderworker", overlay)
	e := &env{t: t}
	// Every write fsynced: a restart loses nothing Redis acknowledged, so
	// what the checker finds after one is the shop's doing, not the AOF's.
	e.redis = redistest.Start(t, "--appendonly", "yes", "--appendfsync", "always")
	e.maria = lockservertest.MariaDB(t)
	db, err := sql.Open("mysql", e.maria.DSN(""))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS "+database); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if e.db, err = sql.Open("mysql", e.maria.DSN(database)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.db.Close() })

	e.rfaults, e.mfaults = newLinkFaults(seed, "redis"), newLinkFaults(seed, "mysql")
	e.mfaults.favour = [][]byte{[]byte("COMMIT"), []byte("INSERT INTO lockstep_orders")}
	if e.rproxy, err = faultproxy.Start(e.redis.Addr, e.rfaults); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.rproxy.Close)
	if e.mproxy, err = faultproxy.Start(e.maria.Addr, e.mfaults); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.mproxy.Close)
	dsn := "root@tcp(" + e.mproxy.Addr() + ")/" + database + "?timeout=2s&readTimeout=5s&writeTimeout=5s"

	for i := range 2 {
		port := redistest.FreePort(t)
		addr := "127.0.0.1:" + strconv.Itoa(port)
		p := &proc{name: fmt.Sprintf("shop-%d", i+1), bin: shopBin, log: filepath.Join(dir, fmt.Sprintf("shop-%d.log", i+1)),
			args: []string{"-addr", addr, "-redis-addr", e.rproxy.Addr(), "-mysql-dsn", dsn, "-replica", fmt.Sprintf("shop-%d", i+1),
				"-request-timeout", saleDeadline.String(), "-shutdown-timeout", "5s", "-log-level", "warn"}}
		e.shops = append(e.shops, p)
		e.shopURLs = append(e.shopURLs, "http://"+addr)
	}
	for i := range 2 {
		name := fmt.Sprintf("worker-%d", i+1)
		e.workers = append(e.workers, &proc{name: name, bin: workerBin, log: filepath.Join(dir, name+".log"),
			args: []string{"-redis-addr", e.rproxy.Addr(), "-mysql-dsn", dsn, "-consumer", name, "-stages", "async-stream",
				"-skus", sku, "-batch", "16", "-block", "500ms", "-claim-idle", "1s", "-claim-every", "500ms",
				"-pay-within", payWithin.String(), "-sweep-every", "500ms", "-shutdown-timeout", "5s", "-log-level", "warn"}})
	}
	t.Cleanup(func() {
		e.continueMariaDB()
		for _, p := range append(append([]*proc(nil), e.shops...), e.workers...) {
			p.stop(5 * time.Second)
		}
		if t.Failed() {
			for _, p := range append(append([]*proc(nil), e.shops...), e.workers...) {
				if b, err := os.ReadFile(p.log); err == nil {
					t.Logf("%s's log (last 3000 bytes):\n%s", p.name, tail(b, 3000))
				}
			}
		}
	})
	for i, p := range e.shops {
		if err := p.start(); err != nil {
			t.Fatal(err)
		}
		if err := waitHealthy(e.shopURLs[i], 60*time.Second); err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
	}
	for _, p := range e.workers {
		if err := p.start(); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		b = b[len(b)-n:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return b
}

func waitHealthy(url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		resp, err := http.Get(url + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not healthy after %s: %v", timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (e *env) stopMariaDB()     { _ = syscall.Kill(e.maria.Pid(), syscall.SIGSTOP) }
func (e *env) continueMariaDB() { _ = syscall.Kill(e.maria.Pid(), syscall.SIGCONT) }

// revive starts every process that is down (killed, or exited by itself)
// and waits for the shops to answer.
func (e *env) revive() error {
	for i, p := range e.shops {
		if !p.alive() {
			if err := p.start(); err != nil {
				return err
			}
			if err := waitHealthy(e.shopURLs[i], 30*time.Second); err != nil {
				return fmt.Errorf("%s: %w", p.name, err)
			}
		}
	}
	for _, p := range e.workers {
		if !p.alive() {
			if err := p.start(); err != nil {
				return err
			}
		}
	}
	return nil
}

// linkFaults is one link's fault policy (faultproxy.Policy): the injector
// sets a mode for a window, and each chunk's fate is drawn from a source
// seeded by the run's seed and the window's number.
type linkFaults struct {
	name string
	seed uint64

	mu   sync.Mutex
	rng  *rand.Rand
	mode string  // "": carry; "cut": cut replies; "delay": hold replies back; "stall": hold requests back
	p    float64 // the share of chunks affected
	// favour are requests whose replies a cut hits more often (pFavour):
	// MariaDB's COMMIT and the order INSERT, whose lost replies are the
	// unknown outcomes that matter most, among the many round trips of a
	// transaction or a prepared statement.
	favour  [][]byte
	pFavour float64
	lo, hi  time.Duration
	hits    int
}

func newLinkFaults(seed uint64, name string) *linkFaults {
	return &linkFaults{name: name, seed: seed, rng: rand.New(rand.NewPCG(seed, 0))}
}

// set starts window number n of mode: p of the chunks affected, pFavour
// of those of the favoured requests.
func (f *linkFaults) set(n uint64, mode string, p, pFavour float64, lo, hi time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rng = rand.New(rand.NewPCG(f.seed, n))
	f.mode, f.p, f.pFavour, f.lo, f.hi, f.hits = mode, p, pFavour, lo, hi, 0
}

// clear ends the window and returns how many chunks it affected.
func (f *linkFaults) clear() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mode = ""
	return f.hits
}

func (f *linkFaults) draw(mode string, last []byte) (time.Duration, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.p
	for _, fav := range f.favour {
		if bytes.Contains(last, fav) {
			p = f.pFavour
		}
	}
	if f.mode != mode || f.rng.Float64() >= p {
		return 0, false
	}
	f.hits++
	return f.lo + time.Duration(f.rng.Int64N(int64(f.hi-f.lo)+1)), true
}

func (f *linkFaults) Request(chunk []byte) time.Duration {
	d, _ := f.draw("stall", chunk)
	return d
}

func (f *linkFaults) Reply(_, last []byte) (time.Duration, bool) {
	if _, cut := f.draw("cut", last); cut {
		return 0, true
	}
	d, _ := f.draw("delay", last)
	return d, false
}
