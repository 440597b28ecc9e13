package deploy

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/lockstep/lockstep/asyncorders"
	"github.com/lockstep/lockstep/internal/loadgen/report"
)

// TestComposeOnEngine runs what a user runs, on a real Docker engine:
// docker compose build and up -d --wait, the loadgen profile (every stage
// of the default scenario, redlock included, then async-stream, which the
// orderworker containers drain), one malformed order message they must
// dead-letter, the k6 profile's async-pay.js (the workers recreated with
// LOCKSTEP_PAY_WITHIN=1s) and spike, then, from inside the compose
// network, Prometheus's targets, every query of the dashboard and the
// alerts (LockstepOversold firing after naive, LockstepDeadLetters after
// the malformed entry), and docker compose down leaving nothing behind.
// Images come from the engine when it has them, else from stand-ins
// (standin_test.go); Grafana, which has none, is left out.
func TestComposeOnEngine(t *testing.T) {
	c, p := composeOnEngine(t)
	c.run(t, "build")
	c.up(t, p, mainStack)
	start := time.Now()

	t.Run("nginx", func(t *testing.T) {
		checkComposeNginx(t, "http://"+c.published["LOCKSTEP_HTTP_PORT"], shopServices(t, p, mainStack))
	})

	if err := os.MkdirAll(repoPath("out", "compose"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := c.runLoadgen(t, "loadgen", "loadgen")
	t.Logf("loadgen:\n%s", tail(out, 40))
	rep := checkLoadgenReport(t, repoPath("out", "compose", "report.json"), start)

	// k6's buyers and payers, as docs/compose.md runs them: the workers
	// recreated with a payment deadline (up -d recreates the services
	// whose configuration changed), the script's thresholds failing the
	// run unless some paid, some were refused as cancelled, none failed,
	// and its audit finds the live units exactly the paid orders'.
	// K6_SCRIPT picks the script in the compose file, so it is the
	// command's environment, not the container's.
	c.env = append(c.env, "LOCKSTEP_PAY_WITHIN=1s")
	c.run(t, "up", "-d", "--wait", "orderworker1", "orderworker2")
	env := c.env
	c.env = append(slices.Clip(env), "K6_SCRIPT=async-pay.js")
	out = c.run(t, "--profile", "k6", "run", "--rm", "-e", "SKU="+rep.Params.SKU, "-e", "PAY_WITHIN=1",
		"-e", "RATE=100", "-e", "DURATION=2s", "-e", "STOCK=150", "-e", "USERS=400", "-e", "K6_PROMETHEUS_RW_PUSH_INTERVAL=1s", "k6")
	c.env = env
	t.Logf("k6 async-pay:\n%s", tail(out, 30))
	// After it: the script's reset empties the dead letters.
	c.deadLetterMalformedOrder(t, rep.Params.SKU)

	// k6's spike on atomic, shorter and lower than its defaults, as in
	// TestLiveStack: this machine is shared. It pushes every second, not
	// every 5 s: the run is about as short.
	out = c.run(t, "--profile", "k6", "run", "--rm", "-e", "START_RATE=50", "-e", "PEAK_RATE=400",
		"-e", "RAMP=1s", "-e", "HOLD=3s", "-e", "STOCK=1000", "-e", "K6_PROMETHEUS_RW_PUSH_INTERVAL=1s",
		// Latency and dropped buyers are BENCHMARKS' business; on a loaded
		// 2-core machine they crossed the spike's limits (exit 99). Failed
		// requests and checks still fail the run.
		// 59 dropped of ~1 600 at load failed it once more (vus_max lagged
		// at 53): a quarter of the spike's buyers may be dropped here.
		"-e", "P99_MS=5000", "-e", "MAX_VUS=1000", "-e", "MAX_DROPPED=400", "k6")
	t.Logf("k6:\n%s", tail(out, 45))
	k6Done := time.Now()

	s := c.prometheus(t)
	for _, shop := range shopServices(t, p, mainStack) {
		s.shops = append(s.shops, replica{name: shop.Name})
	}
	waitComposeTargets(t, s, mainStack)
	waitK6Pushed(t, s)
	waitAlertsSettled(t, s)
	// A rate over k6's few seconds needs a step of the range queries after
	// them: the steps are a scrape interval apart.
	time.Sleep(time.Until(k6Done.Add(2 * s.scrape)))
	end := time.Now()
	t.Run("dashboard queries", func(t *testing.T) { checkDashboardQueries(t, s, start, end, false) })
	t.Run("alert rules", func(t *testing.T) { checkAlerts(t, s) })

	c.down(t, s)
}

// composeOnEngine readies a run of docker-compose.yml on a Docker engine:
// the engine (started when none runs, stopped with the test), every image
// the compose file names (the engine's own, or a stand-in) and a project of
// the test's own, its published ports on free ones, downed when the test
// ends if the test did not.
func composeOnEngine(t *testing.T) (*composeProject, *types.Project) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: the compose stack on a Docker engine takes minutes")
	}
	cache := engineCache(t)
	lockEngine(t, cache)
	e := startEngine(t, cache)
	if v, err := e.output("compose", "version", "--short"); err != nil {
		skipOrFail(t, "the docker compose plugin: %v (scripts/install-compose.sh builds it)", err)
	} else {
		t.Logf("docker compose %s", strings.TrimSpace(v))
	}

	b := &standInBuilder{e: e, cacheDir: cache, facts: readImageFacts(t)}
	for _, image := range composeImages(t) {
		if why, ok := unavailableImages[image]; ok {
			t.Logf("%-40s none: %s", image, why)
			continue
		}
		used := b.ensure(t, image)
		t.Logf("%-40s %s", image, used)
		if strings.HasPrefix(used, "stand-in") {
			b.checkStandIn(t, image)
		}
	}

	c := &composeProject{e: e, name: fmt.Sprintf("lockstep-test-%d", os.Getpid()), published: map[string]string{}}
	c.network = c.name + "_default"
	c.env = []string{fmt.Sprintf("LOCKSTEP_UID=%d", os.Getuid()), fmt.Sprintf("LOCKSTEP_GID=%d", os.Getgid())}
	c.publishFreePorts(t)
	t.Cleanup(func() {
		if !c.downed {
			_ = c.command(append(c.profileArgs(), "down", "--volumes", "--remove-orphans")...).Run()
		}
	})
	return c, loadCompose(t)
}

// up starts, with up -d --wait, the services a plain up starts and those
// of profile, but the ones whose image has no stand-in (Grafana); later
// logs and down commands enable profile too.
func (c *composeProject) up(t *testing.T, p *types.Project, profile string) {
	t.Helper()
	c.profile = profile
	args := append(c.profileArgs(), "up", "-d", "--wait")
	for _, name := range p.ServiceNames() {
		s := p.Services[name]
		if !inProfile(s, mainStack) && !inProfile(s, profile) {
			continue
		}
		if why, ok := unavailableImages[s.Image]; ok {
			t.Logf("left out: %s (%s): %s; this run does not prove its rendering of the dashboard", name, s.Image, why)
			continue
		}
		args = append(args, name)
	}
	for attempt := 1; ; attempt++ {
		out, err := c.runErr(t, args...)
		if err == nil {
			return
		}
		// A port freeAddr found free may be taken by a parallel test before
		// Docker binds it (a CI run's nginx was): up again on other ports,
		// which recreates only the services that publish them.
		if strings.Contains(out, "address already in use") && attempt < 3 {
			t.Logf("a published port was taken meanwhile; up again on other ports")
			c.publishFreePorts(t)
			continue
		}
		logs, _ := c.command(append(c.profileArgs(), "logs", "--no-color", "--tail", "20")...).CombinedOutput()
		t.Fatalf("%v\nthe services' last logs:\n%s", err, logs)
	}
}

// publishedPorts are the host ports compose publishes, each set from the
// environment.
var publishedPorts = []string{"LOCKSTEP_HTTP_PORT", "LOCKSTEP_CLUSTER_HTTP_PORT", "LOCKSTEP_PROMETHEUS_PORT", "LOCKSTEP_GRAFANA_PORT"}

// publishFreePorts points every published port at a loopback port free a
// moment ago, replacing any set before.
func (c *composeProject) publishFreePorts(t *testing.T) {
	t.Helper()
	c.env = slices.DeleteFunc(c.env, func(e string) bool {
		return slices.ContainsFunc(publishedPorts, func(v string) bool { return strings.HasPrefix(e, v+"=") })
	})
	for _, v := range publishedPorts {
		c.published[v] = freeAddr(t)
		c.env = append(c.env, v+"="+port(c.published[v]))
	}
}

// deadLetterMalformedOrder adds, with redis-cli in the redis container, an
// entry no order can be made of to async-stream's order stream of sku, and
// waits until an order worker container moved it to the dead-letter
// stream, the only entry there.
func (c *composeProject) deadLetterMalformedOrder(t *testing.T, sku string) {
	t.Helper()
	q := asyncorders.NewQueue(nil, "async-stream") // for its key names only
	c.run(t, "exec", "-T", "redis", "redis-cli", "XADD", q.Stream(sku), "*", "id", "deploy-engine-malformed")
	for deadline := time.Now().Add(20 * time.Second); ; {
		n := strings.TrimSpace(c.run(t, "exec", "-T", "redis", "redis-cli", "XLEN", q.DeadLetters(sku)))
		switch {
		case n == "1":
			return
		case n != "0":
			t.Fatalf("%s holds %s entries, want only the malformed one", q.DeadLetters(sku), n)
		case time.Now().After(deadline):
			t.Fatal("no order worker dead-lettered the malformed entry in 20s")
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// runLoadgen runs a loadgen service to its end, as docs/compose.md does
// (docker compose --profile profile run --rm service), and returns its
// output. Exit status 3 is the loadgen's "expectations not met": the
// report says which, and the caller judges them.
func (c *composeProject) runLoadgen(t *testing.T, profile, service string) string {
	t.Helper()
	out, err := c.runErr(t, "--profile", profile, "run", "--rm", service)
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == report.ExitExpectationsNotMet) {
		t.Fatal(err)
	}
	return out
}

// prometheus is the project's Prometheus, reached from inside the compose
// network (http://prometheus:9090, where Grafana's datasource points).
func (c *composeProject) prometheus(t *testing.T) *stack {
	return &stack{promURL: "http://prometheus:9090", promClient: c.networkClient(), scrape: prometheusScrapeInterval(t)}
}

// down runs docker compose down, as docs/compose.md does (with the profile up
// enabled), and checks that it left no container, network or volume of
// the project; before it, that no container mounts a volume at all: the
// compose file has no named volume, so a volume is an image's VOLUME no
// tmpfs covers, which a plain down keeps.
func (c *composeProject) down(t *testing.T, s *stack) {
	t.Helper()
	if s != nil {
		// The nc containers leave the network before down removes it.
		s.promClient.CloseIdleConnections()
	}
	mounts := projectVolumes(t, c)
	for _, m := range mounts {
		t.Errorf("%s mounts volume %s at %s (an image's VOLUME that no tmpfs covers): docker compose down keeps it", m.service, m.name, m.destination)
	}
	c.run(t, append(c.profileArgs(), "down")...)
	c.downed = true
	checkNothingLeft(t, c, mounts)
}

// checkComposeNginx: nginx, on its published port, spreads the shop API
// over every replica and hides their /metrics and its stub_status.
func checkComposeNginx(t *testing.T, nginxURL string, shops []types.ServiceConfig) {
	replicas := map[string]bool{}
	for range 3 * len(shops) {
		code, header, body := httpDo(t, http.MethodPost, nginxURL+"/api/stages/atomic/deduct?sku=engine-check", nil)
		if code != http.StatusOK {
			t.Fatalf("deduct through nginx: %d %s", code, body)
		}
		replicas[header.Get("X-Replica")] = true
	}
	for _, s := range shops {
		if !replicas[s.Name] {
			t.Errorf("nginx sent nothing to %s (X-Replica seen: %v)", s.Name, replicas)
		}
	}
	if code, _, _ := httpDo(t, http.MethodGet, nginxURL+"/metrics", nil); code != http.StatusNotFound {
		t.Errorf("GET /metrics through nginx: %d, want 404", code)
	}
	if _, _, body := httpDo(t, http.MethodGet, nginxURL+"/stub_status", nil); strings.Contains(body, "Active connections") {
		t.Errorf("stub_status served on the published port: %s", body)
	}
}

// checkLoadgenReport: the loadgen service's report, written in out/compose
// by this run, has every stage of the scenario run (redlock too: compose
// has its three masters; async-stream: its order workers drained it),
// none broken off, its expectations met; it returns the report.
func checkLoadgenReport(t *testing.T, path string, since time.Time) *report.Report {
	t.Helper()
	rep := readReport(t, path, since)
	ran := checkReportRows(t, rep)
	for _, stage := range append(slices.Clone(stagesRun), "redlock", "async-stream") {
		if ran[stage] == nil {
			t.Errorf("loadgen: %s did not run (ran: %v)", stage, slices.Sorted(maps.Keys(ran)))
		}
	}
	return rep
}

// readReport reads a loadgen service's report.json, which this run (begun
// at since) must have written.
func readReport(t *testing.T, path string, since time.Time) *report.Report {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the loadgen service wrote no report: %v", err)
	}
	var rep report.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.StartedAt.Before(since) {
		t.Fatalf("%s is from %s, before this run", path, rep.StartedAt)
	}
	return &rep
}

// checkReportRows fails the test for every row skipped, broken off or
// below its scenario's expectations, speed comparisons aside, and returns
// the rows that ran by stage.
func checkReportRows(t *testing.T, rep *report.Report) map[string]*report.StageRun {
	t.Helper()
	ran := map[string]*report.StageRun{}
	for i := range rep.Stages {
		st := &rep.Stages[i]
		switch {
		case st.Skipped != "":
			t.Errorf("loadgen: %s skipped: %s", st.Stage, st.Skipped)
		case st.Error != "":
			t.Errorf("loadgen: %s broke off: %s", st.Stage, st.Error)
		default:
			ran[st.Stage] = st
		}
		for _, c := range st.Checks {
			switch {
			case c.Passed:
			case speedComparison(c.Check):
				// Containers on 2 CPUs shared with the rest of the suite:
				// which stage sells faster is the workshop test's and
				// BENCHMARKS' to assert, on a set-up that is not.
				t.Logf("loadgen: %s: %s not met here (not asserted): %s", st.Stage, c.Check, c.Detail)
			default:
				t.Errorf("loadgen: %s: %s failed: %s", st.Stage, c.Check, c.Detail)
			}
		}
	}
	return ran
}

// prometheusScrapeInterval is prometheus/prometheus.yml's.
func prometheusScrapeInterval(t *testing.T) time.Duration {
	t.Helper()
	data, err := os.ReadFile(repoPath("prometheus", "prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Global struct {
			ScrapeInterval string `yaml:"scrape_interval"`
		} `yaml:"global"`
	}
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	d, err := time.ParseDuration(cfg.Global.ScrapeInterval)
	if err != nil {
		t.Fatalf("prometheus.yml scrape_interval: %v", err)
	}
	return d
}

// waitComposeTargets waits until Prometheus has scraped every target of
// prometheus.yml successfully: the static ones, and with the cluster
// profile up, every name its cluster job resolves.
func waitComposeTargets(t *testing.T, s *stack, profile string) {
	t.Helper()
	want := 0
	for _, job := range readPrometheusConfig(t).ScrapeConfigs {
		for _, sc := range job.StaticConfigs {
			want += len(sc.Targets)
		}
		for _, sd := range job.DNSSDConfigs {
			if profile == clusterProfile {
				want += len(sd.Names)
			}
		}
	}
	for deadline := time.Now().Add(6 * s.scrape); ; {
		active, down := s.targets(t)
		if active == want && len(down) == 0 {
			t.Logf("Prometheus: all %d targets up", want)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Prometheus: %d targets of %d, down: %v", active, want, down)
		}
		time.Sleep(time.Second)
	}
}

// waitK6Pushed waits until k6's remote write has reached Prometheus.
func waitK6Pushed(t *testing.T, s *stack) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; {
		var res []struct{}
		s.promAPI(t, "/api/v1/query", url.Values{"query": {`k6_http_reqs_total{name="deduct"}`}}, &struct {
			Result *[]struct{} `json:"result"`
		}{&res})
		if len(res) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("k6's results did not reach Prometheus by remote write in 30s")
		}
		time.Sleep(time.Second)
	}
}

// waitAlertsSettled waits until LockstepOversold fires for naive,
// LockstepDeadLetters for async-stream, and the
// replicas the loadgen's crash steps killed are no longer pending as down,
// so checkAlerts sees the state after the run.
func waitAlertsSettled(t *testing.T, s *stack) {
	t.Helper()
	var last map[string][]string
	for deadline := time.Now().Add(90 * time.Second); ; {
		var alerts struct {
			Alerts []struct {
				Labels map[string]string `json:"labels"`
				State  string            `json:"state"`
			} `json:"alerts"`
		}
		s.promAPI(t, "/api/v1/alerts", nil, &alerts)
		last = map[string][]string{}
		for _, a := range alerts.Alerts {
			last[a.Labels["alertname"]] = append(last[a.Labels["alertname"]], a.Labels["stage"]+a.Labels["instance"]+":"+a.State)
		}
		down := len(last["LockstepReplicaDown"]) + len(last["LockstepRedisDown"]) + len(last["LockstepNginxDown"])
		if slices.Contains(last["LockstepOversold"], "naive:firing") && slices.Contains(last["LockstepDeadLetters"], "async-stream:firing") && down == 0 {
			t.Logf("alerts: %v", last)
			return
		}
		if time.Now().After(deadline) {
			t.Logf("alerts after 90s: %v", last)
			return // checkAlerts says what is wrong
		}
		time.Sleep(s.scrape)
	}
}

// volumeMount is a volume mounted in one of the project's containers.
type volumeMount struct{ service, name, destination string }

// projectVolumes lists the volumes mounted in the project's containers
// (the images' VOLUMEs included), which down must not leave behind.
func projectVolumes(t *testing.T, c *composeProject) []volumeMount {
	t.Helper()
	ids, err := c.e.output("ps", "-aq", "--filter", "label=com.docker.compose.project="+c.name)
	if err != nil {
		t.Fatal(err)
	}
	if len(strings.Fields(ids)) == 0 {
		t.Fatal("no containers in the project")
	}
	out, err := c.e.output(append([]string{"inspect", "--format",
		`{{$s := index .Config.Labels "com.docker.compose.service"}}{{range .Mounts}}{{if eq .Type "volume"}}{{$s}} {{.Name}} {{.Destination}}{{"\n"}}{{end}}{{end}}`},
		strings.Fields(ids)...)...)
	if err != nil {
		t.Fatal(err)
	}
	var mounts []volumeMount
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(line); len(f) == 3 {
			mounts = append(mounts, volumeMount{f[0], f[1], f[2]})
		}
	}
	return mounts
}

// checkNothingLeft: after docker compose down, no container, network or
// volume of the project remains.
func checkNothingLeft(t *testing.T, c *composeProject, mounts []volumeMount) {
	t.Helper()
	label := "label=com.docker.compose.project=" + c.name
	for _, list := range [][]string{
		{"ps", "-aq", "--filter", label},
		{"network", "ls", "-q", "--filter", label},
		{"volume", "ls", "-q", "--filter", label},
	} {
		out, err := c.e.output(list...)
		if err != nil {
			t.Fatal(err)
		}
		if left := strings.Fields(out); len(left) > 0 {
			t.Errorf("after docker compose down, docker %s: %v", strings.Join(list[:2], " "), left)
		}
	}
	for _, m := range mounts {
		if _, err := c.e.output("volume", "inspect", m.name); err == nil {
			t.Errorf("after docker compose down, volume %s (%s's %s) is left behind", m.name, m.service, m.destination)
			// Not kept in the cached store for ever.
			_, _ = c.e.output("volume", "rm", m.name)
		}
	}
}

// speedComparison tells the expectations that compare sales/s between rows.
func speedComparison(check string) bool {
	return check == "fastest" || strings.HasPrefix(check, "faster-than ")
}
