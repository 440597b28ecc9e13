package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lockstep/lockstep/internal/childproc"
	"github.com/lockstep/lockstep/internal/proc"
	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/lockstep/lockstep/nginx"
)

// stock is what every measured stage is reset to: no round sells out.
const stock = 1_000_000_000

// measuredStages are the stages the workloads sell on, reset at the start
// and audited at the end.
var measuredStages = []string{"atomic", "watchdog"}

// env is one run's processes: redis-server, and the shops measured on it,
// each with its own nginx.
type env struct {
	redis *redistest.Server
	shops []*shop
}

// shop is one shop process, and the nginx in front of it (nil with
// -no-nginx).
type shop struct {
	label    string // "" for the shop measured, "baseline" for -baseline's
	bin      string
	proc     *child
	nginx    *child
	url      string
	pprofURL string
	frontURL string
}

// name suffixes a workload's name with the shop's label.
func (s *shop) name(workload string) string {
	if s.label == "" {
		return workload
	}
	return workload + "@" + s.label
}

// child is a process the run started; it dies with the run however it ends
// (internal/childproc).
type child struct {
	name   string
	cmd    *exec.Cmd
	exited <-chan error
	log    string
}

func startChild(name, logPath string, deathSignal syscall.Signal, bin string, args ...string) (*child, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child keeps its own descriptor
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own process group: nginx's workers are counted and stopped with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	exited, err := childproc.Start(cmd, deathSignal)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return &child{name: name, cmd: cmd, exited: exited, log: logPath}, nil
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// cpu is the CPU time its process group (the child and, for nginx, its
// workers) used so far.
func (c *child) cpu() (time.Duration, error) {
	var total time.Duration
	pids := proc.Group(c.pid())
	if len(pids) == 0 {
		return 0, fmt.Errorf("%s exited (log %s)", c.name, c.log)
	}
	for _, pid := range pids {
		if st, err := proc.Read(pid); err == nil {
			total += st.CPU
		}
	}
	return total, nil
}

// stop ends the child with SIGTERM (a graceful stop for the shop and nginx)
// and waits for it, SIGKILL after 10 s.
func (c *child) stop() error {
	_ = syscall.Kill(-c.pid(), syscall.SIGTERM)
	select {
	case err := <-c.exited:
		var exit *exec.ExitError
		if errors.As(err, &exit) && exit.Sys().(syscall.WaitStatus).Signal() == syscall.SIGTERM {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w (log %s)", c.name, err, c.log)
		}
		return nil
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-c.pid(), syscall.SIGKILL)
		<-c.exited
		return fmt.Errorf("%s did not stop within 10 s of SIGTERM", c.name)
	}
}

func startEnv(ctx context.Context, cfg config, dir string) (*env, error) {
	for _, bin := range []string{"wrk", "redis-server"} {
		if _, err := exec.LookPath(bin); err != nil {
			return nil, fmt.Errorf("%s: %w (bash scripts/install-deps.sh installs it)", bin, err)
		}
	}
	e := &env{}
	var err error
	if e.redis, err = redistest.StartMain(dir); err != nil {
		return nil, err
	}
	bins := []*shop{{bin: cfg.shopBin}}
	if cfg.baseline != "" {
		bins = append(bins, &shop{label: "baseline", bin: cfg.baseline})
	}
	for _, s := range bins {
		if err := e.startShop(ctx, cfg, dir, s); err != nil {
			return nil, errors.Join(err, e.stop())
		}
	}
	return e, nil
}

// startShop starts s on the run's Redis, resets the measured stages
// (again for a second shop: harmless), and starts its nginx.
func (e *env) startShop(ctx context.Context, cfg config, dir string, s *shop) error {
	addr, pprofAddr := freeAddr(), freeAddr()
	s.url, s.pprofURL = "http://"+addr, "http://"+pprofAddr
	var err error
	s.proc, err = startChild(s.name("shop"), filepath.Join(dir, s.name("shop")+".log"), syscall.SIGKILL, s.bin,
		"--addr", addr, "--pprof-addr", pprofAddr, "--redis-addr", e.redis.Addr, "--replica", s.name("shopcpu"), "--log-level", "warn")
	if err != nil {
		return err
	}
	e.shops = append(e.shops, s)
	if err := waitOK(ctx, s.url+"/readyz"); err != nil {
		log, _ := os.ReadFile(s.proc.log)
		return fmt.Errorf("%s: %w\n%s", s.proc.name, err, log)
	}
	for _, stage := range measuredStages {
		body := fmt.Sprintf(`{"stock":%d}`, stock)
		if _, err := call(ctx, http.MethodPost, s.url+"/api/stages/"+stage+"/reset", body); err != nil {
			return err
		}
	}
	if cfg.noNginx {
		return nil
	}
	bin, err := exec.LookPath("nginx")
	if err != nil {
		if bin, err = exec.LookPath("/usr/sbin/nginx"); err != nil {
			return fmt.Errorf("nginx: %w (or -no-nginx)", err)
		}
	}
	prefix := filepath.Join(dir, s.name("nginx"))
	for _, d := range []string{"logs", "tmp", "conf.d"} {
		if err := os.MkdirAll(filepath.Join(prefix, d), 0o755); err != nil {
			return err
		}
	}
	listen := freeAddr()
	var conf bytes.Buffer
	if err := nginx.Render(&conf, nginx.Config{Listen: listen, Upstreams: []string{addr}, WorkerProcesses: cfg.nginxWorkers}); err != nil {
		return err
	}
	confPath := filepath.Join(prefix, "nginx.conf")
	if err := os.WriteFile(confPath, conf.Bytes(), 0o644); err != nil {
		return err
	}
	if s.nginx, err = startChild(s.name("nginx"), filepath.Join(prefix, "logs", "stdout.log"), syscall.SIGTERM, bin,
		"-p", prefix, "-c", confPath, "-g", "daemon off;"); err != nil {
		return err
	}
	s.frontURL = "http://" + listen
	if err := waitOK(ctx, s.frontURL+"/healthz"); err != nil {
		log, _ := os.ReadFile(filepath.Join(prefix, "logs", "error.log"))
		return fmt.Errorf("%s: %w\n%s", s.nginx.name, err, log)
	}
	return nil
}

func (e *env) stop() error {
	var errs []error
	for _, s := range e.shops {
		if s.nginx != nil {
			errs = append(errs, s.nginx.stop())
		}
		errs = append(errs, s.proc.stop())
	}
	e.redis.Stop()
	return errors.Join(errs...)
}

// redisCPU is the CPU time redis-server used so far.
func (e *env) redisCPU() (time.Duration, error) {
	st, err := proc.Read(e.redis.Pid())
	return st.CPU, err
}

// audit checks that every measured stage's accounting still adds up:
// speed never at the cost of a lost or oversold unit.
func (e *env) audit(ctx context.Context) error {
	var errs []error
	for _, stage := range measuredStages {
		body, err := call(ctx, http.MethodGet, e.shops[0].url+"/api/stages/"+stage+"/audit", "")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var a struct {
			Sold       int64 `json:"sold"`
			Oversold   int64 `json:"oversold"`
			Consistent bool  `json:"consistent"`
		}
		if err := json.Unmarshal(body, &a); err != nil {
			errs = append(errs, fmt.Errorf("audit %s: %w", stage, err))
			continue
		}
		fmt.Printf("audit %s: %d sold, consistent %v, oversold %d\n", stage, a.Sold, a.Consistent, a.Oversold)
		if !a.Consistent || a.Oversold != 0 {
			errs = append(errs, fmt.Errorf("audit %s: %s", stage, body))
		}
	}
	return errors.Join(errs...)
}

// freeAddr is a loopback address that was free a moment ago.
func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "127.0.0.1:1" // refused at once by whoever tries it
	}
	defer ln.Close()
	return ln.Addr().String()
}

// waitOK polls url until it answers 200, for at most 15 s.
func waitOK(ctx context.Context, url string) error {
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, err := call(ctx, http.MethodGet, url, "")
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// call sends one request and returns the body of its 200 answer.
func call(ctx context.Context, method, url, body string) ([]byte, error) {
	return callWithin(ctx, 5*time.Second, method, url, body)
}

func callWithin(ctx context.Context, timeout time.Duration, method, url, body string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s %s: %d %s", method, url, res.StatusCode, b)
	}
	return b, nil
}

// goBuild builds cmd/shop of the tree in the current directory into out.
func goBuild(ctx context.Context, out string) error {
	if _, err := os.Stat(filepath.Join("cmd", "shop")); err != nil {
		return fmt.Errorf("no ./cmd/shop here: run from the repository's root, or give -shop: %w", err)
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/shop")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build ./cmd/shop: %w", err)
	}
	return nil
}

// revision is the tree's commit, "+dirty" when it has changes.
func revision() string {
	out, err := exec.Command("git", "describe", "--always", "--dirty=+dirty").Output()
	if err != nil {
		return "commit unknown"
	}
	return "at " + strconv.Quote(strings.TrimSpace(string(out)))
}
