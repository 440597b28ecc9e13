package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lockstep/lockstep/internal/launch"
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
	proc     *launch.Process
	nginx    *launch.Process
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

// cpuOf is the CPU time p's process group (the child and, for nginx, its
// workers) used so far.
func cpuOf(p *launch.Process) (time.Duration, error) {
	var total time.Duration
	pids := proc.Group(p.Pid())
	if len(pids) == 0 {
		return 0, fmt.Errorf("%s exited: %w", p.Name(), p.Err())
	}
	for _, pid := range pids {
		if st, err := proc.Read(pid); err == nil {
			total += st.CPU
		}
	}
	return total, nil
}

// stop ends p with sig (a graceful stop: SIGTERM for the shop, SIGQUIT for
// nginx) and reports an exit other than a clean one or by sig, and one
// that needed the SIGKILL after launch.StopGrace.
func stop(p *launch.Process, sig syscall.Signal) error {
	p.Stop(sig)
	err := p.Err()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &exit) && exit.Sys().(syscall.WaitStatus).Signal() == sig:
		return nil
	case errors.As(err, &exit) && exit.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL:
		return fmt.Errorf("%s did not stop within %v of %v", p.Name(), launch.StopGrace, sig)
	}
	return fmt.Errorf("%s: %w", p.Name(), err)
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
	addr, err := launch.FreeAddr()
	if err != nil {
		return err
	}
	pprofAddr, err := launch.FreeAddr()
	if err != nil {
		return err
	}
	s.url, s.pprofURL = "http://"+addr, "http://"+pprofAddr
	logPath := filepath.Join(dir, s.name("shop")+".log")
	s.proc, err = launch.Start(s.name("shop"), s.bin,
		[]string{"--addr", addr, "--pprof-addr", pprofAddr, "--redis-addr", e.redis.Addr, "--replica", s.name("shopcpu"), "--log-level", "warn"}, nil, logPath)
	if err != nil {
		return err
	}
	e.shops = append(e.shops, s)
	if err := launch.WaitHTTPReady(ctx, s.url+"/readyz", s.proc.Running); err != nil {
		log, _ := os.ReadFile(logPath)
		return fmt.Errorf("%s: %w\n%s", s.proc.Name(), err, log)
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
	bin, err := launch.NginxBinary()
	if err != nil {
		return fmt.Errorf("%w (or -no-nginx)", err)
	}
	n, err := launch.StartNginx(ctx, bin, filepath.Join(dir, s.name("nginx")), nginx.Config{Upstreams: []string{addr}, WorkerProcesses: cfg.nginxWorkers})
	if err != nil {
		return err
	}
	s.nginx, s.frontURL = n.Process, n.URL
	return nil
}

func (e *env) stop() error {
	var errs []error
	for _, s := range e.shops {
		if s.nginx != nil {
			errs = append(errs, stop(s.nginx, syscall.SIGQUIT))
		}
		errs = append(errs, stop(s.proc, syscall.SIGTERM))
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

// revision is the tree's commit, "+dirty" when it has changes.
func revision() string {
	out, err := exec.Command("git", "describe", "--always", "--dirty=+dirty").Output()
	if err != nil {
		return "commit unknown"
	}
	return "at " + strconv.Quote(strings.TrimSpace(string(out)))
}
