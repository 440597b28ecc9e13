package deploy

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/lockstep/lockstep/nginx"
)

// composeNginxConf renders nginx/nginx.conf for the compose file's shop
// services, as deploy/nginx/nginx.conf holds it.
func composeNginxConf(t *testing.T, p *types.Project) []byte {
	t.Helper()
	var upstreams []string
	for _, s := range shopServices(t, p) {
		upstreams = append(upstreams, fmt.Sprintf("%s:%d", s.Name, listenPort(t, env(s, "LOCKSTEP_ADDR"))))
	}
	var b bytes.Buffer
	b.WriteString("# Generated from nginx/nginx.conf for docker-compose.yml's shop services by\n" +
		"# go test ./deploy -run TestGenerated -update; do not edit by hand.\n\n")
	if err := nginx.Render(&b, nginx.Config{Listen: "80", Upstreams: upstreams, WorkerProcesses: 2}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestGenerated keeps the committed generated files equal to what their
// sources produce now.
func TestGenerated(t *testing.T) {
	dashboard, err := DashboardJSON()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		path string
		want []byte
	}{
		{repoPath("grafana", "dashboards", "lockstep.json"), dashboard},
		{repoPath("deploy", "nginx", "nginx.conf"), composeNginxConf(t, loadCompose(t))},
	} {
		if *update {
			if err := os.WriteFile(f.path, f.want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(f.path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, f.want) {
			t.Errorf("%s is stale: go test ./deploy -run TestGenerated -update", f.path)
		}
	}
}

func TestComposeServices(t *testing.T) {
	p := loadCompose(t)
	want := []string{"etcd", "grafana", "k6", "loadgen", "mariadb", "nginx", "nginx-exporter", "prometheus", "redis", "redis-exporter", "redis2", "redis3", "shop1", "shop2", "shop3", "zookeeper"}
	if got := p.ServiceNames(); !slices.Equal(got, want) {
		t.Fatalf("services %v, want %v", got, want)
	}
	// The stock's Redis and redlock's two other masters: independent, the
	// same password, no persistence.
	redisMasters := []string{"redis", "redis2", "redis3"}
	password := ""
	for _, name := range redisMasters {
		redis := p.Services[name]
		pass := ""
		if i := slices.Index(redis.Command, "--requirepass"); i >= 0 && i+1 < len(redis.Command) {
			pass = redis.Command[i+1]
		}
		if pass == "" || (password != "" && pass != password) {
			t.Errorf("%s runs with --requirepass %q, want the same password as the others: %q", name, pass, redis.Command)
		}
		password = pass
		for _, off := range []string{"--save ", "--appendonly no"} {
			if !strings.Contains(strings.Join(redis.Command, " ")+" ", off) {
				t.Errorf("%s: %q lacks %s: no persistence", name, redis.Command, off)
			}
		}
		if slices.Contains(redis.Command, "--replicaof") {
			t.Errorf("%s is a replica: redlock needs independent masters", name)
		}
	}
	for _, s := range shopServices(t, p) {
		if env(s, "LOCKSTEP_REPLICA") != s.Name {
			t.Errorf("%s: LOCKSTEP_REPLICA %q, want its service name", s.Name, env(s, "LOCKSTEP_REPLICA"))
		}
		if want := "redis:6379,redis2:6379,redis3:6379"; env(s, "LOCKSTEP_REDIS_ADDR") != want || env(s, "LOCKSTEP_REDIS_PASSWORD") != password {
			t.Errorf("%s: Redis %q with password %q, want %s (the stock first, redlock's three masters) with their --requirepass", s.Name, env(s, "LOCKSTEP_REDIS_ADDR"), env(s, "LOCKSTEP_REDIS_PASSWORD"), want)
		}
		if env(s, "LOCKSTEP_ADMIN_TOKEN") == "" {
			t.Errorf("%s: no admin token: admin routes would only accept loopback clients, which nothing in compose is", s.Name)
		}
		if len(s.Ports) > 0 {
			t.Errorf("%s publishes %v: replicas (and their /metrics) are reached through nginx only", s.Name, s.Ports)
		}
		if s.Build == nil || s.Image != "lockstep:local" {
			t.Errorf("%s: want build . and image lockstep:local, got build %v image %q", s.Name, s.Build, s.Image)
		}
	}

	published := map[string]string{}
	for _, name := range p.ServiceNames() {
		for _, port := range p.Services[name].Ports {
			published[name] = fmt.Sprintf("%s:%d", port.Published, port.Target)
		}
	}
	if want := map[string]string{"nginx": "8080:80", "grafana": "3000:3000", "prometheus": "9090:9090"}; !maps(published, want) {
		t.Errorf("published ports %v, want %v (the README documents them)", published, want)
	}

	// Start-up order: whatever a service waits for must have a healthcheck,
	// and it waits for it to be healthy, not merely started.
	for _, name := range p.ServiceNames() {
		for dep, d := range p.Services[name].DependsOn {
			if d.Condition != types.ServiceConditionHealthy {
				t.Errorf("%s depends on %s with condition %q, want service_healthy", name, dep, d.Condition)
			}
			if hc := p.Services[dep].HealthCheck; hc == nil || len(hc.Test) == 0 {
				t.Errorf("%s waits for %s to be healthy, but %s has no healthcheck", name, dep, dep)
			}
		}
	}
	for _, profile := range []string{"loadgen", "k6"} {
		if s := p.Services[profile]; !slices.Equal(s.Profiles, []string{profile}) {
			t.Errorf("%s: profiles %v, want [%s]", profile, s.Profiles, profile)
		}
	}

	if !slices.Contains(p.Services["prometheus"].Command, "--web.enable-remote-write-receiver") {
		t.Error("prometheus: no --web.enable-remote-write-receiver, k6 cannot push its results")
	}
	if got := env(p.Services["k6"], "K6_PROMETHEUS_RW_SERVER_URL"); got != "http://prometheus:9090/api/v1/write" {
		t.Errorf("k6 writes to %q, want Prometheus's remote-write receiver", got)
	}
	if !slices.Contains(p.Services["k6"].Command, "experimental-prometheus-rw") {
		t.Errorf("k6 command %q sends no results to Prometheus", p.Services["k6"].Command)
	}
	if got := env(p.Services["grafana"], "GF_AUTH_ANONYMOUS_ENABLED"); got != "true" {
		t.Errorf("grafana: anonymous access %q, want true", got)
	}
	// The loadgen annotates stage runs as Grafana's admin: anonymous
	// viewers may not.
	grafana := p.Services["grafana"]
	wantURL := fmt.Sprintf("http://%s:%s@grafana:3000", env(grafana, "GF_SECURITY_ADMIN_USER"), env(grafana, "GF_SECURITY_ADMIN_PASSWORD"))
	if got := env(p.Services["loadgen"], "LOCKSTEP_GRAFANA_URL"); got != wantURL || env(grafana, "GF_SECURITY_ADMIN_PASSWORD") == "" {
		t.Errorf("loadgen: LOCKSTEP_GRAFANA_URL %q, want Grafana's admin, %q", got, wantURL)
	}
}

func maps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestComposeMountsExist: every bind mount's source is in the repository,
// and the files the services are told to read through them are there.
func TestComposeMountsExist(t *testing.T) {
	p := loadCompose(t)
	root, _ := filepath.Abs(repo)
	// hostPath maps a path inside a container back to the repository file
	// that a bind mount puts there.
	hostPath := func(s types.ServiceConfig, inContainer string) string {
		for _, v := range s.Volumes {
			if rel, ok := strings.CutPrefix(inContainer, v.Target); ok && v.Type == types.VolumeTypeBind {
				return filepath.Join(v.Source, rel)
			}
		}
		t.Errorf("%s: %s is not under any of its bind mounts", s.Name, inContainer)
		return ""
	}
	mounts := 0
	for _, name := range p.ServiceNames() {
		s := p.Services[name]
		for _, v := range s.Volumes {
			if v.Type != types.VolumeTypeBind {
				continue
			}
			mounts++
			if !strings.HasPrefix(v.Source, root) {
				t.Errorf("%s mounts %s, outside the repository", name, v.Source)
			}
			if v.Source == filepath.Join(root, "out", "compose") {
				continue // the loadgen's report directory, created on first run
			}
			if _, err := os.Stat(v.Source); err != nil {
				t.Errorf("%s mounts a missing %s", name, v.Source)
			}
			if !v.ReadOnly {
				t.Errorf("%s mounts %s read-write; configuration is mounted read-only", name, v.Source)
			}
		}
		if s.Build != nil {
			if _, err := os.Stat(filepath.Join(s.Build.Context, "Dockerfile")); err != nil {
				t.Errorf("%s builds %s without a Dockerfile", name, s.Build.Context)
			}
		}
	}
	if mounts < 6 {
		t.Errorf("only %d bind mounts found", mounts)
	}
	// Files named inside the containers.
	ngx := p.Services["nginx"]
	conf := regexp.MustCompile(`nginx .*-c (/\S+)`).FindStringSubmatch(strings.Join(ngx.Command, " "))
	if conf == nil {
		t.Fatalf("nginx command %q names no -c config", ngx.Command)
	}
	promConf, _ := flagValue(p.Services["prometheus"].Command, "config.file")
	grafana := p.Services["grafana"]
	k6Script := p.Services["k6"].Command[len(p.Services["k6"].Command)-1]
	for _, f := range []string{
		hostPath(ngx, conf[1]),
		hostPath(p.Services["prometheus"], promConf),
		hostPath(grafana, env(grafana, "GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH")),
		hostPath(grafana, "/etc/grafana/provisioning/datasources/prometheus.yml"),
		hostPath(grafana, "/etc/grafana/provisioning/dashboards/lockstep.yml"),
		hostPath(p.Services["k6"], strings.ReplaceAll(k6Script, "${K6_SCRIPT:-spike.js}", "spike.js")),
		hostPath(p.Services["k6"], "/scripts/stage-walk.js"),
	} {
		if st, err := os.Stat(f); err != nil || st.IsDir() {
			t.Errorf("a service reads %s, which is not a file in the repository", f)
		}
	}
}

// TestPrometheusTargetsAreComposeServices: every scrape target is a compose
// service on the port it listens on, and every shop replica is scraped.
func TestPrometheusTargetsAreComposeServices(t *testing.T) {
	p := loadCompose(t)
	listens := map[string]int{"localhost": 9090} // Prometheus scraping itself
	for _, s := range shopServices(t, p) {
		listens[s.Name] = listenPort(t, env(s, "LOCKSTEP_ADDR"))
	}
	nginxExporter, _ := flagValue(p.Services["nginx-exporter"].Command, "web.listen-address")
	listens["nginx-exporter"] = listenPort(t, nginxExporter)
	listens["redis-exporter"] = listenPort(t, env(p.Services["redis-exporter"], "REDIS_EXPORTER_WEB_LISTEN_ADDRESS"))

	cfg := readPrometheusConfig(t)
	scraped := map[string]bool{}
	for _, job := range cfg.ScrapeConfigs {
		for _, sc := range job.StaticConfigs {
			for _, target := range sc.Targets {
				host, port, _ := strings.Cut(target, ":")
				want, ok := listens[host]
				if !ok {
					t.Errorf("job %s scrapes %s: no such compose service", job.JobName, target)
					continue
				}
				if port != fmt.Sprint(want) {
					t.Errorf("job %s scrapes %s, but %s listens on %d", job.JobName, target, host, want)
				}
				if r := sc.Labels["replica"]; job.JobName == "shop" && r != host {
					t.Errorf("job shop: target %s has replica label %q", target, r)
				}
				scraped[host] = true
			}
		}
	}
	for host := range listens {
		if !scraped[host] {
			t.Errorf("%s is not scraped", host)
		}
	}
}

// prometheusConfig is the part of prometheus.yml the checks read.
type prometheusConfig struct {
	RuleFiles     []string `yaml:"rule_files"`
	ScrapeConfigs []struct {
		JobName       string `yaml:"job_name"`
		StaticConfigs []struct {
			Targets []string          `yaml:"targets"`
			Labels  map[string]string `yaml:"labels"`
		} `yaml:"static_configs"`
	} `yaml:"scrape_configs"`
}

func readPrometheusConfig(t *testing.T) prometheusConfig {
	t.Helper()
	data, err := os.ReadFile(repoPath("prometheus", "prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg prometheusConfig
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestPromtool: Prometheus's own checker accepts the config and the rules,
// and the rules' unit tests (prometheus/tests/) pass.
func TestPromtool(t *testing.T) {
	promtool := tool(t, "promtool")
	rules, err := filepath.Glob(repoPath("prometheus", "rules", "*.yml"))
	if err != nil || len(rules) == 0 {
		t.Fatalf("no rule files: %v", err)
	}
	for _, args := range [][]string{
		{"check", "config", repoPath("prometheus", "prometheus.yml")},
		append([]string{"check", "rules"}, rules...),
		{"test", "rules", repoPath("prometheus", "tests", "lockstep_test.yml")},
	} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestComposeNginxConfig runs nginx -t on the configuration the nginx
// service mounts (deploy/nginx/nginx.conf and conf.d/), with the compose
// service names resolving as Docker's DNS would resolve them: nginx
// resolves upstream hosts while it checks. The names go to a private
// /etc/hosts in a mount namespace of the check's own.
func TestComposeNginxConfig(t *testing.T) {
	bin := tool(t, "nginx", "/usr/sbin")
	unshare := tool(t, "unshare")
	p := loadCompose(t)
	dir := t.TempDir()
	hosts := "127.0.0.1 localhost\n"
	for _, s := range shopServices(t, p) {
		hosts += "127.0.0.1 " + s.Name + "\n"
	}
	hostsFile := filepath.Join(dir, "hosts")
	if err := os.WriteFile(hostsFile, []byte(hosts), 0o644); err != nil {
		t.Fatal(err)
	}
	prefix := filepath.Join(dir, "prefix")
	for _, d := range []string{"logs", "tmp"} {
		if err := os.MkdirAll(filepath.Join(prefix, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	conf, _ := filepath.Abs(repoPath("deploy", "nginx", "nginx.conf"))
	script := `mount --bind "$1" /etc/hosts && exec "$2" -t -p "$3/" -c "$4" -g 'daemon off; error_log stderr warn;'`
	out, err := exec.Command(unshare, "--mount", "sh", "-c", script, "sh", hostsFile, bin, prefix, conf).CombinedOutput()
	if err != nil {
		if os.Getenv("CI") != "true" && bytes.Contains(out, []byte("unshare failed")) {
			t.Skipf("no mount namespace here: %s", out)
		}
		t.Fatalf("nginx -t on the compose configuration: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("test is successful")) {
		t.Fatalf("nginx -t: %s", out)
	}
	rendered, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"server shop1:8080 ", "server shop2:8080 ", "server shop3:8080 ", "keepalive ", "location = /metrics", "include conf.d/*.conf;"} {
		if !bytes.Contains(rendered, []byte(want)) {
			t.Errorf("deploy/nginx/nginx.conf lacks %q", want)
		}
	}
}
