package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/lockstep/lockstep/nginx"
)

// stack is the compose set-up rebuilt from the same files on loopback
// ports, with the same programs Debian packages: redis-server with a
// password, the shop replicas as processes, nginx (nginx/nginx.conf
// rendered as cmd/workshop renders it, plus compose's conf.d), both
// exporters and Prometheus on prometheus/prometheus.yml with its targets
// moved here.
type stack struct {
	dir           string
	redisAddr     string
	redisPassword string
	adminToken    string
	shops         []replica
	orderWorkers  []*process
	// startWorkers starts compose's order workers with their services'
	// environment plus extra (a compose user's `LOCKSTEP_PAY_WITHIN=1s
	// docker compose up`), and records them in orderWorkers.
	startWorkers func(t *testing.T, extra ...string)
	nginxURL     string
	statusURL    string // nginx's stub_status server (compose's conf.d)
	exporters    map[string]string
	promURL      string
	scrape       time.Duration // Prometheus's scrape and evaluation interval
	promClient   *http.Client  // how Prometheus is reached; nil: directly
}

type replica struct{ name, url string }

// scrapeInterval is the live Prometheus's, instead of compose's 5s, so each
// short stage run spans several scrapes: a histogram's rate, and so its
// quantiles, needs two samples that differ.
const scrapeInterval = 500 * time.Millisecond

// process is a program the stack started, in its own process group, killed
// with the test (and by the kernel if the test binary dies).
type process struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func startProcess(t *testing.T, dir, name, bin string, args, env []string) *process {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	// Appended to: a program started again (the order workers) keeps its
	// first run's log.
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	p := &process{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	t.Cleanup(p.stop)
	return p
}

// stopWorkers stops every order worker the stack started.
func (s *stack) stopWorkers() {
	for _, w := range s.orderWorkers {
		w.stop()
	}
	s.orderWorkers = nil
}

// stop ends p's process group: SIGTERM, and SIGKILL if it is still there
// after 5 s. Stopping a stopped process does nothing.
func (p *process) stop() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// waitHTTP polls url until it answers 200, failing early if p exits.
func (p *process) waitHTTP(t *testing.T, url string, header http.Header) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-p.done:
			log, _ := os.ReadFile(p.log)
			t.Fatalf("%s exited before %s answered:\n%s", p.name, url, log)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(p.log)
			t.Fatalf("%s: %s not ready after 30s (%v):\n%s", p.name, url, err, log)
		}
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// startStack brings the stack up and waits until Prometheus has every
// target up.
func startStack(t *testing.T, compose *types.Project) *stack {
	t.Helper()
	bins := map[string]string{
		"redis-server": tool(t, "redis-server"),
		"nginx":        tool(t, "nginx", "/usr/sbin"),
		"prometheus":   tool(t, "prometheus"),
		"nginx-exp":    tool(t, "prometheus-nginx-exporter"),
		"redis-exp":    tool(t, "prometheus-redis-exporter"),
	}
	s := &stack{dir: t.TempDir(), redisPassword: "deploy-test-password", adminToken: "deploy-test-token",
		exporters: map[string]string{}, scrape: scrapeInterval}

	s.redisAddr = freeAddr(t)
	redis := startProcess(t, s.dir, "redis", bins["redis-server"], []string{
		"--port", port(s.redisAddr), "--bind", "127.0.0.1", "--requirepass", s.redisPassword,
		"--save", "", "--appendonly", "no", "--dir", s.dir, "--loglevel", "warning",
	}, nil)
	waitRedis(t, redis, s.redisAddr, s.redisPassword)

	shopBin, workerBin := filepath.Join(s.dir, "shop"), filepath.Join(s.dir, "orderworker")
	for bin, pkg := range map[string]string{shopBin: "../cmd/shop", workerBin: "../cmd/orderworker"} {
		if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	// A compose service's own environment, pointed at this stack. No
	// MariaDB here: the order stages keep their orders in one embedded
	// SQLite file the shops and the order workers share (the last value
	// wins).
	serviceEnv := func(svc types.ServiceConfig) []string {
		var env []string
		for k, v := range svc.Environment {
			if v != nil {
				env = append(env, k+"="+*v)
			}
		}
		return append(env, "LOCKSTEP_REDIS_ADDR="+s.redisAddr, "LOCKSTEP_REDIS_PASSWORD="+s.redisPassword,
			"LOCKSTEP_MYSQL_DSN=", "LOCKSTEP_ORDERS_SQLITE="+filepath.Join(s.dir, "orders.db"))
	}
	var upstreams []string
	for _, svc := range shopServices(t, compose, mainStack) {
		addr := freeAddr(t)
		env := append(serviceEnv(svc), "LOCKSTEP_ADDR="+addr, "LOCKSTEP_ADMIN_TOKEN="+s.adminToken)
		p := startProcess(t, s.dir, svc.Name, shopBin, nil, env)
		r := replica{name: svc.Name, url: "http://" + addr}
		p.waitHTTP(t, r.url+"/readyz", nil)
		s.shops = append(s.shops, r)
		upstreams = append(upstreams, addr)
	}
	// compose's order workers, as the workshop starts them: the same
	// program under its service's consumer name, on the async stages'
	// streams (the live load's async-stream run needs them to drain).
	workers := servicesRunning(compose, mainStack, "orderworker")
	if len(workers) == 0 {
		t.Fatal("compose runs no order worker")
	}
	s.startWorkers = func(t *testing.T, extra ...string) {
		for _, svc := range workers {
			s.orderWorkers = append(s.orderWorkers, startProcess(t, s.dir, svc.Name, workerBin, nil, append(serviceEnv(svc), extra...)))
		}
	}
	s.startWorkers(t)

	// nginx: the template rendered as the workshop renders it, and
	// compose's conf.d with the status server moved to a free port.
	prefix := filepath.Join(s.dir, "nginx")
	for _, d := range []string{"logs", "tmp", "conf.d"} {
		if err := os.MkdirAll(filepath.Join(prefix, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	listen, statusAddr := freeAddr(t), freeAddr(t)
	var conf bytes.Buffer
	if err := nginx.Render(&conf, nginx.Config{Listen: listen, Upstreams: upstreams, WorkerProcesses: 1}); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(prefix, "nginx.conf"), conf.Bytes())
	status, err := os.ReadFile(repoPath("deploy", "nginx", "conf.d", "status.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Count(status, []byte("listen 8081;")) != 1 {
		t.Fatal("deploy/nginx/conf.d/status.conf: want one `listen 8081;` to move")
	}
	writeFile(t, filepath.Join(prefix, "conf.d", "status.conf"), bytes.Replace(status, []byte("listen 8081;"), []byte("listen "+statusAddr+";"), 1))
	ngx := startProcess(t, s.dir, "nginx", bins["nginx"], []string{"-p", prefix, "-c", filepath.Join(prefix, "nginx.conf"), "-g", "daemon off;"}, nil)
	s.nginxURL, s.statusURL = "http://"+listen, "http://"+statusAddr+"/stub_status"
	ngx.waitHTTP(t, s.nginxURL+"/readyz", nil)
	ngx.waitHTTP(t, s.statusURL, nil)

	// The exporters, with the settings compose gives them.
	s.exporters["nginx"] = freeAddr(t)
	nginxExp := startProcess(t, s.dir, "nginx-exporter", bins["nginx-exp"], []string{
		"-nginx.scrape-uri=" + s.statusURL, "-web.listen-address=" + s.exporters["nginx"],
	}, nil)
	s.exporters["redis"] = freeAddr(t)
	redisExp := startProcess(t, s.dir, "redis-exporter", bins["redis-exp"], []string{
		"-redis.addr=redis://" + s.redisAddr, "-web.listen-address=" + s.exporters["redis"],
	}, []string{"REDIS_PASSWORD=" + s.redisPassword})
	nginxExp.waitHTTP(t, "http://"+s.exporters["nginx"]+"/metrics", nil)
	redisExp.waitHTTP(t, "http://"+s.exporters["redis"]+"/metrics", nil)

	// Prometheus: compose's flags and prometheus.yml, targets moved here.
	promAddr := freeAddr(t)
	s.promURL = "http://" + promAddr
	configPath := filepath.Join(s.dir, "prometheus.yml")
	writeFile(t, configPath, localPrometheusConfig(t, s, promAddr))
	var args []string
	for _, a := range compose.Services["prometheus"].Command {
		if !strings.HasPrefix(a, "--config.file=") && !strings.HasPrefix(a, "--storage.tsdb.path=") {
			args = append(args, a)
		}
	}
	args = append(args, "--config.file="+configPath, "--storage.tsdb.path="+filepath.Join(s.dir, "tsdb"), "--web.listen-address="+promAddr)
	prom := startProcess(t, s.dir, "prometheus", bins["prometheus"], args, nil)
	prom.waitHTTP(t, s.promURL+"/-/ready", nil)
	s.waitTargetsUp(t, prom)
	return s
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func waitRedis(t *testing.T, p *process, addr, password string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			fmt.Fprintf(conn, "AUTH %s\r\nPING\r\n", password)
			buf := make([]byte, 64)
			_ = conn.SetReadDeadline(time.Now().Add(time.Second))
			var got []byte
			for !bytes.Contains(got, []byte("+PONG")) {
				n, err := conn.Read(buf)
				if err != nil {
					break
				}
				got = append(got, buf[:n]...)
			}
			conn.Close()
			if bytes.Contains(got, []byte("+PONG")) {
				return
			}
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(p.log)
			t.Fatalf("redis-server at %s not ready: %v\n%s", addr, err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// localPrometheusConfig is prometheus/prometheus.yml with each job's
// targets replaced by this stack's (the labels, rules and everything else
// kept), without the cluster job, and scrapeInterval as the scrape and
// evaluation interval.
func localPrometheusConfig(t *testing.T, s *stack, promAddr string) []byte {
	t.Helper()
	data, err := os.ReadFile(repoPath("prometheus", "prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	global := cfg["global"].(map[string]any)
	for _, k := range []string{"scrape_interval", "scrape_timeout", "evaluation_interval"} {
		global[k] = scrapeInterval.String()
	}
	rulesDir, err := filepath.Abs(repoPath("prometheus"))
	if err != nil {
		t.Fatal(err)
	}
	var ruleFiles []any
	for _, f := range cfg["rule_files"].([]any) {
		ruleFiles = append(ruleFiles, filepath.Join(rulesDir, f.(string)))
	}
	cfg["rule_files"] = ruleFiles
	shopAddr := map[string]string{}
	for _, r := range s.shops {
		shopAddr[r.name] = strings.TrimPrefix(r.url, "http://")
	}
	// The cluster job finds its nodes by Docker's DNS; this stack runs no
	// cluster (the engine test's cluster run checks that job).
	var jobs []any
	for _, job := range cfg["scrape_configs"].([]any) {
		if _, byDNS := job.(map[string]any)["dns_sd_configs"]; !byDNS {
			jobs = append(jobs, job)
		}
	}
	cfg["scrape_configs"] = jobs
	for _, job := range jobs {
		job := job.(map[string]any)
		for _, sc := range job["static_configs"].([]any) {
			sc := sc.(map[string]any)
			var targets []any
			for _, target := range sc["targets"].([]any) {
				host, _, _ := strings.Cut(target.(string), ":")
				local := map[string]string{
					"nginx-exporter": s.exporters["nginx"], "redis-exporter": s.exporters["redis"], "localhost": promAddr,
				}[host]
				if a, ok := shopAddr[host]; ok {
					local = a
				}
				if local == "" {
					t.Fatalf("prometheus.yml target %s: no such part in the stack", target)
				}
				targets = append(targets, local)
			}
			sc["targets"] = targets
		}
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// waitTargetsUp waits until Prometheus scraped every target successfully.
func (s *stack) waitTargetsUp(t *testing.T, prom *process) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		active, down := s.targets(t)
		if active == len(s.shops)+3 && len(down) == 0 {
			return
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(prom.log)
			t.Fatalf("Prometheus targets not all up: %d targets, down %v\n%s", active, down, log)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// targets says how many targets Prometheus scrapes, and which are not up.
func (s *stack) targets(t *testing.T) (active int, down []string) {
	t.Helper()
	var res struct {
		ActiveTargets []struct {
			ScrapeURL string `json:"scrapeUrl"`
			Health    string `json:"health"`
			LastError string `json:"lastError"`
		} `json:"activeTargets"`
	}
	s.promAPI(t, "/api/v1/targets", nil, &res)
	for _, tg := range res.ActiveTargets {
		if tg.Health != "up" {
			down = append(down, tg.ScrapeURL+" "+tg.Health+" "+tg.LastError)
		}
	}
	return len(res.ActiveTargets), down
}

// promAPI calls Prometheus's HTTP API and decodes its data into v, failing
// the test on any error.
func (s *stack) promAPI(t *testing.T, path string, params url.Values, v any) {
	t.Helper()
	if err := s.promCall(path, params, v); err != nil {
		t.Fatal(err)
	}
}

func (s *stack) promCall(path string, params url.Values, v any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.promURL+path+"?"+params.Encode(), nil)
	if err != nil {
		return err
	}
	client := s.promClient
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("prometheus %s: %w", path, err)
	}
	defer resp.Body.Close()
	var body struct {
		Status    string          `json:"status"`
		Data      json.RawMessage `json:"data"`
		ErrorType string          `json:"errorType"`
		Error     string          `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return fmt.Errorf("prometheus %s: %w", path, err)
	}
	if body.Status != "success" {
		return fmt.Errorf("prometheus %s %v: %s: %s", path, params, body.ErrorType, body.Error)
	}
	if v == nil {
		return nil
	}
	return json.Unmarshal(body.Data, v)
}

// scrapeNames lists the sample names of a Prometheus text exposition.
func scrapeNames(t *testing.T, url string) map[string]bool {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: %d %v", url, resp.StatusCode, err)
	}
	names := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			names[line[:i]] = true
		}
	}
	return names
}

// httpDo sends one request and returns the status, a header and the body.
func httpDo(t *testing.T, method, url string, header http.Header) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(body)
}

func formatTime(ts time.Time) string {
	return strconv.FormatFloat(float64(ts.UnixMilli())/1000, 'f', 3, 64)
}
